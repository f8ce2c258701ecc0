"""Chapter 10's tile-walk explorer: its view function against ``ah.flash.flash_forward``, step by step."""

from __future__ import annotations

import json
import math

import pytest
import torch
from messages import INTEGER_BETWEEN, POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers.explorers import tile_walk_explorer, tile_walk_view

#: (t_q, t_k, block_q, block_k, causal): the chapter's walk, blocks that do not divide t, and fewer queries than keys.
WALKS = [(8, 8, 2, 2, True), (8, 8, 2, 2, False), (7, 9, 3, 2, True), (5, 7, 2, 3, False)]


def inputs(t_q: int, t_k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t, d, generator=g, dtype=torch.float64) for t, d in ((t_q, 2), (t_k, 2), (t_k, 3)))


class Recorder(ah.traffic.Traffic):
    """A counter that also keeps what flash_forward tells it: the state it holds before each tile, ``hold(q_i, k_j,
    v_j, s, acc, m_i, l_i)``, and each block of queries' finished output and L, ``write(o_i, L_i)``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.held, self.finished = [], []

    def hold(self, *tensors: torch.Tensor) -> None:
        super().hold(*tensors)
        _, _, _, _, acc, m_i, l_i = tensors
        self.held.append((m_i.clone(), l_i.clone(), acc.clone()))

    def write(self, *tensors: torch.Tensor) -> None:
        super().write(*tensors)
        if len(tensors) == 2:  # (o_i, L_i) at the end of a block of queries
            self.finished.append(tuple(x.clone() for x in tensors))


@pytest.mark.parametrize("t_q, t_k, block_q, block_k, causal", WALKS)
def test_every_state_is_the_one_flash_forward_holds(t_q, t_k, block_q, block_k, causal):
    """After n tiles, the rows of tile n + 1 hold what flash_forward holds when it starts that tile; after a block's
    last tile, its rows hold flash_forward's output and L = m + log ℓ of that block."""
    q, k, v = inputs(t_q, t_k)
    recorder = Recorder()
    ah.flash.flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k, traffic=recorder)
    walk = list(ah.flash.tiles(t_q, t_k, block_q, block_k, causal))
    assert len(recorder.held) == len(walk) == tile_walk_view(q, k, v, block_q, block_k, 0, causal)["tiles"]
    for n, (tile, (m_i, l_i, acc)) in enumerate(zip(walk, recorder.held, strict=True)):
        view = tile_walk_view(q, k, v, block_q, block_k, n, causal)
        rows = tile.rows
        assert view["m"][rows] == m_i[:, 0].tolist() and view["l"][rows] == l_i[:, 0].tolist()
        expected = acc / torch.where(l_i == 0, torch.ones_like(l_i), l_i)
        assert view["output"][rows] == expected.tolist(), f"output of queries {rows} after {n} tiles"
    ends = [n for n, tile in enumerate(walk, start=1) if n == len(walk) or walk[n].rows != tile.rows]
    for n, (o_i, L_i) in zip(ends, recorder.finished, strict=True):
        view, rows = tile_walk_view(q, k, v, block_q, block_k, n, causal), walk[n - 1].rows
        assert view["output"][rows] == o_i.tolist()
        m, ell = (torch.tensor(view[name][rows], dtype=torch.float64) for name in ("m", "l"))
        assert torch.allclose(m + ell.log(), L_i[:, 0], rtol=0, atol=1e-14)


@pytest.mark.parametrize("t_q, t_k, block_q, block_k, causal", WALKS)
def test_the_last_step_is_exact_attention(t_q, t_k, block_q, block_k, causal):
    q, k, v = inputs(t_q, t_k, seed=1)
    last = ah.flash.tile_counts(t_q, t_k, block_q, block_k, causal)["computed"]
    view = tile_walk_view(q, k, v, block_q, block_k, last, causal)
    exact, _ = ah.attention(q, k, v, ah.causal_mask(t_q, t_k) if causal else None)
    assert all(view["reached"]) and view["gap"] <= 1e-6
    assert torch.allclose(torch.tensor(view["output"], dtype=torch.float64), exact, rtol=0, atol=1e-6)
    assert torch.allclose(torch.tensor(view["exact"], dtype=torch.float64), exact, rtol=0, atol=1e-12)


def test_before_any_tile_no_query_is_reached_and_each_tile_reaches_its_rows():
    q, k, v = inputs(8, 8)
    start = tile_walk_view(q, k, v, 2, 2, 0, causal=True)
    assert start["tile"] is None and start["gap"] is None and not any(start["reached"])
    assert start["m"] == [-math.inf] * 8 and start["l"] == [0.0] * 8 and start["output"] == [[0.0] * 3] * 8
    second = tile_walk_view(q, k, v, 2, 2, 2, causal=True)  # queries 2-3 against keys 0-1
    assert (second["tile"].rows, second["tile"].cols) == (slice(2, 4), slice(0, 2))
    assert second["reached"] == [True] * 4 + [False] * 4


def test_each_step_is_attention_over_the_keys_seen_so_far():
    """The online softmax is exact at every step: a reached query's m, ℓ and output are those of its keys so far."""
    q, k, v = inputs(8, 8, seed=2)
    walk = list(ah.flash.tiles(8, 8, 2, 2, causal=True))
    for n, tile in enumerate(walk, start=1):
        view, i = tile_walk_view(q, k, v, 2, 2, n, causal=True), tile.rows.start
        seen = min(tile.cols.stop, i + 1)  # query i's keys so far: those of its tiles, up to the diagonal
        s = q[i] @ k[:seen].T / math.sqrt(2)  # (seen,)
        assert view["m"][i] == pytest.approx(s.max().item(), abs=1e-12)
        assert view["l"][i] == pytest.approx(torch.exp(s - s.max()).sum().item(), abs=1e-12)
        assert view["output"][i] == pytest.approx((torch.softmax(s, -1) @ v[:seen]).tolist(), abs=1e-12)


def test_the_explorer_holds_every_state_rounded():
    q, k, v = inputs(8, 8)
    spec = tile_walk_explorer(q, k, v, 2, 2, causal=True).spec()
    data = spec["datasets"]
    fields = {"step", "query", "m", "l", "m0", "l0", "i"}
    states = next(rows for rows in data.values() if rows and set(rows[0]) == fields)
    assert all(row["i"] == row["query"] for row in states)  # "i": the query, as the picked row names it
    outs = next(rows for rows in data.values() if rows and "o" in rows[0])
    for step in (0, 1, 5, 10):
        view = tile_walk_view(q, k, v, 2, 2, step, causal=True)
        shown = {row["query"]: row for row in states if row["step"] == step}
        assert sorted(shown) == [i for i, seen in enumerate(view["reached"]) if seen]
        for i, row in shown.items():
            assert (row["m"], row["l"]) == pytest.approx((view["m"][i], view["l"][i]), rel=1e-7)
            assert [o["o"] for o in outs if o["step"] == step and o["query"] == i] == pytest.approx(
                view["output"][i], rel=1e-7, abs=1e-12)
    grid = next(rows for rows in data.values() if rows and "kind" in rows[0])
    kinds = [row["kind"] for row in grid]
    counts = ah.flash.tile_counts(8, 8, 2, 2, causal=True)
    assert (kinds.count("skipped"), kinds.count("masked"), len(kinds)) == (counts["skipped"], counts["masked"], 16)
    params = {p["name"]: p for p in spec["params"]}
    assert params["tile"]["bind"] == {"input": "range", "min": 0, "max": 10, "step": 1, "name": "tiles computed "}
    assert params["pick"]["value"] == [{"i": 7}] and params["pick"]["views"] == ["tile_scores"]  # the last query
    assert params["pick"]["bind"] == {"input": "select", "options": list(range(8)), "name": "query "}
    assert tile_walk_explorer(q, k, v, 2, 2, causal=True, query=2).spec()["params"][0]["value"] == [{"i": 2}]
    with pytest.raises(ValueError, match="query"):
        tile_walk_explorer(q, k, v, 2, 2, causal=True, query=8)


def test_the_same_input_gives_the_same_specification():
    q, k, v = inputs(8, 8)
    one, two = (json.dumps(tile_walk_explorer(q, k, v, 2, 2, causal=True).spec(), sort_keys=True) for _ in range(2))
    assert one == two and len(one) < 100_000


def test_tile_walk_view_checks_its_input():
    q, k, v = inputs(8, 8)
    with raises_saying(ValueError, "step " + INTEGER_BETWEEN + " 0 and 10 (the number of tiles computed)"):
        tile_walk_view(q, k, v, 2, 2, 11, causal=True)
    with pytest.raises(ValueError, match="takes one sequence: q must be 2-D"):
        tile_walk_view(q[None], k[None], v[None], 2, 2, 0)
    with raises_saying(ValueError, "block_k " + POSITIVE_INTEGER):
        tile_walk_view(q, k, v, 2, 0, 0)
    with pytest.raises(ValueError, match="causal=True with t_q=8 queries but t_k=4 keys"):
        tile_walk_explorer(q, k[:4], v[:4], 2, 2, causal=True)


@pytest.mark.parametrize("t_q, t_k, block_q, block_k, causal", WALKS)
def test_the_view_shows_the_tile_its_factor_and_the_step_before(t_q, t_k, block_q, block_k, causal):
    """``scores`` are the tile's scores, ``factor`` is exp(m_old − m_new) for each of its queries an earlier tile
    reached (computed here from the two steps' m), and ``before`` is the view of the step before."""
    q, k, v = inputs(t_q, t_k, seed=3)
    allowed = ah.causal_mask(t_q, t_k) if causal else torch.ones(t_q, t_k, dtype=torch.bool)
    n = ah.flash.tile_counts(t_q, t_k, block_q, block_k, causal)["computed"]
    views = [tile_walk_view(q, k, v, block_q, block_k, step, causal) for step in range(n + 1)]
    assert views[0]["scores"] is None and views[0]["before"] is None and views[0]["factor"] == [None] * t_q
    for step in range(1, n + 1):
        view, previous = views[step], views[step - 1]
        tile = view["tile"]
        s = (q[tile.rows] @ k[tile.cols].T / math.sqrt(q.shape[1])).masked_fill(~allowed[tile.rows, tile.cols],
                                                                               -math.inf)
        assert torch.allclose(torch.tensor(view["scores"], dtype=torch.float64), s, rtol=0, atol=1e-12)
        assert view["before"] == {name: previous[name] for name in ("reached", "m", "l", "output")}
        for i in range(t_q):
            if tile.rows.start <= i < tile.rows.stop and previous["reached"][i]:
                assert view["factor"][i] == pytest.approx(math.exp(previous["m"][i] - view["m"][i]), rel=1e-12)
                assert (view["factor"][i] < 1) == (view["m"][i] > previous["m"][i])  # below 1 where m rises
            else:
                assert view["factor"][i] is None, (step, i)


def test_flash_forward_tells_its_counter_the_state_after_each_tile():
    """``Traffic.state`` gets every tile of the walk, in order, with the m, ℓ and accumulator that the next tile of
    its row starts from (``hold``), and a row's last state gives flash_forward's output and L."""
    q, k, v = inputs(7, 9, seed=4)
    recorder = Recorder()
    states = []
    recorder.state = lambda tile, s, alpha, m, l, acc: states.append((tile, s, alpha, m, l, acc))  # noqa: E741
    o, L = ah.flash.flash_forward(q, k, v, causal=True, block_q=3, block_k=2, traffic=recorder)
    walk = list(ah.flash.tiles(7, 9, 3, 2, causal=True))
    assert [state[0] for state in states] == walk
    for n, (tile, s, alpha, m, ell, acc) in enumerate(states):
        assert s.shape == (tile.rows.stop - tile.rows.start, tile.cols.stop - tile.cols.start)
        assert alpha.shape == m.shape == ell.shape == (s.shape[0], 1) and acc.shape == (s.shape[0], 3)
        if n + 1 < len(walk) and walk[n + 1].rows == tile.rows:  # the next tile of the row starts from it
            m_next, l_next, acc_next = recorder.held[n + 1]
            assert torch.equal(m, m_next) and torch.equal(ell, l_next) and torch.equal(acc, acc_next)
        else:  # the row's last tile: its output and L
            assert torch.equal(acc / ell, o[tile.rows]) and torch.equal(m + ell.log(), L[tile.rows])


def test_the_explorer_computes_no_softmax_of_its_own():
    """The walk is replayed from flash_forward's record: the explorer's module takes no maximum and no exp."""
    import ast
    import inspect

    from attn_helpers.explorers import _tile_figure, _tiles

    arithmetic = {"exp", "amax", "maximum", "logsumexp", "softmax", "finite_or_zero"}
    for module in (_tiles, _tile_figure):
        called = {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                  for node in ast.walk(ast.parse(inspect.getsource(module))) if isinstance(node, ast.Call)}
        assert not called & arithmetic, (module.__name__, called & arithmetic)


def test_the_explorer_holds_the_ghosts_the_factors_and_the_scores():
    q, k, v = inputs(8, 8)
    data = tile_walk_explorer(q, k, v, 2, 2, causal=True).spec()["datasets"]
    rows = next(rows for rows in data.values() if rows and "m0" in rows[0])
    outs = next(rows for rows in data.values() if rows and "o0" in rows[0])
    scores = next(rows for rows in data.values() if rows and set(rows[0]) == {"step", "i", "j", "s"})
    captions = next(rows for rows in data.values() if rows and "factors" in rows[0])
    for step in range(11):
        view = tile_walk_view(q, k, v, 2, 2, step, causal=True)
        again = [i for i, a in enumerate(view["factor"]) if a is not None]
        shown = {row["query"]: row for row in rows if row["step"] == step and row["m0"] is not None}
        assert sorted(shown) == again
        assert all(row["l0"] is None for row in rows if row["step"] == step and row["query"] not in again)
        for i in again:
            assert (shown[i]["m0"], shown[i]["l0"]) == pytest.approx(
                (view["before"]["m"][i], view["before"]["l"][i]), rel=1e-7)
            assert [o["o0"] for o in outs if o["step"] == step and o["query"] == i] == pytest.approx(
                view["before"]["output"][i], rel=1e-7, abs=1e-12)
        caption = next(row for row in captions if row["step"] == step)
        assert numbers_in(caption["factors_label"]) == pytest.approx([x for i in again
                                                                      for x in (i, view["factor"][i])], rel=1e-7)
        cells = [row for row in scores if row["step"] == step]
        if step:
            tile = view["tile"]
            assert {(row["i"], row["j"]) for row in cells} == {(i, j) for i in range(tile.rows.start, tile.rows.stop)
                                                               for j in range(tile.cols.start, tile.cols.stop)}
            for row in cells:
                expected = view["scores"][row["i"] - tile.rows.start][row["j"] - tile.cols.start]
                assert row["s"] is None if math.isinf(expected) else row["s"] == pytest.approx(expected, rel=1e-7)
        else:
            assert not cells and caption["factors"] == ""


def numbers_in(label: str) -> list[float]:
    import re

    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", label.partition(":")[2])]


def test_plot_tile_walk_draws_one_row_a_step_and_checks_its_steps():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q, k, v = inputs(8, 8)
    fig = ah.explorers.plot_tile_walk(q, k, v, 2, 2, [4, 5, 6], causal=True)
    assert len(fig.axes) == 6
    titles = [ax.get_title() for ax in fig.axes[::2]]
    assert titles == ["tile 4 of 10: queries 4–5,\nkeys 0–1", "tile 5 of 10: queries 4–5,\nkeys 2–3",
                      "tile 6 of 10: queries 4–5,\nkeys 4–5"]
    factors = [t.get_text() for t in fig.axes[5].texts]  # tile 6: query 4 (m unchanged) and query 5
    view = tile_walk_view(q, k, v, 2, 2, 6, causal=True)
    assert factors == [f"×{view['factor'][4]:.2f}", f"×{view['factor'][5]:.2f}"] and factors[0] == "×1.00"
    # drawn for a phone's column: no text smaller than SMALLEST points in a figure WIDTH inches wide (the browser
    # test measures it on the page)
    from matplotlib.text import Text

    from attn_helpers.explorers._tile_figure import SMALLEST, WIDTH
    assert fig.get_size_inches()[0] == WIDTH
    assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()) >= SMALLEST
    plt.close(fig)
    with raises_saying(ValueError, "step " + POSITIVE_INTEGER):
        ah.explorers.plot_tile_walk(q, k, v, 2, 2, [0], causal=True)
    with pytest.raises(ValueError, match="steps must name at least one step"):
        ah.explorers.plot_tile_walk(q, k, v, 2, 2, [], causal=True)
