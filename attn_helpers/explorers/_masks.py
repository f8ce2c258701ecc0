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
from ._explorer import Explorer, rounded

__all__ = ["mask_view", "mask_explorer"]

#: The most tokens the heatmap shows: eight columns of 30 px, with the words beside them, fit a phone.
MAX_T = 8
CELL = 30  # px a side
ROW, COLUMN = 18, 56  # px: the picked row's panel, one line a key
MASKED_FILL = "#bdbdbd"
PAD = "<pad>"  # how the axes name a padding position  # grey, apart from the white-to-blue of the weights


def mask_view(scores: torch.Tensor, causal: bool, length: int, window: int | None = None) -> dict:
    """What :func:`mask_explorer` shows at one setting (chapter 7): which scores are allowed, and the weights.

    ``scores`` ``(t, t)``; ``length`` real tokens come first, the other keys are padding; a ``window`` w lets
    query i see keys less than w positions away (with ``causal``, the w keys ``i - w + 1 … i``), None: all.
    Returns ``allowed`` and ``weights`` as ``(t, t)`` lists, and ``empty_rows``, the queries with no key left,
    whose weights are all zero, as :func:`attn_helpers.attention` gives them; and each row's arithmetic: the
    ``masked`` scores (``-inf`` where masked), each row's ``max`` (``-inf`` with no key left), ``exp``,
    ``exp(masked - max)`` (t, t), and its ``sum`` (t,) in float64.
    """
    t, causal, length, window = validate.mask_settings(scores, causal, length, window)
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


def _vega_masked_softmax() -> list[dict]:
    """The mask and the softmax of each query's row, as Vega computes them from the controls ``causal``,
    ``real`` and ``band`` (0: no window): what :func:`mask_view` does, one cell (q, k) a datum."""
    return [
        {"calculate": "(!causal || datum.k <= datum.q) && datum.k < real"
                      " && (band == 0 || abs(datum.q - datum.k) < band)", "as": "allowed"},
        {"calculate": "datum.allowed ? datum.s : null", "as": "kept"},  # max() skips null
        {"calculate": "datum.allowed ? 1 : 0", "as": "one"},
        {"joinaggregate": [{"op": "max", "field": "kept", "as": "top"}, {"op": "sum", "field": "one", "as": "open"}],
         "groupby": ["q"]},
        {"calculate": "datum.allowed ? exp(datum.s - datum.top) : 0", "as": "e"},
        {"joinaggregate": [{"op": "sum", "field": "e", "as": "total"}], "groupby": ["q"]},
        {"calculate": "datum.open > 0 ? datum.e / datum.total : 0", "as": "w"},  # no key left: all zeros
    ]


def _heatmap(tokens: Sequence[str]) -> tuple[alt.Chart, alt.Chart]:
    """The cells (white to blue by weight, grey if masked; each labelled for screen readers) and their numbers."""
    words = json.dumps(list(tokens))
    # A position at or beyond the slider's count of real tokens is padding, and its label says so.
    word = (f"datum.value < real || {words}[datum.value] == '{PAD}' ? {words}[datum.value]"
            f" : {words}[datum.value] + ' ({PAD})'")
    base = alt.Chart().encode(
        x=alt.X("k:O", title="key", axis=alt.Axis(labelExpr=word, labelAngle=-45)),
        y=alt.Y("q:O", title="query", axis=alt.Axis(labelExpr=word)),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.condition("datum.allowed", alt.Color("w:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                                                       legend=None), alt.value(MASKED_FILL)),
        description=alt.Description("label:N"),
    ).transform_calculate(
        label="'query ' + datum.q + ' (' + datum.query + '), key ' + datum.k + ' (' + datum.key + '): '"
              " + (datum.allowed ? '' : datum.open > 0 ? 'masked, ' : 'masked, the query has no key left, ')"
              " + 'weight ' + format(datum.w, '.8f')")
    numbers = base.mark_text(fontSize=10, aria=False).encode(  # the cell's label says it already
        text=alt.Text("shown:N"),
        color=alt.condition("datum.w > 0.5", alt.value("white"), alt.value("black")),
    ).transform_calculate(shown="datum.allowed ? format(datum.w, '.2f') : '×'")
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


def _row_panel(pick: alt.Parameter, t: int) -> alt.LayerChart:
    """The picked query's row, key by key: score, masked score, exp(s − max) and weight, with max and Σ above."""
    columns = ["key", "score s", "masked", "exp(s−m)", "w = ÷ Σ"]
    base = alt.Chart().transform_filter(pick)
    y = alt.Y("k:O", title=None, axis=None)

    x = alt.X("c:O", scale=alt.Scale(domain=columns),
              axis=alt.Axis(orient="top", title=None, labelAngle=0, domain=False, ticks=False))

    def column(n: int, text: str, aria: bool = False) -> alt.Chart:
        return (base.transform_calculate(shown=text, c=f"'{columns[n]}'")
                .mark_text(align="right", dx=COLUMN // 2 - 2, fontSize=12, aria=aria)
                .encode(x=x, y=y, text="shown:N"))

    key = column(0, "datum.key", aria=True).transform_calculate(
        label="'query ' + datum.q + ' (' + datum.query + '), key ' + datum.k + ' (' + datum.key + '): score '"
              " + format(datum.s, '.8f') + ', masked score ' + (datum.allowed ? format(datum.s, '.8f') : '-inf')"
              " + ', exp(s - max) ' + format(datum.e, '.8f') + ', weight ' + format(datum.w, '.8f')",
    ).encode(description=alt.Description("label:N"))
    cells = [column(1, "format(datum.s, '.3f')"),
             column(2, "datum.allowed ? format(datum.s, '.3f') : '−∞'"),
             column(3, "format(datum.e, '.4f')"),
             column(4, "format(datum.w, '.4f')")]
    sums = base.transform_filter("datum.k == 0").transform_calculate(
        text="'query ' + datum.q + ' (' + datum.query + '): ' + (datum.open > 0 ? 'max m = ' + format(datum.top, "
             "'.3f') + ', Σ = ' + format(datum.total, '.4f') : 'no key left: every weight 0')",
        label="'query ' + datum.q + ' (' + datum.query + '): ' + (datum.open > 0 ? 'max ' + format(datum.top, '.8f')"
              " + ', sum ' + format(datum.total, '.8f') : 'no key left, sum ' + format(datum.total, '.8f'))",
    ).mark_text(align="left", x=0, y=ROW * t + 14, fontSize=12).encode(
        text="text:N", description=alt.Description("label:N"))
    return alt.layer(key, *cells, sums).properties(width=COLUMN * len(columns), height=ROW * t,
                                                   view=alt.ViewConfig(stroke=None))


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
    if t > MAX_T or len(tokens) != t:
        raise ValueError(f"need scores of shape (t, t) with t <= {MAX_T} (wider does not fit a phone) and t tokens; "
                         f"got {tuple(scores.shape)} and {len(tokens)} tokens. Take the first {MAX_T}: "
                         f"scores[:{MAX_T}, :{MAX_T}] and tokens[:{MAX_T}].")
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
    chart = (alt.vconcat(heatmap, _row_panel(pick, t), spacing=24, data=data, transform=_vega_masked_softmax())
             .add_params(*params))
    masked = sum(not a for row in view["allowed"] for a in row)
    description = (f"A heatmap of the attention weights of {t} tokens, one row per query, under a check box for a "
                   f"causal mask, a slider for the number of real tokens (the rest are padding) and a slider for a "
                   f"window; masked cells are grey and marked ×, and a query with no key left gets weights of 0. "
                   f"At the start {masked} of the {t * t} cells are masked.")
    return Explorer(chart, description, "Set the masks; click a row for its arithmetic")
