"""Chapter 5's heads explorer on the built website: four panels side by side (small multiples), under a slider moved
from the keyboard and by a drag; at every sequence tried, each of the 4 × 64 cells shows the weight, and the lines
above each panel the mean weights one and two back, that ``attn_helpers.explorers.heads_view`` computes from the
chapter's models.

The models are trained again here as the chapter trains them (cells "Heads that specialise"). The numbers are
compared exactly, with no tolerance: the explorer keeps each number at two decimals (``_heads.DECIMALS``), the view
function rounds to the same two, and a label prints that two-decimal number with eight, so both parse to the same
float. A tolerance would only hide a wrong cell, since two different shown values are at least 0.01 apart.
"""

from __future__ import annotations

import re

import torch
from explorer_browser import (
    assert_fits_a_phone,
    labels,
    move,
    open_explorers,
    press,
    slide_to,
    spec_of,
    value_of,
)

from attn_helpers.explorers import heads_view
from attn_helpers.explorers._heads import PANELS
from attn_helpers.heads_task import TwoBackModel, train_two_back, two_back_batch
from attn_helpers.training import token_labels

PAGE = "chapters/05_multi_head.html"
SEQUENCES = 4  # the chapter's explorer holds the first four held-out sequences
CELL = re.compile(r"(.+?): query (\d) \((\d:[A-Z])\), key (\d) \((\d:[A-Z])\): weight (\d\.\d{8})$")


def chapter_weights() -> tuple[torch.Tensor, torch.Tensor, list[list[str]]]:
    """The chapter's w_one (4, 1, 8, 8) and w_two (4, 2, 8, 8) on its first four held-out sequences, and their
    token labels: the two models trained as the chapter trains them."""
    weights = []
    x_test, tokens_test, _ = two_back_batch(200, generator=torch.Generator().manual_seed(5))
    for num_heads in (1, 2):
        torch.manual_seed(0)
        model = TwoBackModel(num_heads=num_heads)
        train_two_back(model, steps=200, seed=0)
        with torch.no_grad():
            weights.append(model(x_test[:SEQUENCES])[1])
    return weights[0], weights[1], [token_labels(row) for row in tokens_test[:SEQUENCES]]


W_ONE, W_TWO, TOKENS = chapter_weights()


def assert_matches_python(explorer, sequence: int) -> None:
    """Every panel's cells (shown weight and token labels) and summary, against ``heads_view`` at this sequence."""
    assert value_of(explorer, "held-out sequence") == sequence
    shown = labels(explorer)
    for panel in PANELS:
        setting = f"{panel}, sequence {sequence}"
        expected = heads_view(W_ONE, W_TWO, panel, sequence)
        cells = [found for found in map(CELL.match, shown) if found and found[1] == panel]
        assert len(cells) == 64, setting
        seen = set()
        for found in cells:
            _, q, query, k, key, weight = found.groups()
            q, k = int(q), int(k)
            seen.add((q, k))
            assert (query, key) == (TOKENS[sequence][q], TOKENS[sequence][k]), f"{setting}: {found[0]}"
            assert float(weight) == expected["weights"][q][k], f"{setting}: {found[0]}"
        assert len(seen) == 64, setting
        summary = (f"{panel}, held-out sequence {sequence}: mean weight of queries 2–7 on the previous token "
                   f"{expected['previous']:.8f}, on the token two back {expected['two_back']:.8f}")
        assert summary in shown, summary
    assert len(shown) == 4 * 64 + 4  # nothing else


def test_the_explorer_holds_the_chapters_weights(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    spec = spec_of(explorer)
    cells, backs = sorted(spec["datasets"].values(), key=len, reverse=True)
    for s in range(SEQUENCES):
        views = [heads_view(W_ONE, W_TWO, panel, s) for panel in PANELS]
        assert [r["by_panel"] for r in cells if r["s"] == s] == [
            [v["weights"][i][j] for v in views] for i in range(8) for j in range(8)]
        assert backs[s]["previous"] == [v["previous"] for v in views], s
    assert {p["name"]: p["value"] for p in spec["params"]}["tokens"] == TOKENS


def test_the_heads_explorer_shows_what_python_computes(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_matches_python(explorer, 0)  # the chapter's figure
    move(explorer, press, "held-out sequence", "ArrowRight")
    assert_matches_python(explorer, 1)
    move(explorer, press, "held-out sequence", "End")
    assert_matches_python(explorer, 3)
    move(explorer, slide_to, "held-out sequence", 2)  # as a drag sets it
    assert_matches_python(explorer, 2)
    move(explorer, press, "held-out sequence", "Home")
    assert_matches_python(explorer, 0)


def test_the_two_heads_specialise_in_every_sequence_the_explorer_holds():
    """What the chapter's sentence tells the reader to look for: one head on the previous token, the other on the
    token two back, in each of the four sequences (the chapter asserts it over all 200)."""
    for s in range(SEQUENCES):
        heads = [heads_view(W_ONE, W_TWO, f"2 heads: head {h}", s) for h in (0, 1)]
        previous = max((0, 1), key=lambda h: heads[h]["previous"])  # the previous-token head
        assert heads[previous]["previous"] > 0.8 and heads[1 - previous]["two_back"] > 0.8, s
        assert heads[previous]["two_back"] < 0.2 and heads[1 - previous]["previous"] < 0.2, s


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
