"""Chapter 10's explorer: the tiled forward pass, one tile at a time, with each query's m, ℓ and output."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..attention import attention
from ..flash import Tile, tile_scores, tiles
from ..masks import causal_mask
from ..merge import finite_or_zero
from ._explorer import INK, Explorer, rounded

__all__ = ["tile_walk_view", "tile_walk_explorer"]

#: The tiles' colours: the one just computed, those computed before it, those still to come and those skipped.
STATUS = {"current": "#e45756", "done": "#4c78a8", "to come": "#c6dbef", "skipped": "#eeeeee"}
PICKED = "#ff7f0e"  # the outline of the picked query's row
#: The tile grid's side in pixels; with its legend beside it and the panels below, the explorer fits a phone.
GRID = 160
#: The short panels' value axes: a few ticks, so that a reader can read a value off them (Vega would draw one).
TICKS = alt.Axis(tickCount=4)


def _walk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
          causal: bool) -> list[tuple[Tile | None, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``(tile, m, l, acc)`` before the first tile and after each tile of ``flash_forward``'s walk, for all queries.

    ``m`` and ``l`` are ``(t_q, 1)``, ``acc`` ``(t_q, d_v)``; a query no tile has reached yet has ``m = -inf``,
    ``l = 0`` and ``acc = 0``. Each tile updates its rows with ``flash_forward``'s online softmax.
    """
    scale, _ = validate.tiled_attention_args(q, k, v, None, causal, block_q, block_k, None)
    work = torch.promote_types(q.dtype, torch.float32)  # as flash_forward: 16-bit inputs are computed in float32
    q, k, v = q.to(work), k.to(work), v.to(work)
    shift = k.shape[-2] - q.shape[-2]
    m = torch.full((q.shape[-2], 1), -math.inf, dtype=work)  # (t_q, 1): every query's running maximum
    ell, acc = torch.zeros_like(m), torch.zeros(q.shape[-2], v.shape[-1], dtype=work)  # (t_q, 1), (t_q, d_v)
    states = [(None, m, ell, acc)]
    for tile in tiles(q.shape[-2], k.shape[-2], block_q, block_k, causal):
        r = tile.rows
        s = tile_scores(q[r], k[tile.cols], scale, tile, shift, None)  # (B_r, B_c)
        m_r = torch.maximum(m[r], s.amax(dim=-1, keepdim=True))  # (B_r, 1)
        p, alpha = torch.exp(s - finite_or_zero(m_r)), torch.exp(m[r] - finite_or_zero(m_r))  # (B_r, B_c), (B_r, 1)
        ell_r, acc_r = alpha * ell[r] + p.sum(dim=-1, keepdim=True), alpha * acc[r] + p @ v[tile.cols]
        m, ell, acc = (x.slice_scatter(x_r, 0, r.start, r.stop) for x, x_r in ((m, m_r), (ell, ell_r), (acc, acc_r)))
        states.append((tile, m, ell, acc))
    return states


def tile_walk_view(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int, step: int,
                   causal: bool = False) -> dict:
    """What :func:`tile_walk_explorer` shows after ``step`` tiles (chapter 10): each query's m, ℓ and output.

    q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``, walked in tiles of ``block_q × block_k`` in
    ``ah.flash.flash_forward``'s order (``ah.flash.tiles``). Returns the ``tile`` just computed (``None`` at step
    0), ``tiles`` (how many the walk computes), and per query ``reached``, ``m`` (``-inf`` before its first tile),
    ``l``, ``output = acc / l`` (0 before its first tile), ``exact`` (``ah.attention``'s output) and ``gap``, the
    largest ``|output - exact|`` over the queries reached (``None`` at step 0).
    """
    validate.one_sequence_args(q, k, v, None, "tile_walk_view")
    states = _walk(q, k, v, block_q, block_k, causal)
    step = validate.integer(step, "step", minimum=0, maximum=len(states) - 1, why="the number of tiles computed")
    tile, m, ell, acc = states[step]
    output = acc / torch.where(ell == 0, torch.ones_like(ell), ell)  # (t_q, d_v), as flash_forward divides
    mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    exact, _ = attention(q.to(output.dtype), k.to(output.dtype), v.to(output.dtype), mask)  # (t_q, d_v)
    reached = (ell > 0)[:, 0]  # (t_q,)
    gap = (output - exact).abs()[reached].max().item() if reached.any() else None  # None: no query reached yet
    return {"step": step, "tiles": len(states) - 1, "tile": tile, "reached": reached.tolist(),
            "m": m[:, 0].tolist(), "l": ell[:, 0].tolist(), "output": output.tolist(), "exact": exact.tolist(),
            "gap": gap}


def _tile_grid(t_q: int, t_k: int, block_q: int, block_k: int, causal: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every tile of the score matrix with its place in the walk (0: skipped), and every score with its tile's."""
    order = {(tile.rows.start, tile.cols.start): (n, tile.masked)
             for n, tile in enumerate(tiles(t_q, t_k, block_q, block_k, causal), start=1)}
    grid = []
    for r in range(0, t_q, block_q):
        for c in range(0, t_k, block_k):
            n, masked = order.get((r, c), (0, False))
            kind = "skipped" if n == 0 else "masked" if masked else "whole"
            grid.append({"r0": r, "r1": min(r + block_q, t_q), "c0": c, "c1": min(c + block_k, t_k), "n": n,
                         "kind": kind})
    allowed = causal_mask(t_q, t_k) if causal else torch.ones(t_q, t_k, dtype=torch.bool)
    cells = [{"i": i, "j": j, "i1": i + 1, "j1": j + 1, "allowed": bool(allowed[i, j]),
              "n": order.get((i - i % block_q, j - j % block_k), (0, False))[0]}
             for i in range(t_q) for j in range(t_k)]
    return pd.DataFrame(grid), pd.DataFrame(cells)


def _walk_data(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
               causal: bool) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every step's state as rounded rows: per query (m, ℓ), per query and dimension (output, exact), per step a
    caption, and the exact output on its own."""
    n = tile_walk_view(q, k, v, block_q, block_k, 0, causal)["tiles"]
    rows, outs, captions = [], [], []
    for step in range(n + 1):
        view = tile_walk_view(q, k, v, block_q, block_k, step, causal)
        for i in (i for i, seen in enumerate(view["reached"]) if seen):
            rows.append({"step": step, "query": i, "m": rounded(view["m"][i]), "l": rounded(view["l"][i])})
            outs += [{"step": step, "query": i, "dim": f"output {d + 1}", "o": rounded(o), "exact": rounded(e)}
                     for d, (o, e) in enumerate(zip(view["output"][i], view["exact"][i], strict=True))]
        tile = view["tile"]
        where = ("no tile computed yet" if tile is None else
                 f"queries {tile.rows.start}–{tile.rows.stop - 1} × keys {tile.cols.start}–{tile.cols.stop - 1}"
                 + (", masked" if tile.masked else ""))
        gap = {"gap": 0.0, "reached": 0} if view["gap"] is None else {"gap": rounded(view["gap"]), "reached": 1}
        captions.append({"step": step, "where": where, **gap})
    exact = [{"query": i, "dim": f"output {d + 1}", "exact": rounded(e)}
             for i, row in enumerate(view["exact"]) for d, e in enumerate(row)]
    return pd.DataFrame(rows), pd.DataFrame(outs), pd.DataFrame(captions), pd.DataFrame(exact)


def _domain(*columns: pd.Series) -> list[float]:
    """A fixed axis range around every value the slider can show, so that the axes stay put as it moves."""
    low, high = min(min(c.min(), 0.0) for c in columns), max(c.max() for c in columns)
    pad = 0.05 * (high - low)
    return [rounded(low - pad), rounded(high + pad)]


def _walk_chart(grid: pd.DataFrame, cells: pd.DataFrame, captions: pd.DataFrame, tile: alt.Parameter, n: int,
                block_q: int, block_k: int, pick: alt.Parameter) -> alt.LayerChart:
    """The score matrix in tiles, coloured by where the walk is at the slider's step, under a caption."""
    t_q, t_k = int(cells["i1"].max()), int(cells["j1"].max())
    status = (f"datum.n == 0 ? 'skipped' : datum.n == {tile.name} ? 'current' : "
              f"datum.n < {tile.name} ? 'done' : 'to come'")

    def keys(field: str) -> alt.X:  # ticked at the tiles' edges
        return alt.X(field, scale=alt.Scale(domain=[0, t_k]), title="key",
                     axis=alt.Axis(values=list(range(0, t_k + 1, block_k)), labelOverlap=False))

    def queries(field: str) -> alt.Y:  # query 0 at the top, as in a matrix
        return alt.Y(field, scale=alt.Scale(domain=[0, t_q], reverse=True), title="query",
                     axis=alt.Axis(values=list(range(0, t_q + 1, block_q)), labelOverlap=False))

    scores = alt.Chart(cells).transform_calculate(status=status).mark_rect(aria=False).properties(
        name="tile_scores").add_params(pick).encode(  # named: Altair's names change between runs
        x=keys("j:Q"), x2="j1:Q", y=queries("i:Q"), y2="i1:Q",
        color=alt.Color("status:N", title="tile", legend=alt.Legend(orient="right"),
                        scale=alt.Scale(domain=list(STATUS), range=list(STATUS.values()))),
        opacity=alt.condition("datum.allowed", alt.value(1.0), alt.value(0.3)),  # blocked scores pale
        stroke=alt.condition(pick, alt.value(PICKED), alt.value("transparent")),  # the picked query's row
    )
    outlines = (
        alt.Chart(grid).transform_calculate(status=status)
        .transform_calculate(label=f"'tile ' + (datum.n == 0 ? 'skipped' : datum.n + ' of {n}') + "
                                   "', queries ' + datum.r0 + '–' + (datum.r1 - 1) + ', keys ' + datum.c0 + '–' + "
                                   "(datum.c1 - 1) + ', ' + datum.kind + ': ' + datum.status")
        .encode(x=keys("c0:Q"), x2="c1:Q", y=queries("r0:Q"), y2="r1:Q", description=alt.Description("label:N"))
    )
    computed = outlines.transform_filter("datum.n > 0").mark_rect(fillOpacity=0, style=INK).encode(
        strokeWidth=alt.condition(f"datum.n == {tile.name}", alt.value(3), alt.value(0.8)))
    skipped = outlines.transform_filter("datum.n == 0").mark_rect(fillOpacity=0, stroke="#888888", strokeDash=[3, 2])
    now = alt.Chart(captions).transform_filter(f"datum.step == {tile.name}")
    caption = (
        now.transform_calculate(text=f"'after ' + datum.step + ' of {n} tiles: ' + datum.where")
        .mark_text(align="left", x=0, y=-10, fontSize=12)
        .encode(text="text:N", description=alt.Description("text:N"))
    )
    gap = (
        now.transform_calculate(text="datum.reached ? 'largest gap to\\nexact output:\\n' + format(datum.gap, '.4f')"
                                     " : 'no query\\nreached yet'",
                                label="datum.reached ? 'largest gap to exact attention ' + format(datum.gap, '.8f')"
                                      " : 'no query reached yet'")
        .mark_text(align="left", baseline="top", x=GRID + 12, y=GRID * 5 // 8, fontSize=11, lineBreak="\n")
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    return alt.layer(scores, computed, skipped, caption, gap).properties(width=GRID, height=GRID * t_q // t_k)


def _state_charts(rows: pd.DataFrame, outs: pd.DataFrame, exact: pd.DataFrame, tile: alt.Parameter,
                  t_q: int) -> list[alt.TopLevelMixin]:
    """Three panels, query by query, at the slider's step: m (points), ℓ (bars), output (points) and exact (ticks)."""
    x = alt.X("query:O", scale=alt.Scale(domain=list(range(t_q))), title="query", axis=alt.Axis(labelAngle=0))
    state = alt.Chart(rows).transform_filter(f"datum.step == {tile.name}")
    m = state.transform_calculate(label="'m of query ' + datum.query + ': ' + format(datum.m, '.8f')").mark_point(
        filled=True, size=50, style=INK).encode(
        x=x, y=alt.Y("m:Q", title="m", scale=alt.Scale(domain=_domain(rows["m"])), axis=TICKS),
        description=alt.Description("label:N"))
    ell = state.transform_calculate(label="'ℓ of query ' + datum.query + ': ' + format(datum.l, '.8f')").mark_bar(
        color=STATUS["done"]).encode(
        x=x, y=alt.Y("l:Q", title="ℓ", scale=alt.Scale(domain=_domain(rows["l"]))),
        description=alt.Description("label:N"))
    values = alt.Scale(domain=_domain(outs["o"], outs["exact"]))
    dims = {"x": x, "xOffset": "dim:N", "color": alt.Color("dim:N", title=None, legend=alt.Legend(orient="bottom"))}
    ticks = alt.Chart(exact).transform_calculate(
        label="'exact ' + datum.dim + ' of query ' + datum.query + ': ' + format(datum.exact, '.8f')").mark_tick(
        thickness=2).encode(y=alt.Y("exact:Q", title="output", scale=values, axis=TICKS),
                        description=alt.Description("label:N"),
                            **dims)
    moving = alt.Chart(outs).transform_filter(f"datum.step == {tile.name}")
    gaps = moving.mark_rule(aria=False).encode(y=alt.Y("o:Q", scale=values), y2="exact:Q", **dims)
    points = moving.transform_calculate(
        label="datum.dim + ' of query ' + datum.query + ': ' + format(datum.o, '.8f')").mark_point(
        filled=True, size=40).encode(y=alt.Y("o:Q", scale=values), description=alt.Description("label:N"), **dims)
    panel = {"width": 260, "height": 70}
    return [m.properties(title="running maximum m of each query", **panel),
            ell.properties(title="running sum ℓ", **panel),
            alt.layer(ticks, gaps, points).properties(title="output (points) and exact attention (ticks)", **panel)]


def _query_charts(rows: pd.DataFrame, outs: pd.DataFrame, pick: alt.Parameter, tile: alt.Parameter,
                  n: int) -> list[alt.TopLevelMixin]:
    """The picked query over every step: m (points) and ℓ (bars) on two axes, where a rise of m shows as ℓ's drop,
    and its output beside the exact one; a rule marks the slider's step."""
    x = alt.X("step:O", scale=alt.Scale(domain=list(range(n + 1))), title="tiles computed",
              axis=alt.Axis(labelAngle=0))
    now = alt.Chart(pd.DataFrame({"n": [0]})).transform_calculate(step=tile.name).mark_rule(
        color=STATUS["current"], strokeWidth=2, aria=False).encode(x=x)
    picked = alt.Chart(rows).transform_filter(pick)
    label = ("'query ' + datum.query + ' after ' + datum.step + ' tiles: m ' + format(datum.m, '.8f')"
             " + ', ℓ ' + format(datum.l, '.8f')")
    ell = picked.mark_bar(color=STATUS["to come"], aria=False).encode(
        x=x, y=alt.Y("l:Q", title="ℓ (bars)", scale=alt.Scale(domain=_domain(rows["l"])), axis=TICKS))
    m = picked.transform_calculate(label=label).mark_point(filled=True, size=50, style=INK).encode(
        x=x, y=alt.Y("m:Q", title="m (points)", scale=alt.Scale(domain=_domain(rows["m"])), axis=TICKS),
        description=alt.Description("label:N"))
    heading = picked.transform_aggregate(query="min(query)").transform_calculate(
        text="'query ' + datum.query + ' at every step: m (points), ℓ (bars)'").mark_text(
        align="left", x=0, y=-12, fontSize=12, aria=False).encode(text="text:N")
    panel = {"width": 260, "height": 70}
    state = alt.layer(ell, now, m, heading).resolve_scale(y="independent").properties(**panel)
    values = alt.Scale(domain=_domain(outs["o"], outs["exact"]))
    colour = alt.Color("dim:N", title=None, legend=None)
    chosen = alt.Chart(outs).transform_filter(pick)
    lines = chosen.mark_line(point=alt.OverlayMarkDef(filled=True, size=30)).transform_calculate(
        label="'query ' + datum.query + ' after ' + datum.step + ' tiles: ' + datum.dim + ' '"
              " + format(datum.o, '.8f')").encode(
        x=x, y=alt.Y("o:Q", title="output", scale=values, axis=TICKS), color=colour,
        description=alt.Description("label:N"))
    exact = chosen.transform_filter(f"datum.step == {n}").mark_rule(strokeDash=[4, 3], aria=False).encode(
        y=alt.Y("exact:Q", scale=values), color=colour)
    output = alt.layer(exact, now, lines).properties(title="its output (lines) and exact (dashed)", **panel)
    return [state, output]


def tile_walk_explorer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
                       causal: bool = False, step: int = 1, query: int | None = None) -> Explorer:
    """The tiles of ``flash_forward``'s walk under a slider, with each query's m, ℓ and output (chapter 10).

    q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``: keep them small (t of about 8). Every step's state is
    :func:`tile_walk_view`'s, computed here; the browser shows the one the slider selects. A click on a row of the
    tiles, or the menu "query", picks a query (``query``, the last by default) whose m, ℓ and output the two panels
    under the tiles follow over every step.
    """
    n = tile_walk_view(q, k, v, block_q, block_k, step, causal)["tiles"]  # checks the inputs and the step
    t_q, t_k = q.shape[0], k.shape[0]
    grid, cells = _tile_grid(t_q, t_k, block_q, block_k, causal)
    rows, outs, captions, exact = _walk_data(q, k, v, block_q, block_k, causal)
    query = t_q - 1 if query is None else validate.integer(query, "query", minimum=0, maximum=t_q - 1,
                                                              why="the query picked at the start")
    rows, outs = rows.assign(i=rows["query"]), outs.assign(i=outs["query"])  # "i": the query, as the cells name it
    tile = alt.param(name="tile", value=step, bind=alt.binding_range(min=0, max=n, step=1, name="tiles computed "))
    pick = alt.selection_point(name="pick", fields=["i"], on="click", clear=False, value=[{"i": query}],
                               bind=alt.binding_select(options=list(range(t_q)), name="query "))
    walk = _walk_chart(grid, cells, captions, tile, n, block_q, block_k, pick)
    chart = alt.vconcat(
        walk, *_query_charts(rows, outs, pick, tile, n), *_state_charts(rows, outs, exact, tile, t_q),
    ).resolve_scale(color="independent").add_params(tile)
    description = (f"The {n} tiles flash_forward computes for {t_q} queries and {t_k} keys in tiles of {block_q} × "
                   f"{block_k}{', causal' if causal else ''}, one at a time under a slider, with each query's running "
                   "maximum m, running sum ℓ and output beside the exact attention, which a query's output reaches "
                   "at the last tile of its row.")
    return Explorer(chart, description, "Step the tiles; click a row to follow its m and ℓ")
