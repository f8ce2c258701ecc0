"""Chapter 7's mask explorer on the built website: its check box and two sliders moved from the keyboard and by a
drag; at every setting tried, each of the 64 cells shows the weight and the mask that
``attn_helpers.explorers.mask_view`` computes (to 1e-6), including settings where a query has no key left."""

from __future__ import annotations

import math
import re

import pytest
import torch
from explorer_browser import (
    assert_fits_a_phone,
    control,
    is_checked,
    labels,
    move,
    open_explorers,
    press,
    signed,
    slide_to,
    spec_of,
    value_of,
)

import attn_helpers as ah
from attn_helpers.explorers import rounded

PAGE = "chapters/07_masks_and_cost.html"
SENTENCE = "We process and ship your order"  # the chapter's second sentence, padded with zero vectors
TOKENS = ah.tokenize(SENTENCE) + ["<pad>"] * 2
CELL = re.compile(r"query (\d) \((.+?)\), key (\d) \((.+?)\): (masked, )?(the query has no key left, )?"
                  r"weight (\d\.\d{8})$")


def chapter_scores() -> torch.Tensor:
    """The chapter's (8, 8) scores: the six words and two padding positions, X2 @ X2.T / sqrt(d) in float64."""
    X2 = torch.cat([ah.GloVe().embed(SENTENCE), torch.zeros(2, 50)]).double()  # (8, 50)
    return X2 @ X2.T / X2.shape[-1] ** 0.5  # (8, 8)


SCORES = chapter_scores()


def axis_words(explorer) -> list[str]:
    """The words the heatmap's two axes show, the keys' then the queries' (Vega draws the x axis first, and the
    heatmap before the picked row's panel, whose column headings follow)."""
    words = explorer.locator("svg .role-axis-label text").evaluate_all("ts => ts.map(t => t.textContent)")
    assert words[2 * len(TOKENS):] == ["key", "score s", "masked", "exp(s−m)", "w = ÷ Σ"]
    return words[:2 * len(TOKENS)]


def assert_matches_python(explorer, causal: bool, length: int, window: int | None) -> None:
    """Every cell's shown weight and mask, the summary line, and the axes' words (a position past the real tokens
    labelled as padding) against ``mask_view`` at this setting."""
    setting = f"causal={causal}, length={length}, window={window}"
    words = [w if j < length or w == "<pad>" else f"{w} (<pad>)" for j, w in enumerate(TOKENS)]
    assert axis_words(explorer) == words + words, setting
    expected = ah.explorers.mask_view(SCORES, causal, length, window)
    shown = labels(explorer)
    cells = [label for label in shown if CELL.match(label)]
    (summary,) = [label for label in shown if label.startswith(("causal, ", "not causal, "))]
    assert_row_matches_python(shown, expected)
    assert len(shown) == 64 + 1 + 8 + 1  # the cells, the summary, the picked row's keys and its max and sum
    assert len(cells) == 64, setting
    seen = set()
    for label in cells:
        found = CELL.match(label)
        assert found, f"{setting}: unexpected cell label {label!r}"
        q, query, k, key, masked, no_key, weight = found.groups()
        q, k = int(q), int(k)
        seen.add((q, k))
        assert (query, key) == (TOKENS[q], TOKENS[k]), label
        assert bool(masked) == (not expected["allowed"][q][k]), f"{setting}: {label}"
        assert bool(no_key) == (q in expected["empty_rows"]), f"{setting}: {label}"
        assert float(weight) == pytest.approx(expected["weights"][q][k], abs=1e-6), f"{setting}: {label}"
    assert len(seen) == 64, setting
    words = "no window" if window is None else f"window {window}"
    assert summary.startswith(f"{'causal' if causal else 'not causal'}, {length} real tokens, {words}; "), summary
    rows = {0: "every query has a key", 1: "1 query has no key left: weights all 0"}
    empties = len(expected["empty_rows"])
    assert summary.endswith(rows.get(empties, f"{empties} queries have no key left: weights all 0")), summary


ROW = re.compile(r"query (\d) \((.+?)\), key (\d) \((.+?)\): score (-?\d+\.\d{8}), masked score (-?\d+\.\d{8}|-inf), "
                 r"exp\(s - max\) (\d+\.\d{8}), weight (\d\.\d{8})$")
SUMS = re.compile(r"query (\d) \((.+?)\): (?:max (-?\d+\.\d{8})|no key left), sum (\d+\.\d{8})$")


def picked(explorer) -> int:
    """The query the menu "query row" shows."""
    return int(control(explorer, "query row").input_value())


def assert_row_matches_python(shown: list[str], expected: dict) -> None:
    """The panel of the picked query's row, key by key (score, masked score, exp(s − max), weight) and its max and
    sum, against ``mask_view``: each number to 1e-6."""
    rows = [found for found in map(ROW.match, map(signed, shown)) if found]
    (sums,) = [found for found in map(SUMS.match, map(signed, shown)) if found]
    q = int(sums[1])
    assert [int(r[1]) for r in rows] == [q] * 8 and [int(r[3]) for r in rows] == list(range(8))
    for r in rows:
        k = int(r[3])
        assert (r[2], r[4]) == (TOKENS[q], TOKENS[k])
        assert float(r[5]) == pytest.approx(SCORES[q, k].item(), abs=1e-6)
        masked = expected["masked"][q][k]
        assert (r[6] == "-inf") if masked == -math.inf else float(r[6]) == pytest.approx(masked, abs=1e-6), r[0]
        assert float(r[7]) == pytest.approx(expected["exp"][q][k], abs=1e-6), r[0]
        assert float(r[8]) == pytest.approx(expected["weights"][q][k], abs=1e-6), r[0]
    assert float(sums[4]) == pytest.approx(expected["sum"][q], abs=1e-6)
    if q in expected["empty_rows"]:
        assert sums[3] is None and expected["max"][q] == -math.inf
    else:
        assert float(sums[3]) == pytest.approx(expected["max"][q], abs=1e-6)


def test_picking_a_query_shows_its_rows_arithmetic(site_tab):
    """A click on a row, or the menu "query row" from the keyboard, opens that query's row key by key."""
    explorer = open_explorers(site_tab, PAGE).first
    assert picked(explorer) == 0
    assert_matches_python(explorer, False, 6, None)
    cell = explorer.locator("svg [aria-label^='query 3 (ship), key 2 (and): weight']")
    move(explorer, lambda e: cell.click())  # a click on any cell of row 3
    assert picked(explorer) == 3 and "query 3 (ship), key 0 (we): score" in " ".join(labels(explorer))
    assert_matches_python(explorer, False, 6, None)
    move(explorer, press, "query row", "ArrowDown", 2)  # from the keyboard
    assert picked(explorer) == 5
    assert_matches_python(explorer, False, 6, None)
    move(explorer, press, "window", "ArrowRight", 2)
    move(explorer, slide_to, "real tokens", 3)
    move(explorer, press, "causal", "Space")
    assert_matches_python(explorer, True, 3, 2)  # query 5 has no key left: max none, every weight 0
    assert 5 in ah.explorers.mask_view(SCORES, True, 3, 2)["empty_rows"]
    move(explorer, lambda e: e.locator("svg [aria-label^='query 1 (process), key 1 (process)']").first.click())
    assert picked(explorer) == 1
    assert_matches_python(explorer, True, 3, 2)


def test_the_explorer_holds_the_chapters_scores(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    (rows,) = spec_of(explorer)["datasets"].values()
    assert [r["s"] for r in rows] == [rounded(x) for x in SCORES.flatten().tolist()]
    assert [r["key"] for r in rows[:8]] == TOKENS


def test_the_mask_explorer_computes_what_python_does(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert not is_checked(explorer, "causal") and value_of(explorer, "real tokens") == 6
    assert value_of(explorer, "window") == 0
    assert_matches_python(explorer, False, 6, None)  # the chapter's padding: the two <pad> keys masked
    move(explorer, press, "causal", "Space")  # the space bar ticks the check box
    assert is_checked(explorer, "causal")
    assert_matches_python(explorer, True, 6, None)
    move(explorer, press, "window", "ArrowRight", 2)
    assert value_of(explorer, "window") == 2
    assert_matches_python(explorer, True, 6, 2)  # the two <pad> queries: keys 5 and 6, 6 and 7
    move(explorer, slide_to, "real tokens", 3)
    assert_matches_python(explorer, True, 3, 2)  # the chapter's suggestion: queries 4 to 7 keep no key
    assert ah.explorers.mask_view(SCORES, True, 3, 2)["empty_rows"] == [4, 5, 6, 7]
    move(explorer, lambda e: control(e, "causal").click())  # a click unticks it
    assert_matches_python(explorer, False, 3, 2)  # the window reaches both ways
    move(explorer, press, "real tokens", "End")
    assert_matches_python(explorer, False, 8, 2)
    for window, length in ((1, 8), (5, 4), (0, 1), (8, 8)):
        move(explorer, slide_to, "window", window)
        if value_of(explorer, "real tokens") != length:
            move(explorer, slide_to, "real tokens", length)
        assert_matches_python(explorer, False, length, window or None)


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
