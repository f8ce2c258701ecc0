"""Chapter 1's weighted-average explorer on the built website: its two sliders moved from the keyboard (arrow, Page
and Home/End keys) and by a drag; at each setting the query, each key's score and weight, and the output equal
``attn_helpers.explorers.average_view`` to 1e-6, and the output lies on the values' segment."""

from __future__ import annotations

import re

import pytest
import torch
from explorer_browser import assert_fits_a_phone, labels, move, open_explorers, press, signed, slide_to, value_of

from attn_helpers.explorers import average_view

PAGE = "chapters/01_weighted_average.html"
K = torch.tensor([[2.0, 2.0], [1.0, 1.0]])  # the chapter's K and V (cell "Q = q.unsqueeze(0)")
V = torch.tensor([[3.0, 3.0], [4.0, 4.0]])
NAMES = ["k₁, v₁", "k₂, v₂"]
ANGLE, LENGTH = "query's angle", "query's length"
POINT = re.compile(r"^(query|output) \((-?\d+\.\d{8}), (-?\d+\.\d{8})\)$")
BAR = re.compile(r"^(.+): score (-?\d+\.\d{8}), weight (\d\.\d{8})$")


def assert_matches_python(explorer) -> dict:
    angle, length = value_of(explorer, ANGLE), value_of(explorer, LENGTH)
    expected = average_view(K, V, angle, length)
    seen: dict = {"names": [], "scores": [], "weights": []}
    for label in map(signed, labels(explorer)):
        if found := POINT.match(label):
            seen[found[1]] = [float(found[2]), float(found[3])]
        elif found := BAR.match(label):
            seen["names"].append(found[1])
            seen["scores"].append(float(found[2]))
            seen["weights"].append(float(found[3]))
        else:
            raise AssertionError(f"unexpected mark {label!r}")
    setting = f"angle {angle}, length {length}"
    assert seen["names"] == NAMES
    assert seen["query"] == pytest.approx(expected["query"], abs=1e-6), setting
    assert seen["scores"] == pytest.approx(expected["scores"], abs=1e-6), setting
    assert seen["weights"] == pytest.approx(expected["weights"], abs=1e-6), setting
    assert seen["output"] == pytest.approx(expected["output"], abs=1e-6), setting
    x, y = seen["output"]
    assert x == pytest.approx(y, abs=1e-6) and 3 - 1e-6 <= x <= 4 + 1e-6  # on the segment from v1 to v2
    return seen


def test_the_weighted_average_explorer_computes_what_python_does(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert (value_of(explorer, ANGLE), value_of(explorer, LENGTH)) == (45, 1.41)  # q = (1, 1), nearly
    assert_matches_python(explorer)
    move(explorer, press, ANGLE, "ArrowRight", 5)
    assert value_of(explorer, ANGLE) == 50
    assert_matches_python(explorer)
    move(explorer, press, LENGTH, "PageUp")
    assert value_of(explorer, LENGTH) > 1.5
    assert_matches_python(explorer)
    move(explorer, slide_to, ANGLE, -135)  # away from both keys: the shorter key wins
    assert assert_matches_python(explorer)["weights"][1] > 0.5
    move(explorer, slide_to, ANGLE, 45)
    move(explorer, press, LENGTH, "End")  # a long query along k1: all its weight on k1, the output on v1
    seen = assert_matches_python(explorer)
    assert seen["weights"][0] > 0.99
    move(explorer, press, LENGTH, "Home")  # no query at all: both keys alike
    assert assert_matches_python(explorer)["weights"] == pytest.approx([0.5, 0.5], abs=1e-8)


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
