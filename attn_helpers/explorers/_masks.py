"""Chapter 7's explorer: a sentence's scores under a causal mask, a padding mask and a window, and the weights."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..attention import softmax
from ..masks import causal_mask, padding_mask
from ..sliding_window import window_mask
from ._explorer import Explorer, check_labels, heatmap_cells, heatmap_numbers, rounded, row_panel, vega_softmax

__all__ = ["mask_view", "mask_explorer"]

#: The most tokens the heatmap shows: eight columns of 30 px, with the words beside them, fit a phone.
MAX_T = 8
CELL = 30  # px a side
PAD = "<pad>"  # how the axes name a padding position


def _settings(scores: object, causal: object, length: object, window: object) -> tuple[int, bool, int, int | None]:
    """The checks of :func:`mask_view`: ``scores`` a finite float ``(t, t)`` matrix, ``causal`` a bool, ``length``
    (the real tokens) in ``1 … t``, ``window`` a positive int or None; returns t and the three settings."""
    validate.as_float_tensor(scores, "scores", min_dim=2)
    if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be one sequence's (t, t) matrix of query-key scores, got shape "
                         f"{tuple(scores.shape)}. For a batch or heads, pick one: scores[0] or scores[0, 0].")
    t = scores.shape[0]
    length = validate.integer(length, "length", minimum=1, maximum=t,
                              why=f"the number of real tokens among the t = {t}")
    return t, validate.flag(causal, "causal"), length, validate.integer(window, "window", minimum=1, none_ok=True)


def mask_view(scores: torch.Tensor, causal: bool, length: int, window: int | None = None) -> dict:
    """What :func:`mask_explorer` shows at one setting (chapter 7): which scores are allowed, and the weights.

    ``scores`` ``(t, t)``; ``length`` real tokens come first, the other keys are padding; a ``window`` w lets
    query i see keys less than w positions away (with ``causal``, the w keys ``i - w + 1 … i``), None: all.
    Returns ``allowed`` and ``weights`` as ``(t, t)`` lists, and ``empty_rows``, the queries with no key left,
    whose weights are all zero, as :func:`attn_helpers.attention` gives them; and each row's arithmetic: the
    ``masked`` scores (``-inf`` where masked), each row's ``max`` (``-inf`` with no key left), ``exp``,
    ``exp(masked - max)`` (t, t), and its ``sum`` (t,) in float64.
    """
    t, causal, length, window = _settings(scores, causal, length, window)
    allowed = padding_mask([length], max_len=t).expand(t, t)  # (t, t): the same real keys for every query
    if causal:
        allowed = allowed & causal_mask(t)  # (t, t): keys 0 … i
    if window is not None:
        band = window_mask(t, window=window)  # (t, t): keys i - w + 1 … i
        allowed = allowed & (band | band.T)  # (t, t): keys less than w positions away, before or after
    masked = scores.masked_fill(~allowed, -math.inf)  # (t, t)
    weights = softmax(masked)  # (t, t); a row that is all -inf: all zeros
    empty = [i for i in range(t) if not allowed[i].any()]
    top = masked.double().amax(dim=-1, keepdim=True)  # (t, 1): -inf for a query with no key left
    e = torch.exp(masked.double() - torch.where(top.isinf(), 0.0, top))  # (t, t): 0 where masked
    return {"allowed": allowed.tolist(), "weights": weights.tolist(), "empty_rows": empty,
            "masked": masked.tolist(), "max": top[:, 0].tolist(), "exp": e.tolist(), "sum": e.sum(-1).tolist()}


#: Which keys a query may see, from the controls ``causal``, ``real`` and ``band`` (0: no window), as
#: :func:`mask_view` allows them.
ALLOWED = "(!causal || datum.k <= datum.q) && datum.k < real && (band == 0 || abs(datum.q - datum.k) < band)"


def _heatmap(tokens: Sequence[str]) -> tuple[alt.Chart, alt.Chart]:
    """The cells (white to blue by weight, grey if masked; each labelled for screen readers) and their numbers."""
    words = json.dumps(list(tokens))
    # A position at or beyond the slider's count of real tokens is padding, and its label says so.
    word = (f"datum.value < real || {words}[datum.value] == '{PAD}' ? {words}[datum.value]"
            f" : {words}[datum.value] + ' ({PAD})'")
    x = alt.X("k:O", title="key", axis=alt.Axis(labelExpr=word, labelAngle=-45))
    y = alt.Y("q:O", title="query", axis=alt.Axis(labelExpr=word))
    cells = heatmap_cells(
        alt.Chart(), x, y, allowed="datum.allowed",
        label="'query ' + datum.q + ' (' + datum.query + '), key ' + datum.k + ' (' + datum.key + '): '"
              " + (datum.allowed ? '' : datum.open > 0 ? 'masked, ' : 'masked, the query has no key left, ')"
              " + 'weight ' + format(datum.w, '.8f')")
    numbers = heatmap_numbers(alt.Chart(), x, y, "datum.allowed ? format(datum.w, '.2f') : '×'")
    return cells, numbers


def _summary() -> alt.Chart:
    """Two lines above the heatmap: the setting of the controls, and how many queries have no key left."""
    return (
        alt.Chart().transform_filter("datum.k == 0")  # one datum per query
        .transform_calculate(empty="datum.open > 0 ? 0 : 1")
        .transform_aggregate(empties="sum(empty)")
        .transform_calculate(
            setting="(causal ? 'causal, ' : 'not causal, ') + real + ' real tokens, '"
                    " + (band == 0 ? 'no window' : 'window ' + band)",
            rows="datum.empties == 0 ? 'every query has a key' : datum.empties"
                 " + (datum.empties == 1 ? ' query has' : ' queries have') + ' no key left: weights all 0'")
        .transform_calculate(text="datum.setting + '\\n' + datum.rows", label="datum.setting + '; ' + datum.rows")
        .mark_text(align="left", baseline="top", lineBreak="\n", x=0, y=-40, fontSize=12)
        .encode(text="text:N", description=alt.Description("label:N"))
    )


def mask_explorer(scores: torch.Tensor, tokens: Sequence[str], causal: bool = False, length: int | None = None,
                  window: int | None = None, query: int = 0) -> Explorer:
    """A heatmap of the weights of ``scores`` ``(t, t)``, t ≤ 8, under three controls for the masks (chapter 7).

    The controls: a causal check box, a slider for the number of real tokens and one for a window (0: none); the
    other arguments set where they start (``length``: all t tokens real). ``tokens`` names the t positions. A
    click on a row, or the menu "query row", picks a query (``query`` at the start), whose row's arithmetic the
    panel below shows key by key. The browser masks the scores and takes each row's softmax, as
    :func:`mask_view` does in Python.
    """
    length = len(tokens) if length is None else length
    view = mask_view(scores, causal, length, window)  # checks the scores and the settings
    t = len(view["weights"])
    query = validate.integer(query, "query", minimum=0, maximum=t - 1, why="the row picked at the start")
    check_labels(t, tokens, MAX_T, "scores of shape (t, t)",
                 f"Take the first {MAX_T}: scores[:{MAX_T}, :{MAX_T}] and tokens[:{MAX_T}].", name="tokens")
    s = scores.double().tolist()
    data = pd.DataFrame([{"q": i, "k": j, "query": tokens[i], "key": tokens[j], "s": rounded(s[i][j])}
                         for i in range(t) for j in range(t)])
    params = [
        alt.param(name="causal", value=causal, bind=alt.binding_checkbox(name="causal ")),
        alt.param(name="real", value=length, bind=alt.binding_range(min=1, max=t, step=1, name="real tokens ")),
        alt.param(name="band", value=window or 0,
                  bind=alt.binding_range(min=0, max=t, step=1, name="window (0: none) ")),
    ]
    menu = alt.binding_select(options=list(range(t)), labels=[f"{i}: {w}" for i, w in enumerate(tokens)],
                              name="query row ")
    pick = alt.selection_point(name="pick", fields=["q"], on="click", clear=False, value=[{"q": query}], bind=menu)
    cells, numbers = _heatmap(tokens)
    cells = cells.properties(name="mask_cells").add_params(pick).encode(  # named: Altair's names change
        strokeWidth=alt.condition(pick, alt.value(2.5), alt.value(1)),
        stroke=alt.condition(pick, alt.value("#d62728"), alt.value("white")))
    heatmap = alt.layer(cells, numbers, _summary()).properties(width=CELL * t, height=CELL * t)
    panel = row_panel(alt.Chart().transform_filter(pick), t)
    chart = (alt.vconcat(heatmap, panel, spacing=24, data=data,
                         transform=vega_softmax("datum.s", by=("q",), allowed=ALLOWED))
             .add_params(*params))
    masked = sum(not a for row in view["allowed"] for a in row)
    description = (f"A heatmap of the attention weights of {t} tokens, one row per query, under a check box for a "
                   f"causal mask, a slider for the number of real tokens (the rest are padding) and a slider for a "
                   f"window; masked cells are grey and marked ×, and a query with no key left gets weights of 0. "
                   f"At the start {masked} of the {t * t} cells are masked.")
    return Explorer(chart, description, "Set the masks; click a row for its arithmetic")
