"""Chapter 2's explorer: one row of scores, a slider for the temperature T, and the softmax it gives."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from ..explore import temperature_weights
from ..scaling import entropy
from ._explorer import Explorer, rounded

__all__ = ["temperature_view", "temperature_explorer"]

#: The slider's range and step for T.
T_MIN, T_MAX, T_STEP = 0.1, 10.0, 0.05


def temperature_view(scores: torch.Tensor, temperature: float) -> dict:
    """What :func:`temperature_explorer` shows at one temperature (chapter 2): weights, entropy, largest weight.

    ``scores`` has shape ``(t,)``; ``weights`` is ``softmax(scores / T)`` as a list of t floats.
    """
    w = temperature_weights(scores, temperature)  # (t,)
    return {"weights": w.tolist(), "entropy": float(entropy(w)), "largest": float(w.max())}


def temperature_explorer(scores: torch.Tensor, labels: Sequence[str], temperature: float = 1.0) -> Explorer:
    """Bars of ``softmax(scores / T)`` under a slider for T from 0.1 to 10, with their entropy (chapter 2).

    ``scores`` has shape ``(t,)`` and ``labels`` names the t keys. The browser computes the softmax at the
    slider's T, as :func:`temperature_view` does in Python.
    """
    view = temperature_view(scores, temperature)  # checks scores and temperature
    s = scores.double()
    if s.dim() != 1 or len(labels) != s.shape[0]:
        raise ValueError(f"need scores of shape (t,) and t labels; got {tuple(s.shape)} and {len(labels)} labels.")
    shifted = s - s.max()  # the largest score becomes 0: exp never overflows in the browser
    data = pd.DataFrame({"key": list(labels), "shifted": [rounded(x) for x in shifted.tolist()]})
    T = alt.param(name="T", value=temperature,
                  bind=alt.binding_range(min=T_MIN, max=T_MAX, step=T_STEP, name="temperature T "))
    softmax = (
        alt.Chart(data)
        .transform_calculate(e=f"exp(datum.shifted / {T.name})")
        .transform_joinaggregate(total="sum(e)")
        .transform_calculate(w="datum.e / datum.total")
        .transform_calculate(h="datum.w > 0 ? -datum.w * log(datum.w) : 0")
    )
    bars = softmax.mark_bar().encode(
        x=alt.X("key:N", sort=None, title="key", axis=alt.Axis(labelAngle=0)),  # level: read on a phone
        y=alt.Y("w:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
        description=alt.Description("label:N"),
    ).transform_calculate(label="datum.key + ': weight ' + format(datum.w, '.8f')")
    summary = (
        softmax.transform_aggregate(entropy="sum(h)", largest="max(w)")
        .transform_calculate(text=f"'T = ' + format({T.name}, '.2f') + ', entropy ' + format(datum.entropy, '.3f')"
                             " + ' nats, largest weight ' + format(datum.largest, '.3f')")
        .transform_calculate(label="'entropy ' + format(datum.entropy, '.8f') + ' nats; largest weight '"
                             " + format(datum.largest, '.8f')")
        .mark_text(align="left", x=0, y=-12, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    chart = alt.layer(bars, summary).add_params(T).properties(width=280, height=200)
    description = (f"Bars of the softmax weights of {len(labels)} keys at a temperature T set by a slider from "
                   f"{T_MIN} to {T_MAX:g}, with their entropy; at T = {temperature:g} the entropy is "
                   f"{view['entropy']:.2f} nats.")
    return Explorer(chart, description)
