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
    states = next(rows for rows in data.values() if rows and set(rows[0]) == {"step", "query", "m", "l", "i"})
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
