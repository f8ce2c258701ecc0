"""Chapter 8's induction explorer on the built website: its two sliders (the held-out sequence and the query
position) moved from the keyboard (arrow, Page and Home/End keys) and by a drag, over every query of the first
sequence; at each setting the cells' layer-2 weights, the two arrows and the line above them equal
``attn_helpers.explorers.induction_view``.

The sequences are the chapter's held-out ones (``circuits.induction_batch`` with seeds 21 to 24), made again here. The
weights are not: the chapter's model is trained on the machine that executed it, and training through the heads'
formation amplifies a CPU's last bit until a weight moves by tenths (the cell says so and is not compared by nbval),
so a model trained again here, on another CPU, need not be the page's. The test therefore gives ``induction_view`` the
weights the page holds (layer 2's rows, and layer 1's weight at each arrow), placed in (b, 1, t, t) tensors at the
positions the view should read, with zeros elsewhere, and checks that the browser picks, from the chapter's tokens,
the same copy, the same positions and the same weights as Python. The numbers are compared exactly: both are the
page's two-decimal numbers, printed with eight.
"""

from __future__ import annotations

import re

import torch
from explorer_browser import assert_fits_a_phone, labels, move, open_explorers, press, slide_to, spec_of, value_of

from attn_helpers import circuits
from attn_helpers.explorers import induction_view
from attn_helpers.training import LETTERS

PAGE = "chapters/08_beyond_attention.html"
SEEDS = range(21, 25)  # the chapter's cell: the figure's sequence, then three more
SEQUENCE, QUERY = "held-out sequence", "query position"
CELL = re.compile(r"^position (\d+) \(([A-Z])\), (query, |earlier copy, |after the copy, |)layer 2 weight from the "
                  r"query (\d\.\d{8})$")
ARROW = re.compile(r"^layer ([12]): (?:query|position) (\d+) \(([A-Z])\) to position (\d+) \(([A-Z])\), weight "
                   r"(\d\.\d{8})$")
SUMMARY = re.compile(r"^held-out sequence (\d), query (\d+) \(([A-Z])\): (?:no earlier copy|earlier copy at (\d+), "
                     r"copies ([A-Z]))$")


def chapter_tokens() -> torch.Tensor:
    return torch.cat([circuits.induction_batch(1, generator=torch.Generator().manual_seed(s))[0] for s in SEEDS])


TOKENS = chapter_tokens()  # (4, 20)


def page_weights(explorer) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights the page holds, as (b, 1, t, t) tensors: layer 2's every row, layer 1's at each arrow."""
    params = {p["name"]: p["value"] for p in spec_of(explorer)["params"]}
    assert params["letters"] == [[LETTERS[int(k)] for k in row] for row in TOKENS]  # the chapter's sequences
    b, t = TOKENS.shape
    w2 = torch.tensor(params["layer2"], dtype=torch.float64)[:, None]  # (b, 1, t, t)
    w1 = torch.zeros(b, 1, t, t, dtype=torch.float64)
    for s in range(b):
        for i in range(t):
            copy, after, previous, _ = params["arrows"][s][i]
            if copy >= 0:
                w1[s, 0, after, copy] = previous
    return w1, w2


def assert_matches_python(explorer, w1: torch.Tensor, w2: torch.Tensor) -> dict:
    s, i = int(value_of(explorer, SEQUENCE)), int(value_of(explorer, QUERY))
    expected = induction_view(TOKENS, w1, w2, s, i)
    letters = [LETTERS[int(k)] for k in TOKENS[s]]
    setting = f"sequence {s}, query {i}"
    cells, arrows, summaries = {}, {}, []
    for label in labels(explorer):
        if found := CELL.match(label):
            k = int(found[1])
            assert found[2] == letters[k], f"{setting}: {label}"
            cells[k] = (found[3], float(found[4]))
        elif found := ARROW.match(label):
            arrows[int(found[1])] = (int(found[2]), int(found[4]), float(found[6]))
            assert (found[3], found[5]) == (letters[int(found[2])], letters[int(found[4])]), f"{setting}: {label}"
        elif found := SUMMARY.match(label):
            summaries.append(found)
        else:
            raise AssertionError(f"{setting}: unexpected mark {label!r}")
    assert sorted(cells) == list(range(20)), setting
    assert [w for _, w in (cells[k] for k in range(20))] == expected["layer2"], setting
    roles = {k: role for k, (role, _) in cells.items() if role}
    (summary,) = summaries
    assert (int(summary[1]), int(summary[2]), summary[3]) == (s, i, letters[i]), setting
    if expected["copy"] is None:
        assert arrows == {} and summary[4] is None and roles == {i: "query, "}, setting
    else:
        c, a = expected["copy"], expected["after"]
        assert arrows == {2: (i, a, expected["induction"]), 1: (a, c, expected["previous"])}, setting
        assert (int(summary[4]), summary[5]) == (c, letters[a]), setting
        assert roles == {i: "query, ", c: "earlier copy, ", a: "after the copy, "}, setting
    return expected


def test_the_induction_explorer_shows_what_python_computes(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    w1, w2 = page_weights(explorer)
    assert (value_of(explorer, SEQUENCE), value_of(explorer, QUERY)) == (0, 15)  # the chapter's cell
    assert assert_matches_python(explorer, w1, w2)["copy"] == 6  # K at 15, its earlier copy at 6
    for i in range(20):  # every query of the figure's sequence, as a drag sets it
        move(explorer, slide_to, QUERY, i)  # from 15 to 0, then one position at a time
        assert_matches_python(explorer, w1, w2)
    move(explorer, press, QUERY, "Home")
    assert assert_matches_python(explorer, w1, w2)["copy"] is None  # the first letter has nothing before it
    move(explorer, press, SEQUENCE, "ArrowRight")
    assert value_of(explorer, SEQUENCE) == 1
    assert_matches_python(explorer, w1, w2)
    move(explorer, press, QUERY, "End")
    assert assert_matches_python(explorer, w1, w2)["copy"] is not None  # the last position lies in the repeat
    move(explorer, press, QUERY, "PageDown")
    assert_matches_python(explorer, w1, w2)
    move(explorer, press, QUERY, "ArrowLeft", 3)
    assert_matches_python(explorer, w1, w2)
    move(explorer, press, SEQUENCE, "End")
    assert value_of(explorer, SEQUENCE) == 3
    assert_matches_python(explorer, w1, w2)
    move(explorer, slide_to, SEQUENCE, 2)
    assert_matches_python(explorer, w1, w2)
    move(explorer, press, SEQUENCE, "Home")
    assert value_of(explorer, SEQUENCE) == 0
    assert_matches_python(explorer, w1, w2)


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
