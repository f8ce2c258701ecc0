"""Chapter 13's explorer: the trained language model's heads on a held-out passage, one head and one query at a time."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ._explorer import INK, Explorer, check_labels, heatmap_cells

__all__ = ["lm_heads_view", "lm_heads_explorer"]

#: The decimals the explorer keeps of each weight (chapter 13). No count of decimals is the same on every CPU: 600
#: steps of training carry the last bit into the third decimal of some weights (up to about 1.4e-3 under the kernel
#: sets of scripts/portability.py, for about 1e-7 typically), and of the explorer's 2,400 weights some lie that close
#: to a rounding boundary, at two decimals and at one. The chapter's cell is therefore tagged nbval-ignore-output, as
#: its other trained outputs are; two decimals show the pattern, and a third would show only this machine.
DECIMALS = 2
#: The most characters it shows (chapter 13): 24 columns of 12 px fit a phone.
MAX_T = 24
CELL = 12  # px a side
BAR_HEIGHT = 90  # px: the picked query's row as bars


def _checked(weights: Sequence[torch.Tensor], layer: int, head: int, query: int) -> torch.Tensor:
    """The weights of one layer's head ``(t, t)`` in float64, after checking the settings."""
    if not isinstance(weights, Sequence) or not weights or not all(
            isinstance(w, torch.Tensor) and w.dim() == 4 and w.shape[0] == 1 and w.shape[-1] == w.shape[-2]
            for w in weights):
        raise ValueError("weights must be the list model.attention_weights(passage) returns for one passage: one "
                         "(1, h, t, t) tensor per layer.")
    layer = validate.integer(layer, "layer", minimum=1, maximum=len(weights), why="layers count from 1")
    head = validate.integer(head, "head", minimum=0, maximum=weights[0].shape[1] - 1)
    validate.integer(query, "query", minimum=0, maximum=weights[0].shape[-1] - 1)
    return weights[layer - 1][0, head].double()  # (t, t)


def lm_heads_view(weights: Sequence[torch.Tensor], layer: int, head: int, query: int,
                  decimals: int | None = DECIMALS) -> dict:
    """What :func:`lm_heads_explorer` shows for one layer (from 1), head and query (chapter 13).

    ``weights``: one ``(1, h, t, t)`` tensor per layer, as ``CharLM.attention_weights`` returns them for one passage.
    Returns ``weights`` (the head's ``(t, t)`` weights as lists), ``row`` (the query's weights on keys 0 … query),
    and ``top_key`` with ``top_weight``, the key the query weighs most (the first, on a tie). Rounded to ``decimals``
    (None: not).
    """
    w = _checked(weights, layer, head, query)  # (t, t)

    def kept(x: float) -> float:
        return x if decimals is None else round(x, decimals)

    grid = [[kept(x) for x in row] for row in w.tolist()]
    row = grid[query][:query + 1]
    top = max(range(query + 1), key=lambda k: (row[k], -k))
    return {"weights": grid, "row": row, "top_key": top, "top_weight": row[top]}


def _heatmap(labels: str) -> alt.Chart:
    """The picked head's weights, white to blue, the picked query's row outlined."""
    base = alt.Chart().transform_filter("datum.layer == layer && datum.head == head")
    return heatmap_cells(
        base, x=alt.X("k:O", title="key", axis=alt.Axis(labelExpr=labels, labelAngle=0, labelFontSize=9)),
        y=alt.Y("q:O", title="query", axis=alt.Axis(labelExpr=labels, labelFontSize=9)), stroke_width=0.3,
        label="'layer ' + datum.layer + ', head ' + datum.head + ', query ' + datum.q + ' (' + chars[datum.q] + '), "
              "key ' + datum.k + ' (' + chars[datum.k] + '): weight ' + format(datum.w, '.2f')",
    ).encode(stroke=alt.condition("datum.q == query", alt.value("#d62728"), alt.value("white")),
             strokeWidth=alt.condition("datum.q == query", alt.value(1.5), alt.value(0.3))).properties(name="lm_cells")


def _bars(labels: str, t: int) -> alt.LayerChart:
    """The picked query's row as bars, key by key, under a line naming the key it weighs most."""
    row = alt.Chart().transform_filter("datum.layer == layer && datum.head == head && datum.q == query")
    bars = row.mark_bar(style=INK).encode(
        x=alt.X("k:O", title="key", scale=alt.Scale(domain=list(range(t))),
                axis=alt.Axis(labelExpr=labels, labelAngle=0, labelFontSize=9)),
        y=alt.Y("w:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
        description=alt.Description("label:N"),
    ).transform_calculate(
        label="'query ' + datum.q + ', key ' + datum.k + ' (' + chars[datum.k] + '): weight ' + format(datum.w, '.2f')")
    top = row.transform_window(rank="row_number()", sort=[{"field": "w", "order": "descending"},
                                                          {"field": "k", "order": "ascending"}]
                               ).transform_filter("datum.rank == 1").transform_calculate(
        text="'query ' + datum.q + ' (' + chars[datum.q] + ') weighs key ' + datum.k + ' (' + chars[datum.k] + ') "
             "most: ' + format(datum.w, '.2f')",
        label="'layer ' + layer + ', head ' + head + ', query ' + datum.q + ': most weight on key ' + datum.k + ', "
              "weight ' + format(datum.w, '.2f')",
    ).mark_text(align="left", baseline="top", x=0, y=-22, fontSize=12).encode(
        text="text:N", description=alt.Description("label:N"))
    return alt.layer(bars, top).properties(width=CELL * t, height=BAR_HEIGHT)


def lm_heads_explorer(weights: Sequence[torch.Tensor], labels: Sequence[str], layer: int = 1, head: int = 0,
                      query: int | None = None) -> Explorer:
    """The weights of one head of the trained model on a passage of t ≤ 24 characters, and one query's row as bars,
    under menus for the layer and the head and a slider for the query (chapter 13).

    ``weights``: one ``(1, h, t, t)`` tensor per layer (``CharLM.attention_weights`` of one passage); ``labels``
    names the t characters. Every number shown is :func:`lm_heads_view`'s, computed here; the browser only selects.
    """
    t = weights[0].shape[-1] if weights and isinstance(weights[0], torch.Tensor) else 0
    query = t - 1 if query is None else query
    lm_heads_view(weights, layer, head, query)  # checks the weights and the settings
    check_labels(t, labels, MAX_T, "the weights of a passage of t characters",
                 f"Take a shorter passage: passage[:, :{MAX_T}].")
    n_layers, h = len(weights), weights[0].shape[1]
    views = {(la, hd): lm_heads_view(weights, la, hd, 0) for la in range(1, n_layers + 1) for hd in range(h)}
    data = pd.DataFrame([{"layer": la, "head": hd, "q": i, "k": j, "w": view["weights"][i][j]}
                         for (la, hd), view in views.items() for i in range(t) for j in range(i + 1)])
    chars = [str(c) for c in labels]
    params = [
        alt.param(name="layer", value=layer, bind=alt.binding_select(options=list(range(1, n_layers + 1)),
                                                                     name="layer ")),
        alt.param(name="head", value=head, bind=alt.binding_select(options=list(range(h)), name="head ")),
        alt.param(name="query", value=query, bind=alt.binding_range(min=0, max=t - 1, step=1, name="query ")),
        alt.param(name="chars", value=chars),  # the axes' labels
    ]
    labels_expr = "chars[datum.value]"
    chart = alt.vconcat(_heatmap(labels_expr).properties(width=CELL * t, height=CELL * t), _bars(labels_expr, t),
                        spacing=30, data=data).add_params(*params)
    description = (f"A heatmap of the attention weights of one of the trained model's {n_layers * h} heads on a "
                   f"held-out passage of {t} characters, one row per query, and below it the picked query's weights "
                   f"as bars with the key it weighs most, under menus for the layer and the head and a slider for the "
                   f"query.")
    return Explorer(chart, description, "Pick a layer, a head and a query")
