"""Chapter 11's explorers: RoPE's score depends on the offset alone, and the stretched frequencies move with s."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..long_context import interpolation, ntk_aware, yarn, yarn_attention_factor
from ..position import frequencies, rope
from ._explorer import Explorer, rounded

__all__ = ["rope_offset_view", "rope_offset_explorer", "stretch_view", "stretch_explorer", "STRETCH_METHODS"]

#: The sliders' ranges: the key's position p, the query's offset r after it, and the scale factor s.
P_MAX, R_MAX = 64, 32
S_MIN, S_MAX, S_STEP = 1.0, 8.0, 0.25
#: The frequencies :func:`stretch_explorer` draws, named as in chapter 11's table.
STRETCH_METHODS = ("interpolation", "NTK-aware", "YaRN as printed", "YaRN as coded")


def rope_offset_view(q: torch.Tensor, k: torch.Tensor, p: int, r: int) -> dict:
    """What :func:`rope_offset_explorer` shows for a key at p and a query at p + r (chapter 11).

    ``q`` and ``k`` have shape ``(d,)``; ``q`` and ``k`` in the result are RoPE's rotations of them (d floats
    each), ``pairs`` each pair's share of the score (d/2 floats), ``score`` their sum ``q_rot · k_rot``.
    """
    validate.rope_vectors(q, k)
    p = validate.integer(p, "p", minimum=0, why="the key's position")
    r = validate.integer(r, "r", minimum=-p, why="the query's offset from the key, so that p + r >= 0")
    q_rot = rope(q.double()[None], [p + r])[0]  # (d,): the query at position p + r
    k_rot = rope(k.double()[None], [p])[0]  # (d,): the key at position p
    pairs = (q_rot * k_rot).view(-1, 2).sum(-1)  # (d/2,): pair i is features 2i and 2i+1
    return {"q": q_rot.tolist(), "k": k_rot.tolist(), "pairs": pairs.tolist(), "score": float(pairs.sum())}


def rope_offset_explorer(q: torch.Tensor, k: torch.Tensor, p: int = 0, r: int = 1) -> Explorer:
    """A query at p + r and a key at p under RoPE, with sliders for p and r: the rotated features move with p,
    each pair's share of the score and the score move with r only (chapter 11).

    ``q`` and ``k`` have shape ``(d,)``; the browser rotates them as :func:`rope_offset_view` does.
    """
    view = rope_offset_view(q, k, p, r)  # checks the input
    validate.integer(p, "p", maximum=P_MAX, why=f"the slider's range is 0 … {P_MAX}")
    validate.integer(r, "r", minimum=0, maximum=R_MAX, why=f"the slider's range is 0 … {R_MAX}")
    d = q.shape[0]
    qd, kd = q.double(), k.double()
    data = pd.DataFrame({
        "i": list(range(d // 2)),
        "theta": [rounded(x) for x in frequencies(d).tolist()],
        "qe": [rounded(x) for x in qd[0::2].tolist()], "qo": [rounded(x) for x in qd[1::2].tolist()],
        "ke": [rounded(x) for x in kd[0::2].tolist()], "ko": [rounded(x) for x in kd[1::2].tolist()],
    })
    P = alt.param(name="position_p", value=p, bind=alt.binding_range(min=0, max=P_MAX, step=1, name="position p "))
    R = alt.param(name="offset_r", value=r, bind=alt.binding_range(min=0, max=R_MAX, step=1, name="offset r "))
    rotated = alt.Chart(data).transform_calculate(  # each a transform of its own, in this order
        aq=f"({P.name} + {R.name}) * datum.theta", ak=f"{P.name} * datum.theta",
        q_even="datum.qe * cos(datum.aq) - datum.qo * sin(datum.aq)",
        q_odd="datum.qe * sin(datum.aq) + datum.qo * cos(datum.aq)",
        k_even="datum.ke * cos(datum.ak) - datum.ko * sin(datum.ak)",
        k_odd="datum.ke * sin(datum.ak) + datum.ko * cos(datum.ak)",
        part="datum.q_even * datum.k_even + datum.q_odd * datum.k_odd",
    )
    q_norms = [math.hypot(e, o) for e, o in zip(data.qe, data.qo, strict=True)]  # (d/2,): turning keeps them
    k_norms = [math.hypot(e, o) for e, o in zip(data.ke, data.ko, strict=True)]  # in Python: the same on every CPU
    reach = rounded(max(q_norms + k_norms))  # no rotated feature is larger
    folded = rotated.transform_fold(["q_even", "q_odd", "k_even", "k_odd"], as_=["which", "value"])
    features = folded.transform_calculate(
        vector="datum.which[0] == 'q' ? 'query at p + r' : 'key at p'",
        feature="2 * datum.i + (indexof(datum.which, 'odd') >= 0 ? 1 : 0)",
        label="datum.vector + ', feature ' + datum.feature + ': ' + format(datum.value, '.8f')",
    ).mark_bar().encode(
        x=alt.X("feature:O", title="feature (pair i = features 2i, 2i + 1)", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("vector:N", sort="descending"),
        y=alt.Y("value:Q", title="rotated value", scale=alt.Scale(domain=[-reach, reach])),
        color=alt.Color("vector:N", sort="descending", title=None, legend=alt.Legend(orient="top")),
        description=alt.Description("label:N"),
    ).properties(width=280, height=140)
    share = rounded(max(a * b for a, b in zip(q_norms, k_norms, strict=True)))  # nor any pair's share of the score
    parts = rotated.transform_calculate(
        label="'pair ' + datum.i + ': share of the score ' + format(datum.part, '.8f')",
    ).mark_bar(color="#4c78a8").encode(
        x=alt.X("i:O", title="pair i", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("part:Q", title="pair's share of q·k", scale=alt.Scale(domain=[-share, share])),
        description=alt.Description("label:N"),
    )
    score = (
        rotated.transform_aggregate(score="sum(part)")
        .transform_calculate(text=f"'q at ' + ({P.name} + {R.name}) + ' · k at ' + {P.name}"
                             " + ' = ' + format(datum.score, '.4f')",
                             label="'score ' + format(datum.score, '.8f')")
        .mark_text(align="left", x=0, y=-12, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    chart = alt.vconcat(features, alt.layer(parts, score).properties(width=280, height=120), spacing=28)
    description = (f"Bars of the {d} features of a query at position p + r and a key at position p after RoPE, and "
                   f"of each of the {d // 2} pairs' share of their score, with sliders for p and r; at p = {p}, "
                   f"r = {r} the score is {view['score']:.2f}, and it stays so for every p.")
    return Explorer(chart.add_params(P, R), description, "Move p: the score stays; move r: it changes")


def stretch_view(d: int, s: float, trained_len: int, base: float = 10000.0, alpha: float = 1.0,
                 beta: float = 32.0) -> dict:
    """What :func:`stretch_explorer` shows at scale s (chapter 11): each method's frequencies, ``(d/2,)`` each.

    ``frequencies`` maps each of ``STRETCH_METHODS`` to its d/2 stretched frequencies and ``factors`` to
    those over RoPE's own; ``yarn_factor`` is YaRN's factor on q and k.
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
            "yarn_factor": yarn_attention_factor(s)}


def stretch_explorer(d: int, trained_len: int, s: float = 4.0, base: float = 10000.0, alpha: float = 1.0,
                     beta: float = 32.0) -> Explorer:
    """Bars of each pair's frequency under interpolation, NTK-aware scaling and YaRN (as printed and as coded),
    over RoPE's own, with a slider for the scale s from 1 to 8 (chapter 11).

    The browser computes them from the formulas at the slider's s, as :func:`stretch_view` does in Python.
    """
    view = stretch_view(d, s, trained_len, base, alpha, beta)  # checks the input
    validate.real(s, "s", at_least=S_MIN, at_most=S_MAX, why=f"the slider's range is {S_MIN:g} … {S_MAX:g}")
    theta = frequencies(d, base)  # (d/2,)
    data = pd.DataFrame({"i": list(range(d // 2)), "theta": [rounded(x) for x in theta.tolist()],
                         "turns": [rounded(x) for x in (trained_len * theta / (2 * math.pi)).tolist()]})

    def pair_at(turns: float) -> str:  # the pair index (not rounded) at which a pair turns so many times
        return f"({d} * log({trained_len} / (2 * PI * {turns})) / (2 * log({base})))"

    low = f"max(floor({pair_at(beta)}), 0)"
    high = f"max(min(ceil({pair_at(alpha)}), {d - 1}), {low} + 0.001)"  # the authors' guard: a ramp of width > 0
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
    bars = computed.transform_fold(list(names), as_=["key", "frequency"]).transform_calculate(
        method=f"{method}[datum.key]", factor="datum.frequency / datum.theta",
        label="datum.method + ', pair ' + datum.i + ': frequency ' + format(datum.frequency, '.8e')"
              " + ', ' + format(datum.factor, '.8f') + ' times θ_i'",
    ).mark_bar().encode(
        x=alt.X("i:O", title="pair i", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("method:N", sort=list(shown_names.values())),
        y=alt.Y("factor:Q", title="θ′ᵢ / θᵢ (1 kept, 1/s interpolated)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("method:N", sort=list(shown_names.values()), title=None,
                        legend=alt.Legend(orient="bottom", columns=2)),
        description=alt.Description("label:N"),
    )
    summary = (
        computed.transform_aggregate(count="count()")
        .transform_calculate(text=f"'s = ' + format({S.name}, '.2f') + ': 1/s = ' + format(1 / {S.name}, '.3f')"
                             f" + ', YaRN’s q, k × ' + format(0.1 * log({S.name}) + 1, '.3f')",
                             label=f"'YaRN factor on q and k ' + format(0.1 * log({S.name}) + 1, '.8f')")
        .mark_text(align="left", x=0, y=-12, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    chart = alt.layer(bars, summary).add_params(S).properties(width=280, height=180)
    description = (f"Bars of each of the {d // 2} pairs' frequency over RoPE's own under position interpolation, "
                   f"NTK-aware scaling and YaRN as printed and as coded (trained on {trained_len} tokens), with a "
                   f"slider for the scale s from {S_MIN:g} to {S_MAX:g}; at s = {s:g} interpolation multiplies "
                   f"every pair by {view['factors']['interpolation'][0]:.2f}.")
    return Explorer(chart, description, "Slide s: which pairs each method slows down")
