"""Chapter 11's stretch explorer: RoPE's frequencies under interpolation, NTK-aware scaling and YaRN, moving with s."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from .. import validate
from ..long_context import interpolation, ntk_aware, yarn, yarn_attention_factor
from ..position import frequencies
from ._explorer import Explorer, rounded

__all__ = ["stretch_view", "stretch_explorer", "STRETCH_METHODS"]

#: The slider's range and step: the scale factor s.
S_MIN, S_MAX, S_STEP = 1.0, 8.0, 0.25
#: The frequencies :func:`stretch_explorer` draws, named as in chapter 11's table.
STRETCH_METHODS = ("interpolation", "NTK-aware", "YaRN as printed", "YaRN as coded")
STRETCH_HEIGHT = 190  # the plot's height, in px


def _pair_at(d: int, trained_len: int, base: float, turns: float) -> float:
    """The pair index (not rounded) at which a pair makes ``turns`` turns over the trained length."""
    return d * math.log(trained_len / (2 * math.pi * turns)) / (2 * math.log(base))


def stretch_view(d: int, s: float, trained_len: int, base: float = 10000.0, alpha: float = 1.0,
                 beta: float = 32.0) -> dict:
    """What :func:`stretch_explorer` shows at scale s (chapter 11): each method's frequencies, ``(d/2,)`` each.

    ``frequencies`` maps each of ``STRETCH_METHODS`` to its d/2 stretched frequencies and ``factors`` to
    those over RoPE's own; ``yarn_factor`` is YaRN's factor on q and k; ``bounds`` the pair indices (not
    rounded) at which a pair turns β and α times over the trained length, where YaRN's ramp begins and ends.
    """
    theta = frequencies(d, base)  # (d/2,)
    stretched = {
        "interpolation": interpolation(theta, s),
        "NTK-aware": ntk_aware(d, s, base),
        "YaRN as printed": yarn(d, s, trained_len, base, alpha, beta),
        "YaRN as coded": yarn(d, s, trained_len, base, alpha, beta, rounded=True),
    }
    return {"frequencies": {name: f.tolist() for name, f in stretched.items()},
            "factors": {name: (f / theta).tolist() for name, f in stretched.items()},
            "yarn_factor": yarn_attention_factor(s),
            "bounds": {"beta": _pair_at(d, trained_len, base, beta), "alpha": _pair_at(d, trained_len, base, alpha)}}


def stretch_explorer(d: int, trained_len: int, s: float = 4.0, base: float = 10000.0, alpha: float = 1.0,
                     beta: float = 32.0) -> Explorer:
    """Each pair's frequency under interpolation, NTK-aware scaling and YaRN (as printed and as coded) over
    RoPE's own, a line per method over the pairs, with a slider for the scale s from 1 to 8 (chapter 11).

    The browser computes them from the formulas at the slider's s, as :func:`stretch_view` does in Python;
    rules mark where YaRN's ramp begins and ends (where a pair turns β and α times over ``trained_len``).
    """
    view = stretch_view(d, s, trained_len, base, alpha, beta)  # checks the input
    validate.real(s, "s", at_least=S_MIN, at_most=S_MAX, why=f"the slider's range is {S_MIN:g} … {S_MAX:g}")
    theta = frequencies(d, base)  # (d/2,)
    data = pd.DataFrame({"i": list(range(d // 2)), "theta": [rounded(x) for x in theta.tolist()],
                         "turns": [rounded(x) for x in (trained_len * theta / (2 * math.pi)).tolist()]})

    def pair_at(turns: float) -> str:  # the pair index (not rounded) at which a pair turns so many times
        return f"({d} * log({trained_len} / (2 * PI * {turns})) / (2 * log({base})))"

    low = f"max(floor({pair_at(beta)}), 0)"
    clipped = f"min(ceil({pair_at(alpha)}), {d - 1})"
    high = f"({clipped} == {low} ? {clipped} + 0.001 : {clipped})"  # the authors' guard against a ramp of width 0
    S = alt.param(name="scale_s", value=s, bind=alt.binding_range(min=S_MIN, max=S_MAX, step=S_STEP, name="scale s "))
    computed = alt.Chart(data).transform_calculate(  # each a transform of its own, in this order
        interpolation=f"datum.theta / {S.name}",
        ntk=f"pow({base} * pow({S.name}, {d} / {d - 2}), -2 * datum.i / {d})",
        printed_gamma=f"clamp((datum.turns - {alpha}) / ({beta} - {alpha}), 0, 1)",
        printed=f"(1 - datum.printed_gamma) * datum.theta / {S.name} + datum.printed_gamma * datum.theta",
        coded_gamma=f"1 - clamp((datum.i - {low}) / ({high} - {low}), 0, 1)",
        coded=f"(1 - datum.coded_gamma) * datum.theta / {S.name} + datum.coded_gamma * datum.theta",
    )
    names = dict(zip(["interpolation", "ntk", "printed", "coded"], STRETCH_METHODS, strict=True))
    shown_names = {**names, "printed": f"YaRN as printed, β = {beta:g}"}
    method = "{" + ", ".join(f"'{key}': '{name}'" for key, name in shown_names.items()) + "}"
    pairs = alt.Scale(domain=[0, d // 2 - 1])
    x = alt.X("i:Q", title="pair i (faster turning on the left)", scale=pairs)
    y = alt.Y("factor:Q", title="θ′ᵢ / θᵢ", scale=alt.Scale(domain=[0, 1]))
    colour = alt.Color("method:N", sort=list(shown_names.values()), title=None,
                       legend=alt.Legend(orient="bottom", columns=2))
    folded = computed.transform_fold(list(names), as_=["key", "frequency"]).transform_calculate(
        method=f"{method}[datum.key]", factor="datum.frequency / datum.theta",
        label="datum.method + ', pair ' + datum.i + ': frequency ' + format(datum.frequency, '.8e')"
              " + ', ' + format(datum.factor, '.8f') + ' times θ_i'",
    )
    lines = folded.mark_line(strokeWidth=2, aria=False).encode(x=x, y=y, color=colour, detail="method:N")
    dots = folded.mark_point(filled=True, size=12 if d > 16 else 40).encode(
        x=x, y=y, color=colour, description=alt.Description("label:N"))
    bounds = [(f"rᵢ = {turns:g}", view["bounds"][key]) for key, turns in (("beta", beta), ("alpha", alpha))
              if 0 <= view["bounds"][key] <= d // 2 - 1]  # those within the pairs drawn
    layers = [lines, dots]
    if bounds:
        rules = alt.Chart(pd.DataFrame({"text": [t for t, _ in bounds], "at": [rounded(b) for _, b in bounds]}))
        rules = rules.transform_calculate(label="'pair index where ' + datum.text + ': ' + format(datum.at, '.8f')")
        layers = [rules.mark_rule(strokeDash=[4, 3], color="#9e9e9e").encode(
                      x=alt.X("at:Q", scale=pairs), description=alt.Description("label:N")),
                  rules.mark_text(align="left", dx=3, y=STRETCH_HEIGHT - 8, fontSize=12, aria=False).encode(
                      x=alt.X("at:Q", scale=pairs), text="text:N"),
                  *layers]
    summary = (
        computed.transform_aggregate(count="count()")
        .transform_calculate(text=f"'s = ' + format({S.name}, '.2f') + ': 1/s = ' + format(1 / {S.name}, '.3f')"
                             f" + ', YaRN’s q, k × ' + format(0.1 * log({S.name}) + 1, '.3f')",
                             label=f"'YaRN factor on q and k ' + format(0.1 * log({S.name}) + 1, '.8f')")
        .mark_text(align="left", x=0, y=-12, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    chart = alt.layer(*layers, summary).add_params(S).properties(width=270, height=STRETCH_HEIGHT)
    ramp = (f" YaRN's ramp runs between the dashed rules, where a pair turns {beta:g} and {alpha:g} times over the "
            f"trained length." if len(bounds) == 2 else "")
    description = (f"Lines of each of the {d // 2} pairs' frequency over RoPE's own (1 kept, 1/s interpolated) under "
                   f"position interpolation, NTK-aware scaling and YaRN as printed and as coded (d = {d}, trained on "
                   f"{trained_len} tokens), with a slider for the scale s from {S_MIN:g} to {S_MAX:g}; at s = {s:g} "
                   f"interpolation multiplies every pair by {view['factors']['interpolation'][0]:.2f}.{ramp}")
    return Explorer(chart, description, "Slide s: which pairs each method slows down")
