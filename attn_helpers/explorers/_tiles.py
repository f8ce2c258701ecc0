"""Chapter 10's explorer: the tiled forward pass, one tile at a time, with each query's m, ℓ and output."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..attention import attention
from ..flash import Tile, flash_forward, tiles
from ..masks import causal_mask
from ..traffic import Traffic
from ._explorer import INK, Explorer, rounded

__all__ = ["tile_walk_view", "tile_walk_explorer"]

#: The tiles' colours: the one just computed, those computed before it, those still to come and those skipped.
STATUS = {"current": "#e45756", "done": "#4c78a8", "to come": "#c6dbef", "skipped": "#eeeeee"}
PICKED = "#ff7f0e"  # the outline of the picked query's row
GHOST = "#888888"  # the marks of the step before, on light pages and dark ones
#: The style of the veil that makes blocked scores pale: white on light pages, darker on the website's dark ones.
PALE = "pale"
#: The tile grid's side in pixels; with its legend beside it and the panels below, the explorer fits a phone.
GRID = 160
#: The short panels' value axes: a few ticks, so that a reader can read a value off them (Vega would draw one).
TICKS = alt.Axis(tickCount=4)


class _Record(Traffic):
    """A traffic counter that keeps what ``flash_forward`` leaves after each tile (:meth:`Traffic.state`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tiles: list[tuple[Tile, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def state(self, tile: Tile, s: torch.Tensor, alpha: torch.Tensor, m: torch.Tensor, ell: torch.Tensor,
              acc: torch.Tensor) -> None:
        self.tiles.append((tile, s, alpha, m, ell, acc))


def _walk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
          causal: bool) -> list[tuple[Tile | None, torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor,
                                  torch.Tensor]]:
    """``(tile, s, alpha, m, l, acc)`` before the first tile and after each tile of ``flash_forward``'s walk.

    ``s`` ``(B_r, B_c)`` and ``alpha`` ``(B_r, 1)`` are the tile's scores and the factor that rescaled its rows, as
    ``flash_forward`` computed them (``None`` before the first tile); ``m`` and ``l`` ``(t_q, 1)`` and ``acc``
    ``(t_q, d_v)`` hold every query's state: the rows of the tiles so far, as ``flash_forward`` left them, and
    ``m = -inf``, ``l = 0``, ``acc = 0`` for a query no tile has reached yet.
    """
    record = _Record()
    q, k, v = q.double(), k.double(), v.double()  # float64: the explorer's numbers are the same on every CPU
    flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k, traffic=record)
    m = torch.full((q.shape[-2], 1), -math.inf, dtype=q.dtype)  # (t_q, 1)
    ell, acc = torch.zeros_like(m), torch.zeros(q.shape[-2], v.shape[-1], dtype=q.dtype)  # (t_q, 1), (t_q, d_v)
    states = [(None, None, None, m, ell, acc)]
    for tile, s, alpha, m_r, ell_r, acc_r in record.tiles:  # each tile's rows, put in place among the others
        r = tile.rows
        m, ell, acc = (x.slice_scatter(x_r, 0, r.start, r.stop) for x, x_r in ((m, m_r), (ell, ell_r), (acc, acc_r)))
        states.append((tile, s, alpha, m, ell, acc))
    return states


def _outputs(ell: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    """``acc / l`` ``(t_q, d_v)``: each query's output over the keys seen so far, 0 before its first tile, as
    ``flash_forward`` divides after a row's last tile."""
    return acc / torch.where(ell == 0, torch.ones_like(ell), ell)


def tile_walk_view(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int, step: int,
                   causal: bool = False) -> dict:
    """What :func:`tile_walk_explorer` shows after ``step`` tiles (chapter 10): each query's m, ℓ and output.

    q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``, walked in tiles of ``block_q × block_k`` by
    ``ah.flash.flash_forward``, whose states it replays in float64. Returns the ``tile`` just computed (``None`` at
    step 0), ``tiles`` (how many the walk computes), and per query ``reached``, ``m`` (``-inf`` before its first
    tile), ``l``, ``output = acc / l`` (0 before its first tile), ``exact`` (``ah.attention``'s output) and ``gap``,
    the largest ``|output - exact|`` over the queries reached (``None`` at step 0). ``scores`` ``(B_r, B_c)`` are the
    tile's scores (``-inf`` where blocked); ``factor`` holds, for each query of the tile that an earlier tile reached,
    the ``exp(m_old - m_new)`` that rescaled its ℓ and output (``None`` for every other query); ``before`` is the
    ``reached``, ``m``, ``l`` and ``output`` of step ``step - 1`` (``None`` at step 0).
    """
    validate.one_sequence_args(q, k, v, None, "tile_walk_view")
    validate.tiled_attention_args(q, k, v, None, causal, block_q, block_k, None)
    states = _walk(q, k, v, block_q, block_k, causal)
    step = validate.integer(step, "step", minimum=0, maximum=len(states) - 1, why="the number of tiles computed")
    tile, s, alpha, m, ell, acc = states[step]
    output = _outputs(ell, acc)  # (t_q, d_v)
    mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    exact, _ = attention(q.double(), k.double(), v.double(), mask)  # (t_q, d_v)
    reached = (ell > 0)[:, 0]  # (t_q,)
    gap = (output - exact).abs()[reached].max().item() if reached.any() else None  # None: no query reached yet
    view = {"step": step, "tiles": len(states) - 1, "tile": tile, "reached": reached.tolist(), "m": m[:, 0].tolist(),
            "l": ell[:, 0].tolist(), "output": output.tolist(), "exact": exact.tolist(), "gap": gap,
            "scores": None, "factor": [None] * q.shape[-2], "before": None}
    if tile is not None:
        _, _, _, m_0, ell_0, acc_0 = states[step - 1]
        was = (ell_0 > 0)[:, 0]  # (t_q,): reached before this tile
        view["scores"] = s.tolist()
        view["factor"] = [alpha[i - tile.rows.start, 0].item() if tile.rows.start <= i < tile.rows.stop and was[i]
                          else None for i in range(q.shape[-2])]
        view["before"] = {"reached": was.tolist(), "m": m_0[:, 0].tolist(), "l": ell_0[:, 0].tolist(),
                          "output": _outputs(ell_0, acc_0).tolist()}
    return view


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


def _factors(view: dict) -> tuple[str, str]:
    """The caption's second line at one step, and its label: the factor ``exp(m_old - m_new)`` of each query of the
    tile that an earlier tile reached."""
    tile, factors = view["tile"], [(i, a) for i, a in enumerate(view["factor"]) if a is not None]
    if tile is None:
        return "", ""
    if not factors:
        return "its queries' first tile: nothing to rescale", "its queries' first tile: nothing to rescale"
    text = ", ".join(f"{rounded(a):.2f} (query {i})" for i, a in factors)
    label = ", ".join(f"query {i} {rounded(a):.8f}" for i, a in factors)
    return f"e^(m_old − m_new) = {text}", f"rescaling factor exp(m_old - m_new): {label}"


def _walk_data(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
               causal: bool) -> dict[str, pd.DataFrame]:
    """Every step of the walk as rounded rows: ``rows`` per query (m, ℓ, and ``m0``, ``l0`` the step before for the
    tile's queries that an earlier tile reached, else None), ``outs`` per query and dimension (output, exact, ``o0``
    likewise), ``scores`` each computed score with its tile, ``captions`` per step, and ``exact`` the exact output."""
    n = tile_walk_view(q, k, v, block_q, block_k, 0, causal)["tiles"]
    data = {name: [] for name in ("rows", "outs", "scores", "captions")}
    for step in range(n + 1):
        view = tile_walk_view(q, k, v, block_q, block_k, step, causal)
        before = view["before"]
        for i in (i for i, seen in enumerate(view["reached"]) if seen):
            again = view["factor"][i] is not None  # a query of the tile that an earlier tile reached: a ghost
            data["rows"].append({"step": step, "query": i, "m": rounded(view["m"][i]), "l": rounded(view["l"][i]),
                                 "m0": rounded(before["m"][i]) if again else None,
                                 "l0": rounded(before["l"][i]) if again else None})
            data["outs"] += [{"step": step, "query": i, "dim": f"output {d + 1}", "o": rounded(o),
                              "exact": rounded(e), "o0": rounded(before["output"][i][d]) if again else None}
                             for d, (o, e) in enumerate(zip(view["output"][i], view["exact"][i], strict=True))]
        tile = view["tile"]
        if tile is not None:
            data["scores"] += [{"step": step, "i": tile.rows.start + a, "j": tile.cols.start + b,
                                "s": None if math.isinf(x) else rounded(x)}
                               for a, row in enumerate(view["scores"]) for b, x in enumerate(row)]
        where = ("no tile computed yet" if tile is None else
                 f"queries {tile.rows.start}–{tile.rows.stop - 1} × keys {tile.cols.start}–{tile.cols.stop - 1}"
                 + (", masked" if tile.masked else ""))
        gap = {"gap": 0.0, "reached": 0} if view["gap"] is None else {"gap": rounded(view["gap"]), "reached": 1}
        factors, label = _factors(view)
        data["captions"].append({"step": step, "where": where, "factors": factors, "factors_label": label, **gap})
    data["exact"] = [{"query": i, "dim": f"output {d + 1}", "exact": rounded(e)}
                     for i, row in enumerate(view["exact"]) for d, e in enumerate(row)]
    return {name: pd.DataFrame(rows) for name, rows in data.items()}


def _domain(*columns: pd.Series) -> list[float]:
    """A fixed axis range around every value the slider can show, so that the axes stay put as it moves."""
    low, high = min(min(c.min(), 0.0) for c in columns), max(c.max() for c in columns)
    pad = 0.05 * (high - low)
    return [rounded(low - pad), rounded(high + pad)]


def _walk_chart(grid: pd.DataFrame, cells: pd.DataFrame, data: dict[str, pd.DataFrame], tile: alt.Parameter, n: int,
                block_q: int, block_k: int, pick: alt.Parameter) -> alt.LayerChart:
    """The score matrix in tiles, coloured by where the walk is at the slider's step, the tile's scores in its cells,
    under two lines: the tile, and the factor that rescaled each of its queries."""
    t_q, t_k = int(cells["i1"].max()), int(cells["j1"].max())
    status = (f"datum.n == 0 ? 'skipped' : datum.n == {tile.name} ? 'current' : "
              f"datum.n < {tile.name} ? 'done' : 'to come'")

    def keys(field: str) -> alt.X:  # ticked at the tiles' edges
        return alt.X(field, scale=alt.Scale(domain=[0, t_k]), title="key",
                     axis=alt.Axis(values=list(range(0, t_k + 1, block_k)), labelOverlap=False))

    def queries(field: str) -> alt.Y:  # query 0 at the top, as in a matrix
        return alt.Y(field, scale=alt.Scale(domain=[0, t_q], reverse=True), title="query",
                     axis=alt.Axis(values=list(range(0, t_q + 1, block_q)), labelOverlap=False))

    where = {"x": keys("j:Q"), "x2": "j1:Q", "y": queries("i:Q"), "y2": "i1:Q"}
    scores = alt.Chart(cells).transform_calculate(status=status).mark_rect(aria=False).properties(
        name="tile_scores").add_params(pick).encode(  # named: Altair's names change between runs
        color=alt.Color("status:N", title="tile", legend=alt.Legend(orient="right"),
                        scale=alt.Scale(domain=list(STATUS), range=list(STATUS.values()))),
        stroke=alt.condition(pick, alt.value(PICKED), alt.value("transparent")),  # the picked query's row
        **where)
    # Blocked scores pale: a veil of the page's colour (PALE), which the website's dark pages darken.
    veil = alt.Chart(cells).transform_filter("!datum.allowed").mark_rect(aria=False, style=PALE).encode(
        **where).properties(name="tile_veil")
    numbers = (
        alt.Chart(data["scores"]).transform_filter(f"datum.step == {tile.name}")
        .transform_calculate(x="datum.j + 0.5", y="datum.i + 0.5",
                             shown="datum.s === null ? '−∞' : format(datum.s, '.1f')",
                             label="'score of query ' + datum.i + ', key ' + datum.j + ': '"
                                   " + (datum.s === null ? 'blocked' : format(datum.s, '.8f'))")
        .mark_text(fontSize=9)
        .encode(x=alt.X("x:Q", scale=alt.Scale(domain=[0, t_k])), y=alt.Y("y:Q", scale=alt.Scale(domain=[0, t_q])),
                text="shown:N", description=alt.Description("label:N"))
    )
    numbers = alt.layer(numbers.transform_filter("datum.s !== null").encode(color=alt.value("black")),
                        numbers.transform_filter("datum.s === null").mark_text(fontSize=9, style=INK))
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
    now = alt.Chart(data["captions"]).transform_filter(f"datum.step == {tile.name}")
    caption = (
        now.transform_calculate(text=f"'after ' + datum.step + ' of {n} tiles: ' + datum.where")
        .mark_text(align="left", x=0, y=-26, fontSize=12)
        .encode(text="text:N", description=alt.Description("text:N"))
    )
    factors = (
        now.transform_filter("datum.factors != ''")
        .mark_text(align="left", x=0, y=-10, fontSize=12)
        .encode(text="factors:N", description=alt.Description("factors_label:N"))
    )
    gap = (
        now.transform_calculate(text="datum.reached ? 'largest gap to\\nexact output:\\n' + format(datum.gap, '.4f')"
                                     " : 'no query\\nreached yet'",
                                label="datum.reached ? 'largest gap to exact attention ' + format(datum.gap, '.8f')"
                                      " : 'no query reached yet'")
        .mark_text(align="left", baseline="top", x=GRID + 12, y=GRID * 5 // 8, fontSize=11, lineBreak="\n")
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    return alt.layer(scores, veil, numbers, computed, skipped, caption, factors, gap).properties(
        width=GRID, height=GRID * t_q // t_k)


def _state_charts(data: dict[str, pd.DataFrame], tile: alt.Parameter, t_q: int) -> list[alt.TopLevelMixin]:
    """Three panels, query by query, at the slider's step: m (points), ℓ (bars), output (points) and exact (ticks),
    and, hollow or dashed, where the tile's queries were before it (one mark with the values now, so that a step
    without such a query draws no empty mark, which screen readers would meet unlabelled)."""
    rows, outs = data["rows"], data["outs"]
    x = alt.X("query:O", scale=alt.Scale(domain=list(range(t_q))), title="query", axis=alt.Axis(labelAngle=0))

    def now_and_before(chart: alt.Chart, now: str, before: str, name: str) -> alt.Chart:  # one datum a value shown
        return (chart.transform_filter(f"datum.step == {tile.name}").transform_fold([now, before], as_=["when", "y"])
                .transform_filter("datum.y !== null").transform_calculate(
                    label=f"{name} + ' of query ' + datum.query + (datum.when == '{before}' ? ' before this tile' : '')"
                          " + ': ' + format(datum.y, '.8f')"))

    hollow = {"fillOpacity": alt.condition("datum.when == 'm0' || datum.when == 'o0'", alt.value(0), alt.value(1)),
              "strokeDash": alt.condition("datum.when == 'm0' || datum.when == 'o0'", alt.value([2, 1]),
                                          alt.value([1, 0]))}
    m = now_and_before(alt.Chart(rows), "m", "m0", "'m'").mark_point(filled=True, size=50, style=INK).encode(
        x=x, y=alt.Y("y:Q", title="m", scale=alt.Scale(domain=_domain(rows["m"])), axis=TICKS),
        description=alt.Description("label:N"), **hollow)
    ell = now_and_before(alt.Chart(rows), "l", "l0", "'ℓ'").mark_bar().encode(
        x=x, y=alt.Y("y:Q", title="ℓ", scale=alt.Scale(domain=_domain(rows["l"])), stack=None),
        fill=alt.condition("datum.when == 'l0'", alt.value("transparent"), alt.value(STATUS["done"])),
        stroke=alt.condition("datum.when == 'l0'", alt.value(GHOST), alt.value("transparent")),
        strokeDash=alt.condition("datum.when == 'l0'", alt.value([3, 2]), alt.value([1, 0])),
        strokeWidth=alt.value(1.5), description=alt.Description("label:N"))
    values = alt.Scale(domain=_domain(outs["o"], outs["exact"]))
    dims = {"x": x, "xOffset": "dim:N", "color": alt.Color("dim:N", title=None, legend=alt.Legend(orient="bottom"))}
    ticks = alt.Chart(data["exact"]).transform_calculate(
        label="'exact ' + datum.dim + ' of query ' + datum.query + ': ' + format(datum.exact, '.8f')").mark_tick(
        thickness=2).encode(y=alt.Y("exact:Q", title="output", scale=values, axis=TICKS),
                            description=alt.Description("label:N"), **dims)
    moving = alt.Chart(outs).transform_filter(f"datum.step == {tile.name}")
    gaps = moving.mark_rule(aria=False).encode(y=alt.Y("o:Q", scale=values), y2="exact:Q", **dims)
    points = now_and_before(alt.Chart(outs), "o", "o0", "datum.dim").mark_point(filled=True, size=40).encode(
        y=alt.Y("y:Q", scale=values), stroke=alt.Stroke("dim:N", legend=None), description=alt.Description("label:N"),
        **dims, **hollow)
    panel = {"width": 260, "height": 70}
    return [m.properties(title="running maximum m of each query (○ before the tile)", **panel),
            ell.properties(title="running sum ℓ (dashed: before the tile)", **panel),
            alt.layer(ticks, gaps, points).properties(title="output (● now, ○ before the tile), exact (ticks)",
                                                      **panel)]


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
    data = _walk_data(q, k, v, block_q, block_k, causal)
    query = t_q - 1 if query is None else validate.integer(query, "query", minimum=0, maximum=t_q - 1,
                                                              why="the query picked at the start")
    for name in ("rows", "outs"):  # "i": the query, as the cells name it
        data[name] = data[name].assign(i=data[name]["query"])
    tile = alt.param(name="tile", value=step, bind=alt.binding_range(min=0, max=n, step=1, name="tiles computed "))
    pick = alt.selection_point(name="pick", fields=["i"], on="click", clear=False, value=[{"i": query}],
                               bind=alt.binding_select(options=list(range(t_q)), name="query "))
    walk = _walk_chart(grid, cells, data, tile, n, block_q, block_k, pick)
    chart = alt.vconcat(
        walk, *_query_charts(data["rows"], data["outs"], pick, tile, n), *_state_charts(data, tile, t_q),
    ).resolve_scale(color="independent").add_params(tile)
    description = (f"The {n} tiles flash_forward computes for {t_q} queries and {t_k} keys in tiles of {block_q} × "
                   f"{block_k}{', causal' if causal else ''}, one at a time under a slider, with each query's running "
                   "maximum m, running sum ℓ and output beside the exact attention, which a query's output reaches "
                   "at the last tile of its row.")
    explorer = Explorer(chart, description, "Step the tiles; click a row to follow its m and ℓ")
    # The veil's colour on light pages; _static/explorers.js gives it the page's own on dark ones.
    explorer.chart.config.style[PALE] = {"color": "white", "fill": "white", "opacity": 0.7}
    return explorer
