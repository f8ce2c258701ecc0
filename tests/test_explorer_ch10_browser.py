"""Chapter 10's tile-walk explorer on the built website: stepped from the keyboard and by a drag, the tile it
highlights, its scores, each query's m, ℓ and output, the ghost marks of the step before and the rescaling factor
equal ``attn_helpers.explorers.tile_walk_view`` to 1e-6 at every step tried, the first and the last included; a
picked query's panels follow it over every step; blocked scores stay pale, and visible, on the dark pages."""

from __future__ import annotations

import re

import pytest
import torch
from built_site import SITE
from explorer_browser import (
    PHONE,
    TIMEOUT_MS,
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
GHOST = re.compile(r"^(m|ℓ|output (\d)) of query (\d+) before this tile: (\S+)$")
SCORE = re.compile(r"^score of query (\d+), key (\d+): (\S+)$")


def shown(explorer_labels: list[str]) -> dict:
    """What the chart shows: the step of its caption, the tile marked current, and per query m, ℓ, output, exact."""
    seen = {"m": {}, "l": {}, "output": {}, "exact": {}, "current": None, "gap": None, "factor": None,
            "ghost": {"m": {}, "l": {}, "output": {}}, "scores": {}}
    for label in map(signed, explorer_labels):
        if match := GHOST.match(label):
            name, out, query, value = match.groups()
            key, where = ("output", (int(query), int(out) - 1)) if out else ({"m": "m", "ℓ": "l"}[name], int(query))
            seen["ghost"][key][where] = float(value)
        elif match := SCORE.match(label):
            seen["scores"][int(match[1]), int(match[2])] = None if match[3] == "blocked" else float(match[3])
        elif label.startswith("rescaling factor exp(m_old - m_new): "):
            pairs = label.removeprefix("rescaling factor exp(m_old - m_new): ").split(", ")
            seen["factor"] = {int(q): float(a) for q, a in (pair.removeprefix("query ").split(" ") for pair in pairs)}
        elif label == "its queries' first tile: nothing to rescale":
            seen["factor"] = {}
        elif match := STATE.match(label):
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
    again = [i for i, a in enumerate(view["factor"]) if a is not None]  # the tile's queries an earlier tile reached
    if tile is None:
        assert seen["factor"] is None and not seen["scores"]
        assert not any(seen["ghost"].values())
        return
    assert sorted(seen["factor"]) == again, f"the factors shown after {step} tiles"
    assert [seen["factor"][i] for i in again] == pytest.approx([view["factor"][i] for i in again], abs=1e-6)
    before = view["before"]
    assert sorted(seen["ghost"]["m"]) == sorted(seen["ghost"]["l"]) == again
    assert [seen["ghost"]["m"][i] for i in again] == pytest.approx([before["m"][i] for i in again], abs=1e-6)
    assert [seen["ghost"]["l"][i] for i in again] == pytest.approx([before["l"][i] for i in again], abs=1e-6)
    assert sorted(seen["ghost"]["output"]) == [(i, d) for i in again for d in range(2)]
    assert [seen["ghost"]["output"][i, d] for i in again for d in range(2)] == pytest.approx(
        [before["output"][i][d] for i in again for d in range(2)], abs=1e-6)
    cells = {(tile.rows.start + a, tile.cols.start + b): x for a, row in enumerate(view["scores"])
             for b, x in enumerate(row)}
    assert sorted(seen["scores"]) == sorted(cells), f"the scores written after {step} tiles"
    for where, x in cells.items():
        assert seen["scores"][where] == (None if x == -float("inf") else pytest.approx(x, abs=1e-6)), where


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
    for step in (5, 6, 8, TILES, 7):  # 6: a factor of about 0.3, after which ℓ falls
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
    blocked = explorer.locator("svg [aria-label^='tile '][aria-label*=', queries 0–1, keys 0–1, ']").first
    box = blocked.bounding_box()
    before = labels(explorer)
    explorer.page.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + box["height"] * 0.25)  # key 1: blocked
    labels_after(explorer, before)
    assert_picked_matches_python(explorer, 0)  # a pale score picks its query too
    before = labels(explorer)
    press(explorer, "query", "ArrowDown", 3)
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


def veils(explorer) -> list[list[str]]:
    """The fill and opacity of the veils that make the blocked scores pale (the rects of style ``pale``)."""
    return explorer.locator("svg g.tile_veil_marks path").evaluate_all(
        "ps => ps.map(p => [getComputedStyle(p).fill, p.getAttribute('opacity') || getComputedStyle(p).opacity])")


def test_blocked_scores_are_pale_on_light_pages_and_visible_on_dark_ones(site_tab):
    """A veil lies over each of the 28 blocked scores: white on a light page, the page's own colour, and thinner,
    on a dark one, where a white veil would leave them a bright slab and a thick dark one would hide them."""
    page = site_tab[0]
    explorer = open_explorers(site_tab, PAGE).first
    blocked = 8 * 7 // 2
    assert veils(explorer) == [["rgb(255, 255, 255)", "0.7"]] * blocked
    before = labels(explorer)
    try:
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        page.wait_for_function("() => document.querySelector('.book-explorer').dataset.theme === 'dark'"
                               " && document.querySelector('.book-explorer').dataset.ready", timeout=TIMEOUT_MS)
        assert veils(explorer) == [["rgb(20, 24, 30)", "0.45"]] * blocked
        assert labels(explorer) == before  # the same numbers, drawn again
    finally:
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")


# The figure under the explorer, as the chapter draws it (cell "ch10-walk-figure": the tiles of queries 4-5).
FIGURE_STEPS = [4, 5, 6]
LEGIBLE_PX = 9


def test_the_tile_walk_figure_has_legible_text_on_a_phone(site_tab):
    """Figure 10.1 (``plot_tile_walk``) shown in a 390-px phone's column: its smallest text is at least 9 px high.
    The PNG is the figure drawn at ``dpi`` pixels an inch (its pHYs chunk says which); shown at ``shown`` of its
    ``natural`` pixels, a text of ``size`` points is ``size / 72 * dpi * shown / natural`` px high. (It was 7 px when
    the figure put its two panels a row into 6.4 inches.)"""
    import io
    from urllib.parse import urlsplit

    import matplotlib
    from matplotlib.text import Text
    from PIL import Image

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    page, base, _ = site_tab
    assert page.viewport_size == PHONE
    page.goto(base + PAGE)
    image = page.locator("#fig-ch10-walk img")
    image.scroll_into_view_if_needed()
    page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=image.element_handle(), timeout=TIMEOUT_MS)
    seen = image.evaluate("i => ({shown: i.getBoundingClientRect().width, natural: i.naturalWidth,"
                          " height: i.naturalHeight, src: i.src})")
    with Image.open(SITE / urlsplit(seen["src"]).path.lstrip("/")) as png:
        dpi = png.info["dpi"][0]
    fig = ah.explorers.plot_tile_walk(Q, K, V, 2, 2, FIGURE_STEPS, causal=True)
    smallest = min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())
    drawn = io.BytesIO()
    fig.savefig(drawn, dpi=dpi, bbox_inches="tight")  # as the chapter's inline backend saves it
    plt.close(fig)
    with Image.open(drawn) as again:  # the page shows this figure: the same size in pixels
        assert abs(again.size[0] - seen["natural"]) <= 2 and abs(again.size[1] - seen["height"]) <= 2, \
            (again.size, seen)
    px = smallest / 72 * dpi * seen["shown"] / seen["natural"]
    assert px >= LEGIBLE_PX, f"the figure's smallest text ({smallest} pt) is {px:.1f} px high on a phone"
