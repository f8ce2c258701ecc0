"""Chapter 13's heads explorer on the built website: menus for the layer and the head, a slider for the query, moved
by mouse (a menu's pick, a drag) and from the keyboard; at every setting tried, each cell of the heatmap, each bar and
the line above the bars show the weights ``attn_helpers.explorers.lm_heads_view`` computes from the chapter's model.

The model is trained again here as the chapter trains it (``language_model.train_lm(corpus, seed=0)``). The explorer
keeps each weight at two decimals (``_lm_heads.DECIMALS``) and the view rounds to the same two, so a label's number,
printed with eight, equals the view's within 1e-6 (a tolerance that only absorbs the printing; two different shown
values are at least 0.01 apart).
"""

from __future__ import annotations

import re

import torch
from explorer_browser import assert_fits_a_phone, choose, labels, move, open_explorers, press, slide_to, spec_of

from attn_helpers import language_model, lm_heads, text
from attn_helpers.explorers import lm_heads_view

PAGE = "chapters/13_small_language_model.html"
T = 24  # the chapter's explorer holds the first 24 characters of its passage
CELL = re.compile(r"^layer (\d), head (\d), query (\d+) \((.*)\), key (\d+) \((.*)\): weight (\d\.\d{8})$")
BAR = re.compile(r"^query (\d+), key (\d+) \((.*)\): weight (\d\.\d{8})$")
TOP = re.compile(r"^layer (\d), head (\d), query (\d+): most weight on key (\d+), weight (\d\.\d{8})$")


def chapter_weights() -> tuple[list[torch.Tensor], list[str]]:
    """The chapter's weights on its passage (the first 24 characters of its first held-out window) and labels."""
    corpus = text.load_shakespeare()
    model = language_model.train_lm(corpus, seed=0).model
    passage = lm_heads.held_out(corpus)[:1, :T]
    return model.attention_weights(passage), [repr(c)[1:-1] or " " for c in corpus.decode(passage[0])]


WEIGHTS, CHARS = chapter_weights()


def assert_matches_python(explorer, layer: int, head: int, query: int) -> None:
    setting = f"layer {layer}, head {head}, query {query}"
    expected = lm_heads_view(WEIGHTS, layer, head, query)
    shown = labels(explorer)
    cells = [m for m in map(CELL.match, shown) if m]
    assert len(cells) == T * (T + 1) // 2, setting  # the lower triangle: what the causal mask lets a query see
    for m in cells:
        la, hd, q, q_char, k, k_char, w = m.groups()
        q, k = int(q), int(k)
        assert (int(la), int(hd)) == (layer, head) and (q_char, k_char) == (CHARS[q], CHARS[k]), m[0]
        assert abs(float(w) - expected["weights"][q][k]) <= 1e-6, m[0]
    bars = [m for m in map(BAR.match, shown) if m]
    assert [int(m[2]) for m in bars] == list(range(query + 1)), setting
    for m in bars:
        assert int(m[1]) == query and abs(float(m[4]) - expected["row"][int(m[2])]) <= 1e-6, m[0]
    tops = [m for m in map(TOP.match, shown) if m]
    assert len(tops) == 1 and int(tops[0][4]) == expected["top_key"], setting
    assert abs(float(tops[0][5]) - expected["top_weight"]) <= 1e-6, setting


def test_the_explorer_holds_the_chapters_weights(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    spec = spec_of(explorer)
    rows = next(iter(spec["datasets"].values()))
    for layer in (1, 2):
        for head in range(4):
            view = lm_heads_view(WEIGHTS, layer, head, 0)
            mine = [r for r in rows if r["layer"] == layer and r["head"] == head]
            assert [r["w"] for r in mine] == [view["weights"][r["q"]][r["k"]] for r in mine]
            assert len(mine) == T * (T + 1) // 2
    assert {p["name"]: p.get("value") for p in spec["params"]}["chars"] == CHARS


def test_the_explorer_shows_what_python_computes_by_mouse_and_keyboard(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_matches_python(explorer, 1, 0, T - 1)  # where it starts
    move(explorer, choose, "layer", "2")  # a click on the menu
    assert_matches_python(explorer, 2, 0, T - 1)
    move(explorer, choose, "head", "2")
    assert_matches_python(explorer, 2, 2, T - 1)
    move(explorer, slide_to, "query", 10)  # a drag
    assert_matches_python(explorer, 2, 2, 10)
    move(explorer, press, "query", "ArrowLeft", 3)  # the keyboard
    assert_matches_python(explorer, 2, 2, 7)
    move(explorer, press, "query", "Home")
    assert_matches_python(explorer, 2, 2, 0)
    move(explorer, press, "head", "ArrowDown")  # a menu moved from the keyboard
    assert_matches_python(explorer, 2, 3, 0)


def test_the_explorer_fits_a_phone_screen(site_tab):
    assert_fits_a_phone(open_explorers(site_tab, PAGE).first)
