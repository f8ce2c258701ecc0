"""Chapter 5's heads explorer on the built website: four panels side by side (small multiples), under a slider moved
from the keyboard and by a drag; at every sequence tried, each of the 4 × 64 cells shows the weight, and the lines
above each panel the mean weights one and two back, that ``attn_helpers.explorers.heads_view`` computes from the
chapter's models. A query picked by a click on a head's row, or from the menus "head" and "query row", opens its
row's arithmetic (score, masked score, exp(s − max), weight, and the max and Σ), which matches ``heads_view``'s
``row`` to 1e-6.

The models are trained again here as the chapter trains them (cells "Heads that specialise"). The numbers are
compared exactly, with no tolerance: the explorer keeps each number at two decimals (``_heads.DECIMALS``), the view
function rounds to the same two, and a label prints that two-decimal number with eight, so both parse to the same
float. A tolerance would only hide a wrong cell, since two different shown values are at least 0.01 apart.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from explorer_browser import (
    assert_fits_a_phone,
    choose,
    control,
    labels,
    move,
    open_explorers,
    press,
    signed,
    slide_to,
    spec_of,
    value_of,
)

from attn_helpers.explorers import heads_view
from attn_helpers.explorers._heads import HEADS, PANELS, SCORE_DECIMALS
from attn_helpers.heads_task import TwoBackModel, train_two_back, two_back_batch
from attn_helpers.training import token_labels

PAGE = "chapters/05_multi_head.html"
SEQUENCES = 4  # the chapter's explorer holds the first four held-out sequences
CELL = re.compile(r"(.+?): query (\d) \((\d:[A-Z])\), key (\d) \((\d:[A-Z])\): weight (\d\.\d{8})$")


def head_scores(mha, x: torch.Tensor) -> torch.Tensor:
    """Each head's scores q·k/√d_k before the softmax, (b, h, t, t), as the chapter's cell computes them."""
    b, t, _ = x.shape
    h, d_k = mha.num_heads, mha.d_k
    q = mha.W_q(x).view(b, t, h, d_k).transpose(1, 2)  # (b, h, t, d_k)
    k = mha.W_k(x).view(b, t, h, d_k).transpose(1, 2)  # (b, h, t, d_k)
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (b, h, t, t)


def chapter_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[list[str]]]:
    """The chapter's w_one (4, 1, 8, 8) and w_two (4, 2, 8, 8) on its first four held-out sequences, their scores
    s_one and s_two, and their token labels: the two models trained as the chapter trains them."""
    weights, scores = [], []
    x_test, tokens_test, _ = two_back_batch(200, generator=torch.Generator().manual_seed(5))
    for num_heads in (1, 2):
        torch.manual_seed(0)
        model = TwoBackModel(num_heads=num_heads)
        train_two_back(model, steps=200, seed=0)
        with torch.no_grad():
            weights.append(model(x_test[:SEQUENCES])[1])
            scores.append(head_scores(model.attn, x_test[:SEQUENCES]))
    return weights[0], weights[1], scores[0], scores[1], [token_labels(row) for row in tokens_test[:SEQUENCES]]


W_ONE, W_TWO, S_ONE, S_TWO, TOKENS = chapter_weights()
ROW = re.compile(r"(.+?), query (\d) \((\d:[A-Z])\), key (\d) \((\d:[A-Z])\): score (-?\d+\.\d{8}), "
                 r"masked score (-?\d+\.\d{8}), exp\(s - max\) (\d+\.\d{8}), weight (\d\.\d{8})$")
SUMS = re.compile(r"(.+?), query (\d) \((\d:[A-Z])\): max (-?\d+\.\d{8}), sum (\d+\.\d{8})$")


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
    assert_row_matches_python(shown, sequence)
    assert len(shown) == 4 * 64 + 4 + 8 + 1  # the cells, the summaries, the picked row's keys and its max and sum


def picked(explorer) -> tuple[int, int]:
    """The head (0: the one-head model's; 1 and 2: the two-head model's) and the query the two menus show."""
    return int(control(explorer, "head").input_value()), int(control(explorer, "query row").input_value())


def assert_row_matches_python(shown: list[str], sequence: int) -> tuple[int, int]:
    """The panel of the picked head's query row, key by key (score, masked score, exp(s − max), weight) and its max
    and sum, against ``heads_view``'s ``row``, each number to 1e-6; returns the head and the query it shows."""
    rows = [found for found in map(ROW.match, map(signed, shown)) if found]
    (sums,) = [found for found in map(SUMS.match, map(signed, shown)) if found]
    panel, q = sums[1], int(sums[2])
    assert panel in HEADS and sums[3] == TOKENS[sequence][q], sums[0]
    row = heads_view(W_ONE, W_TWO, panel, sequence, s_one=S_ONE, s_two=S_TWO, query=q)["row"]
    assert [(r[1], int(r[2]), r[3]) for r in rows] == [(panel, q, TOKENS[sequence][q])] * 8
    assert [(int(r[4]), r[5]) for r in rows] == list(enumerate(TOKENS[sequence]))
    for r in rows:
        k = int(r[4])
        assert float(r[6]) == pytest.approx(row["scores"][k], abs=1e-6), r[0]
        assert float(r[7]) == pytest.approx(row["masked"][k], abs=1e-6), r[0]
        assert float(r[8]) == pytest.approx(row["exp"][k], abs=1e-6), r[0]
        assert float(r[9]) == pytest.approx(row["weights"][k], abs=1e-6), r[0]
    assert float(sums[4]) == pytest.approx(row["max"], abs=1e-6) and float(sums[5]) == pytest.approx(row["sum"],
                                                                                                       abs=1e-6)
    return HEADS.index(panel), q


def test_picking_a_query_opens_its_rows_arithmetic(site_tab):
    """A click on a head's row, or the menus "head" and "query row" from the keyboard, opens that query's row."""
    explorer = open_explorers(site_tab, PAGE).first
    assert picked(explorer) == (1, 2)
    assert assert_row_matches_python(labels(explorer), 0) == (1, 2)
    cell = explorer.locator("svg [aria-label^='2 heads: head 1: query 5 '][aria-label*=', key 3 ']")
    move(explorer, lambda e: cell.click())  # a click on a cell of head 1's row 5
    assert picked(explorer) == (2, 5)
    assert assert_row_matches_python(labels(explorer), 0) == (2, 5)
    assert_matches_python(explorer, 0)
    move(explorer, lambda e: e.locator("svg [aria-label^='1 head: query 7 ']").first.click())
    assert picked(explorer) == (0, 7) and assert_row_matches_python(labels(explorer), 0) == (0, 7)
    move(explorer, press, "query row", "ArrowUp", 3)  # from the keyboard
    assert picked(explorer) == (0, 4) and assert_row_matches_python(labels(explorer), 0) == (0, 4)
    move(explorer, press, "head", "ArrowDown")
    assert picked(explorer) == (1, 4) and assert_row_matches_python(labels(explorer), 0) == (1, 4)
    move(explorer, press, "held-out sequence", "End")  # the pick stays; the row is sequence 3's
    assert_matches_python(explorer, 3)
    assert picked(explorer) == (1, 4) and assert_row_matches_python(labels(explorer), 3) == (1, 4)
    move(explorer, choose, "head", "2")  # a click on the menu
    assert picked(explorer) == (2, 4) and assert_row_matches_python(labels(explorer), 3) == (2, 4)


def test_the_explorer_holds_the_chapters_weights(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    spec = spec_of(explorer)
    cells, backs = sorted(spec["datasets"].values(), key=len, reverse=True)
    scores = torch.cat([S_ONE, S_TWO], dim=1).double()  # (4, 3, 8, 8)
    for s in range(SEQUENCES):
        views = [heads_view(W_ONE, W_TWO, panel, s) for panel in PANELS]
        assert [r["by_panel"] for r in cells if r["seq"] == s] == [
            [v["weights"][i][j] for v in views] for i in range(8) for j in range(8)]
        assert [r["scores"] for r in cells if r["seq"] == s] == [
            [round(x, SCORE_DECIMALS) for x in scores[s, :, i, j].tolist()] for i in range(8) for j in range(8)]
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
