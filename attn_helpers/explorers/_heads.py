"""Chapter 5's explorer: the trained heads of the two-back task, one panel at a time, on held-out sequences."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..heads_task import LOOKBACK
from ._explorer import Explorer

__all__ = ["heads_view", "heads_explorer"]

#: The panels of the chapter's figure fig-ch05-heads, in its order (chapter 5).
PANELS = ("1 head", "2 heads: head 0", "2 heads: head 1", "2 heads: average")
#: The decimals the explorer keeps of each weight (chapter 5). Trained weights differ in their last bits between
#: CPUs (up to about 5e-6 under the kernel sets of scripts/portability.py); rounded to two decimals, as the chapter's
#: figure and prose show them, they are the same everywhere, and a third decimal would teach nothing more.
DECIMALS = 2
#: The most tokens (two panels of eight columns of 16 px fit a phone) and sequences (the spec stays small) it
#: shows (chapter 5).
MAX_T, MAX_SEQUENCES = 8, 8
CELL = 16  # px a side


def _panels(w_one: torch.Tensor, w_two: torch.Tensor) -> torch.Tensor:
    """The four panels of each sequence, as ``PANELS`` names them, in float64: ``(b, 4, t, t)`` (chapter 5).

    ``w_one`` ``(b, 1, t, t)`` and ``w_two`` ``(b, 2, t, t)`` are the one-head and two-head models' weights.
    """
    w_one, w_two = w_one.double(), w_two.double()
    return torch.stack([w_one[:, 0], w_two[:, 0], w_two[:, 1], w_two.mean(dim=1)], dim=1)  # (b, 4, t, t)


def heads_view(w_one: torch.Tensor, w_two: torch.Tensor, panel: str, sequence: int,
               decimals: int | None = DECIMALS) -> dict:
    """What :func:`heads_explorer` shows for one panel and one sequence (chapter 5).

    ``w_one`` ``(b, 1, t, t)``, ``w_two`` ``(b, 2, t, t)``; ``panel`` one of ``"1 head"``, ``"2 heads: head 0"``,
    ``"2 heads: head 1"`` and ``"2 heads: average"`` (the chapter's figure's panels). Returns ``weights``
    ``(t, t)`` as lists, and ``previous`` and ``two_back``: the mean weight that queries 2 … t-1 give the key one
    and two places before them, as the chapter's ``weight_at`` measures it. Rounded to ``decimals`` (None: not).
    """
    p, sequence = validate.heads_settings(w_one, w_two, panel, sequence, PANELS)
    weights = _panels(w_one, w_two)[sequence, p]  # (t, t)
    first = max(LOOKBACK)  # the first query with a token two back
    back = [weights.diagonal(offset=-k)[first - k:].mean().item() for k in LOOKBACK]  # queries first … t-1

    def kept(x: float) -> float:
        return x if decimals is None else round(x, decimals)

    return {"weights": [[kept(w) for w in row] for row in weights.tolist()],
            "previous": kept(back[0]), "two_back": kept(back[1])}


def _panel(i: int, t: int, cells: pd.DataFrame, backs: pd.DataFrame) -> alt.LayerChart:
    """Panel ``PANELS[i]`` at the slider's sequence: its cells (white to blue by weight, each labelled for screen
    readers, with no number: a cell is too small) under two lines, the panel's name and its mean weights one and
    two back. The param ``tokens`` holds each sequence's token labels; the left panels name the queries, the
    lower ones the keys."""
    name = PANELS[i]
    tokens = "tokens[sequence][datum.value]"
    left, low = i % 2 == 0, i >= 2
    x = alt.X("k:O", title="key" if low else None,
              axis=alt.Axis(labelExpr=tokens, labelAngle=-90, labels=low, ticks=low, labelFontSize=10))
    y = alt.Y("q:O", title="query" if left else None,
              axis=alt.Axis(labelExpr=tokens, labels=left, ticks=left, labelFontSize=10))
    heat = alt.Chart(cells).transform_filter("datum.s == sequence").transform_calculate(
        w=f"datum.by_panel[{i}]",
        label=f"'{name}: query ' + datum.q + ' (' + tokens[sequence][datum.q] + '), key ' + datum.k + "
              "' (' + tokens[sequence][datum.k] + '): weight ' + format(datum.w, '.8f')",
    ).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=x, y=y, color=alt.Color("w:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), legend=None),
        description=alt.Description("label:N"))
    queries = f"queries {max(LOOKBACK)}–{t - 1}"
    header = (
        alt.Chart(backs).transform_filter("datum.s == sequence")
        .transform_calculate(one=f"datum.previous[{i}]", two=f"datum.two_back[{i}]")
        .transform_calculate(
            text=f"['{name}', '1 back ' + format(datum.one, '.2f') + ', 2 back ' + format(datum.two, '.2f')]",
            label=f"'{name}, held-out sequence ' + sequence + ': mean weight of {queries} on the previous token '"
                  " + format(datum.one, '.8f') + ', on the token two back ' + format(datum.two, '.8f')")
        .mark_text(align="left", baseline="top", x=0, y=-34, fontSize=12, lineHeight=15)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    return alt.layer(heat, header).properties(width=CELL * t, height=CELL * t)


def heads_explorer(w_one: torch.Tensor, w_two: torch.Tensor, labels: Sequence[Sequence[str]],
                   sequence: int = 0) -> Explorer:
    """The four panels of :func:`heads_view` side by side, small multiples of one of b held-out sequences, under
    a slider for the sequence (chapter 5).

    ``w_one`` ``(b, 1, t, t)`` and ``w_two`` ``(b, 2, t, t)``: the one-head and two-head models' weights on the
    same b ≤ 8 sequences of t ≤ 8 tokens; ``labels`` names each sequence's t tokens. Every panel's numbers at
    every sequence are :func:`heads_view`'s, computed here; the browser only selects.
    """
    heads_view(w_one, w_two, PANELS[0], sequence)  # checks the weights and the sequence
    b, _, t, _ = w_one.shape
    if b > MAX_SEQUENCES or t > MAX_T or len(labels) != b or any(len(row) != t for row in labels):
        raise ValueError(f"need the weights of b <= {MAX_SEQUENCES} sequences of t <= {MAX_T} tokens (more does not "
                         f"fit a phone or a page) and b lists of t labels; got b = {b}, t = {t} and "
                         f"{[len(row) for row in labels]} labels. Take a few sequences: w_one[:4], w_two[:4].")
    views = [[heads_view(w_one, w_two, name, s) for name in PANELS] for s in range(b)]
    cells = pd.DataFrame([{"s": s, "q": i, "k": j, "by_panel": [view["weights"][i][j] for view in views[s]]}
                          for s in range(b) for i in range(t) for j in range(t)])
    backs = pd.DataFrame([{"s": s, "previous": [v["previous"] for v in views[s]],
                           "two_back": [v["two_back"] for v in views[s]]} for s in range(b)])
    params = [
        alt.param(name="sequence", value=sequence,
                  bind=alt.binding_range(min=0, max=b - 1, step=1, name="held-out sequence ")),
        alt.param(name="tokens", value=[list(map(str, row)) for row in labels]),  # the axes' labels
    ]
    chart = alt.concat(*(_panel(i, t, cells, backs) for i in range(len(PANELS))), columns=2,
                       spacing=14).add_params(*params)
    description = (f"Four heatmaps side by side, the attention weights of the two-back task's trained models on one "
                   f"of {b} held-out sequences of {t} tokens, one row per query: the one-head model's head, the "
                   f"two-head model's head 0 and head 1, and their average, under a slider for the sequence, each "
                   f"with its mean weight on the previous token and on the token two back.")
    return Explorer(chart, description, "Slide the sequence: each head keeps its diagonal")
