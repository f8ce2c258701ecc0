"""Chapter 2's explorer: one row of scores, a log-scaled slider for the temperature T, and the softmax it gives."""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..explore import temperature_weights
from ..scaling import entropy
from ._explorer import Explorer, check_labels, rounded, vega_softmax

__all__ = ["temperature_view", "temperature_explorer"]

#: The slider's range for T, and its step in log₁₀ T: every factor of 10 gets the same length of track.
T_MIN, T_MAX, LOG_STEP = 0.1, 10.0, 0.01
#: The most keys: their bars, with their scores under them, fit a phone.
MAX_KEYS = 8
WIDTH = 280  # px: the chart, with its axis, fits a phone
MARK = "#d62728"  # the marks of T = √d and of the uniform weights


def temperature_view(scores: torch.Tensor, temperature: float) -> dict:
    """What :func:`temperature_explorer` shows at one temperature (chapter 2).

    ``scores`` has shape ``(t,)``; ``weights`` is ``softmax(scores / T)`` as a list of t floats, with their
    ``entropy`` (nats) and ``largest`` weight, beside the uniform weight ``1/t`` and its entropy ``ln t``.
    """
    w = temperature_weights(scores, temperature)  # (t,)
    t = w.shape[-1]
    return {"weights": w.tolist(), "entropy": float(entropy(w)), "largest": float(w.max()),
            "uniform": 1 / t, "uniform_entropy": math.log(t)}


def _track(T: str, d: int | None) -> alt.LayerChart:
    """A strip with the slider's log scale: where T is, and the marks T = 1 and T = √d."""
    x = alt.X("T:Q", title=None, scale=alt.Scale(type="log", domain=[T_MIN, T_MAX]),
              axis=alt.Axis(values=[0.1, 0.3, 1, 3, 10], format="~g", labelFontSize=12))
    marks = [{"T": 1.0, "text": "T = 1"}]
    if d is not None:
        marks.append({"T": rounded(math.sqrt(d)), "text": f"T = √{d}"})
    marked = alt.Chart(pd.DataFrame(marks)).transform_calculate(
        label="'mark at ' + datum.text + ' = ' + format(datum.T, '.8f')")
    ticks = marked.mark_tick(color=MARK, thickness=2, size=18).encode(x=x, description=alt.Description("label:N"))
    words = marked.mark_text(color=MARK, dy=-14, fontSize=12, aria=False).encode(x=x, text="text:N")
    now = (alt.Chart(pd.DataFrame({"n": [0]})).transform_calculate(T=T)
           .transform_calculate(label="'temperature T ' + format(datum.T, '.8f')")
           .mark_point(filled=True, size=120, shape="triangle-down", color="#1f77b4", yOffset=-4)
           .encode(x=x, description=alt.Description("label:N")))
    return alt.layer(ticks, words, now).properties(width=WIDTH, height=20)


def temperature_explorer(scores: torch.Tensor, labels: Sequence[str], temperature: float = 1.0,
                         d: int | None = None) -> Explorer:
    """Bars of ``softmax(scores / T)`` under a log-scaled slider for T from 0.1 to 10 (chapter 2).

    ``scores`` has shape ``(t,)`` and ``labels`` names the t keys, shown with their scores. The chart marks the
    uniform weight 1/t, and ln t, the entropy of uniform weights; given ``d``, it marks T = √d on the strip of
    temperatures, the temperature of scaled dot-product attention for d-dimensional vectors. The browser
    computes the softmax at the slider's T, as :func:`temperature_view` does in Python.
    """
    view = temperature_view(scores, temperature)  # checks scores and temperature
    validate.real(temperature, "temperature", at_least=T_MIN, at_most=T_MAX,
                  why=f"the slider's range is {T_MIN:g} … {T_MAX:g}")
    if d is not None:
        d = validate.integer(d, "d", minimum=1, maximum=int(T_MAX ** 2), why="the vectors' size, with √d <= 10")
    s = scores.double()
    if s.dim() != 1:
        raise ValueError(f"need scores of shape (t,), one row; got {tuple(s.shape)}. For a matrix, pick a row: "
                         "scores[0].")
    t = s.shape[0]
    check_labels(t, labels, MAX_KEYS, "scores of shape (t,)", "Give one label a key.")
    data = pd.DataFrame({"key": list(labels), "score": [rounded(x) for x in s.tolist()]})
    log_t = alt.param(name="log10_T", value=rounded(math.log10(temperature)),
                      bind=alt.binding_range(min=math.log10(T_MIN), max=math.log10(T_MAX), step=LOG_STEP,
                                             name="log₁₀ of temperature T "))
    T = f"pow(10, {log_t.name})"
    shown_scores = alt.param(name="key_scores", value={k: rounded(x) for k, x in zip(labels, s.tolist(), strict=True)})
    softmax = (alt.Chart(data, transform=vega_softmax(f"datum.score / {T}", by=()))
               .transform_calculate(h="datum.w > 0 ? -datum.w * log(datum.w) : 0"))
    key_axis = alt.Axis(labelAngle=0, labelExpr="[datum.value, 's = ' + format(key_scores[datum.value], '~g')]",
                        labelFontSize=12, titleFontSize=12)
    bars = softmax.mark_bar().encode(
        x=alt.X("key:N", sort=None, title="key and its score s", axis=key_axis),
        y=alt.Y("w:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
        description=alt.Description("label:N"),
    ).transform_calculate(label="datum.key + ' (score ' + datum.score + '): weight ' + format(datum.w, '.8f')")
    uniform = alt.Chart(pd.DataFrame({"u": [rounded(1 / t)]})).transform_calculate(
        label=f"'uniform weight 1/{t} = ' + format(datum.u, '.8f')")
    rule = uniform.mark_rule(color=MARK, strokeDash=[4, 3]).encode(y="u:Q", description=alt.Description("label:N"))
    rule_text = uniform.mark_text(color=MARK, align="right", dy=-6, x=WIDTH, fontSize=12, aria=False).encode(
        y="u:Q", text=alt.value(f"uniform 1/{t}"))
    summary = (
        softmax.transform_aggregate(entropy="sum(h)", largest="max(w)")
        .transform_calculate(text=f"'T = ' + format({T}, '.2f') + ': largest weight ' + format(datum.largest, '.3f')")
        .transform_calculate(label="'largest weight ' + format(datum.largest, '.8f')")
        .mark_text(align="left", x=0, y=-12, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    weights = alt.layer(bars, rule, rule_text, summary).properties(width=WIDTH, height=180)
    ln_t = rounded(math.log(t))
    gauge_x = alt.X("entropy:Q", title=f"entropy of the weights (nats); uniform: ln {t}",
                    scale=alt.Scale(domain=[0, ln_t]), axis=alt.Axis(values=[0, 0.5, 1, 1.5, ln_t][:-1] + [ln_t],
                                                                     format=".2~f", titleFontSize=12))
    gauge = (softmax.transform_aggregate(entropy="sum(h)")
             .transform_calculate(label=f"'entropy ' + format(datum.entropy, '.8f') + ' nats of at most ln {t} = "
                                        f"{ln_t:.8f}'")
             .mark_bar(height=14).encode(x=gauge_x, description=alt.Description("label:N")))
    gauge_end = alt.Chart(pd.DataFrame({"entropy": [ln_t]})).mark_rule(color=MARK, strokeWidth=2, aria=False).encode(
        x=gauge_x)
    entropy_strip = alt.layer(gauge, gauge_end).properties(width=WIDTH, height=16)
    chart = alt.vconcat(_track(T, d), weights, entropy_strip, spacing=14).add_params(log_t, shown_scores)
    description = (f"Bars of the softmax weights of {t} keys at a temperature T set by a log-scaled slider from "
                   f"{T_MIN} to {T_MAX:g}, with the uniform weight 1/{t} marked and a bar of their entropy against "
                   f"ln {t}; at T = {temperature:g} the entropy is {view['entropy']:.2f} nats.")
    return Explorer(chart, description, "Slide T: low T sharpens, high T flattens")
