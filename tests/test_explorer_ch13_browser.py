"""Chapter 13's heads explorer on the built website: menus for the layer and the head, a slider for the query, moved
by mouse (a menu's pick, a drag) and from the keyboard; at every setting tried, each cell of the heatmap, each bar and
the line above the bars show the weights ``attn_helpers.explorers.lm_heads_view`` computes.

The passage is the chapter's (the first 24 characters of ``lm_heads.held_out(corpus)``), made again here. The weights
are not: the chapter's model is trained on the machine that executed it, and 600 steps carry a CPU's last bit into
the third decimal of some weights, so a model trained again here, on another CPU, need not be the page's. The test
therefore gives ``lm_heads_view`` the weights the page holds, placed in one ``(1, h, t, t)`` tensor per layer (zeros
above the diagonal, where the causal mask leaves them), and checks that the browser shows, at each setting, the
cells, the bars and the heaviest key Python picks from them. Both sides are the page's two-decimal numbers, and the
labels print two decimals, so they are compared exactly.
"""

from __future__ import annotations

import re

import torch
from explorer_browser import assert_fits_a_phone, choose, labels, move, open_explorers, press, slide_to, spec_of

from attn_helpers import lm_heads, text
from attn_helpers.explorers import lm_heads_view

PAGE = "chapters/13_small_language_model.html"
T, LAYERS, HEADS = 24, 2, 4  # the chapter's explorer: the first 24 characters of its passage, 2 layers of 4 heads
SHOWN = {" ": "\u2423", "\n": "\u21b5"}  # the chapter's labels: a space as ␣, a line break as ↵
CELL = re.compile(r"^layer (\d), head (\d), query (\d+) \((.*)\), key (\d+) \((.*)\): weight (\d\.\d{2})$")
BAR = re.compile(r"^query (\d+), key (\d+) \((.*)\): weight (\d\.\d{2})$")
TOP = re.compile(r"^layer (\d), head (\d), query (\d+): most weight on key (\d+), weight (\d\.\d{2})$")


def chapter_chars() -> list[str]:
    """The labels of the chapter's passage: the first 24 characters of its first held-out window."""
    corpus = text.load_shakespeare()
    return [SHOWN.get(c, c) for c in corpus.decode(lm_heads.held_out(corpus)[0, :T])]


CHARS = chapter_chars()


def page_weights(explorer) -> list[torch.Tensor]:
    """The weights the page holds, one (1, h, t, t) tensor per layer, zeros where a query cannot see the key."""
    spec = spec_of(explorer)
    assert {p["name"]: p.get("value") for p in spec["params"]}["chars"] == CHARS  # the chapter's passage
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == LAYERS * HEADS * T * (T + 1) // 2  # every head's lower triangle, nothing above it
    weights = [torch.zeros(1, HEADS, T, T, dtype=torch.float64) for _ in range(LAYERS)]
    for r in rows:
        assert 0 <= r["k"] <= r["q"] < T, r
        weights[r["layer"] - 1][0, r["head"], r["q"], r["k"]] = r["w"]
    return weights


def assert_matches_python(explorer, weights: list[torch.Tensor], layer: int, head: int, query: int) -> None:
    setting = f"layer {layer}, head {head}, query {query}"
    expected = lm_heads_view(weights, layer, head, query)
    shown = labels(explorer)
    cells = [m for m in map(CELL.match, shown) if m]
    assert len(cells) == T * (T + 1) // 2, setting  # the lower triangle: what the causal mask lets a query see
    for m in cells:
        la, hd, q, q_char, k, k_char, w = m.groups()
        q, k = int(q), int(k)
        assert (int(la), int(hd)) == (layer, head) and (q_char, k_char) == (CHARS[q], CHARS[k]), m[0]
        assert float(w) == expected["weights"][q][k], m[0]
    bars = [m for m in map(BAR.match, shown) if m]
    assert [int(m[2]) for m in bars] == list(range(query + 1)), setting
    for m in bars:
        assert int(m[1]) == query and float(m[4]) == expected["row"][int(m[2])], m[0]
    tops = [m for m in map(TOP.match, shown) if m]
    assert len(tops) == 1 and int(tops[0][4]) == expected["top_key"], setting
    assert float(tops[0][5]) == expected["top_weight"], setting


def test_the_explorer_holds_rows_of_weights(site_tab):
    weights = page_weights(open_explorers(site_tab, PAGE).first)
    rounding = 0.005 * torch.arange(1, T + 1, dtype=torch.float64) + 1e-12  # query i: i + 1 weights, each ± 0.005
    for w in weights:
        assert ((w.sum(dim=-1) - 1).abs() <= rounding).all()  # each query's row: a softmax, rounded to two decimals
        assert (w >= 0).all() and (w <= 1).all()


def test_the_explorer_shows_what_python_computes_by_mouse_and_keyboard(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    weights = page_weights(explorer)
    assert_matches_python(explorer, weights, 1, 0, T - 1)  # where it starts
    move(explorer, choose, "layer", "2")  # a click on the menu
    assert_matches_python(explorer, weights, 2, 0, T - 1)
    move(explorer, choose, "head", "2")
    assert_matches_python(explorer, weights, 2, 2, T - 1)
    move(explorer, slide_to, "query", 10)  # a drag
    assert_matches_python(explorer, weights, 2, 2, 10)
    move(explorer, press, "query", "ArrowLeft", 3)  # the keyboard
    assert_matches_python(explorer, weights, 2, 2, 7)
    move(explorer, press, "query", "Home")
    assert_matches_python(explorer, weights, 2, 2, 0)
    move(explorer, press, "head", "ArrowDown")  # a menu moved from the keyboard
    assert_matches_python(explorer, weights, 2, 3, 0)


def test_the_explorer_fits_a_phone_screen(site_tab):
    assert_fits_a_phone(open_explorers(site_tab, PAGE).first)
