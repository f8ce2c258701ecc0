"""Chapter 10's tile-walk explorer on the built website: stepped from the keyboard and by a drag, the tile it
highlights and each query's m, ℓ and output equal ``attn_helpers.explorers.tile_walk_view`` to 1e-6 at every step
tried, the first and the last included."""

from __future__ import annotations

import re

import pytest
import torch
from explorer_browser import (
    assert_fits_a_phone,
    control,
    labels,
    labels_after,
    numbers,
    open_explorers,
    press,
    signed,
    slide_to,
    value_of,
)

import attn_helpers as ah

PAGE = "chapters/10_flash_attention.html"
walk = torch.Generator().manual_seed(10)  # the chapter's cell: q, k, v of 8 tokens, d = 2, tiles of 2 x 2, causal
Q, K, V = (torch.randn(8, 2, generator=walk, dtype=torch.float64) for _ in range(3))
TILES = 10
STATE = re.compile(r"^(m|ℓ|output (\d)|exact output (\d)) of query (\d+): (\S+)$")


def shown(explorer_labels: list[str]) -> dict:
    """What the chart shows: the step of its caption, the tile marked current, and per query m, ℓ, output, exact."""
    seen = {"m": {}, "l": {}, "output": {}, "exact": {}, "current": None, "gap": None}
    for label in map(signed, explorer_labels):
        if match := STATE.match(label):
            name, out, ex, query, value = match.groups()
            key = "exact" if ex else "output" if out else {"m": "m", "ℓ": "l"}[name]
            where = (int(query), int(ex or out) - 1) if (ex or out) else int(query)
            seen[key][where] = float(value)
        elif match := re.match(r"^after (\d+) of (\d+) tiles: ", label):
            seen["step"], seen["tiles"] = int(match[1]), int(match[2])
        elif match := re.match(r"^tile (\d+) of \d+, queries (\d+)–(\d+), keys (\d+)–(\d+), \w+: current$", label):
            seen["current"] = tuple(int(x) for x in match.groups())
        elif label.startswith("largest gap"):
            (seen["gap"],) = numbers(label)
    return seen


def assert_matches_python(explorer, step: int) -> None:
    seen = shown(labels(explorer))
    view = ah.explorers.tile_walk_view(Q, K, V, 2, 2, step, causal=True)
    assert (seen["step"], seen["tiles"]) == (step, view["tiles"]) == (step, TILES)
    tile = view["tile"]
    assert seen["current"] == (None if tile is None else
                               (step, tile.rows.start, tile.rows.stop - 1, tile.cols.start, tile.cols.stop - 1))
    reached = [i for i, r in enumerate(view["reached"]) if r]
    assert sorted(seen["m"]) == sorted(seen["l"]) == reached, f"the queries shown after {step} tiles"
    assert [seen["m"][i] for i in reached] == pytest.approx([view["m"][i] for i in reached], abs=1e-6)
    assert [seen["l"][i] for i in reached] == pytest.approx([view["l"][i] for i in reached], abs=1e-6)
    outputs = [seen["output"][i, d] for i in reached for d in range(2)]
    assert outputs == pytest.approx([view["output"][i][d] for i in reached for d in range(2)], abs=1e-6)
    assert [seen["exact"][i, d] for i in range(8) for d in range(2)] == pytest.approx(
        [x for row in view["exact"] for x in row], abs=1e-6)
    assert seen["gap"] == (None if view["gap"] is None else pytest.approx(view["gap"], abs=1e-6))


def test_the_tile_walk_explorer_shows_what_python_computes(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert value_of(explorer, "tiles computed") == 1
    assert_matches_python(explorer, 1)
    before = labels(explorer)
    press(explorer, "tiles computed", "ArrowRight", times=2)  # from the keyboard: tiles 2 and 3
    labels_after(explorer, before)
    assert value_of(explorer, "tiles computed") == 3
    assert_matches_python(explorer, 3)
    before = labels(explorer)
    press(explorer, "tiles computed", "Home")
    labels_after(explorer, before)
    assert_matches_python(explorer, 0)
    for step in (5, 8, TILES, 7):
        before = labels(explorer)
        slide_to(explorer, "tiles computed", step)
        labels_after(explorer, before)
        assert_matches_python(explorer, step)
    before = labels(explorer)
    slide_to(explorer, "tiles computed", TILES)
    final = shown(labels_after(explorer, before))
    assert final["gap"] == pytest.approx(0, abs=1e-8)  # the last tile: the exact attention, to the eighth decimal
    assert control(explorer, "tiles computed").get_attribute("max") == str(TILES)


PICKED = re.compile(r"^query (\d+) after (\d+) tiles: (?:m (\S+), ℓ (\S+)|output (\d) (\S+))$")


def assert_picked_matches_python(explorer, query: int) -> None:
    """The picked query's panels: its m, ℓ and output after every step that reached it, against ``tile_walk_view``."""
    assert int(control(explorer, "query").input_value()) == query
    m, ell, out = {}, {}, {}
    for label in map(signed, labels(explorer)):
        if found := PICKED.match(label):
            q, step, m_, l_, dim, o = found.groups()
            assert int(q) == query, label
            if m_ is not None:
                m[int(step)], ell[int(step)] = float(m_), float(l_)
            else:
                out[int(step), int(dim) - 1] = float(o)
    views = [ah.explorers.tile_walk_view(Q, K, V, 2, 2, step, causal=True) for step in range(TILES + 1)]
    reached = [step for step, view in enumerate(views) if view["reached"][query]]
    assert sorted(m) == sorted(ell) == reached and sorted(out) == [(s, d) for s in reached for d in range(2)]
    for step in reached:
        assert m[step] == pytest.approx(views[step]["m"][query], abs=1e-6), (query, step)
        assert ell[step] == pytest.approx(views[step]["l"][query], abs=1e-6), (query, step)
        for d in range(2):
            assert out[step, d] == pytest.approx(views[step]["output"][query][d], abs=1e-6), (query, step, d)


def test_picking_a_query_shows_its_m_l_and_output_over_every_step(site_tab):
    """A click on a row of the tiles, or the menu "query" from the keyboard, picks the query the panels follow."""
    explorer = open_explorers(site_tab, PAGE).first
    assert_picked_matches_python(explorer, 7)  # the last query: four tiles reach it
    tile = explorer.locator("svg [aria-label^='tile '][aria-label*=', queries 2–3, keys 0–1, ']").first
    tile.scroll_into_view_if_needed()
    box = tile.bounding_box()
    before = labels(explorer)
    explorer.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.75)  # row 3 of that tile
    labels_after(explorer, before)
    assert_picked_matches_python(explorer, 3)
    before = labels(explorer)
    press(explorer, "query", "ArrowUp", 2)
    labels_after(explorer, before)
    assert_picked_matches_python(explorer, 1)
    before = labels(explorer)
    press(explorer, "tiles computed", "End")  # the slider moves the rule, not the picked query's numbers
    labels_after(explorer, before)
    assert_picked_matches_python(explorer, 1)


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
