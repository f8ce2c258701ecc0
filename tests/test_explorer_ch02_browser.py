"""Chapter 2's temperature explorer on the built website: moved from the keyboard and by a drag, its bars, entropy
and largest weight equal ``attn_helpers.explorers.temperature_view`` to 1e-6 at each temperature tried."""

from __future__ import annotations

import pytest
import torch
from explorer_browser import (
    assert_fits_a_phone,
    labels,
    labels_after,
    numbers,
    open_explorers,
    press,
    slide_to,
    value_of,
)

import attn_helpers as ah

PAGE = "chapters/02_scaling.html"
SCORES = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])  # the chapter's row of scores (cell "scores = ...")


def shown(explorer_labels: list[str]) -> dict:
    """What the chart shows: the five weights, then the entropy and the largest weight of the summary text."""
    *bars, summary = explorer_labels
    entropy, largest = numbers(summary)
    return {"weights": [numbers(b)[-1] for b in bars], "entropy": entropy, "largest": largest}


def assert_matches_python(explorer, T: float) -> None:
    seen = shown(labels(explorer))
    expected = ah.explorers.temperature_view(SCORES.double(), T)
    assert seen["weights"] == pytest.approx(expected["weights"], abs=1e-6), f"weights at T = {T}"
    assert seen["entropy"] == pytest.approx(expected["entropy"], abs=1e-6), f"entropy at T = {T}"
    assert seen["largest"] == pytest.approx(expected["largest"], abs=1e-6), f"largest weight at T = {T}"


def test_the_temperature_explorer_computes_what_python_does(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert value_of(explorer, "temperature T") == 1.0
    assert_matches_python(explorer, 1.0)
    before = labels(explorer)
    press(explorer, "temperature T", "ArrowRight", times=10)  # ten steps of 0.05
    labels_after(explorer, before)
    assert value_of(explorer, "temperature T") == pytest.approx(1.5)
    assert_matches_python(explorer, 1.5)
    for T in (0.1, 0.35, 4.0, 10.0):
        before = labels(explorer)
        slide_to(explorer, "temperature T", T)
        labels_after(explorer, before)
        assert_matches_python(explorer, T)
    assert shown(labels(explorer))["entropy"] > 1.55  # at T = 10 the weights are nearly uniform: log 5 = 1.609


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
