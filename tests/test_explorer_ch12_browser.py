"""Chapter 12's speculative-sampling explorer on the built website: its two sliders (the draft's mix, from the uniform
distribution through the chapter's q to p, and the drafts k) moved from the keyboard (arrow, Page and Home/End keys)
and by a drag; at each setting p, the draft, min(p, q), the residual, α and the expected tokens a round for every k,
which the browser computes with Vega's expressions and the papers' formula, equal
``attn_helpers.explorers.speculative_view``, which enumerates the rounds exactly, to 1e-6."""

from __future__ import annotations

import re
from fractions import Fraction as F

import pytest
from explorer_browser import (
    assert_fits_a_phone,
    controls_problems,
    labels,
    move,
    open_explorers,
    press,
    slide_to,
    value_of,
)

from attn_helpers.explorers import speculative_view
from attn_helpers.explorers._speculative import K_MAX

PAGE = "chapters/12_cost_of_the_cache.html"
P = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]  # the chapter's p and q (cell "from fractions import Fraction as F")
Q = [F(1, 8), F(1, 2), F(1, 4), F(1, 8)]
MIX, K = "draft: -1 uniform", "drafts k"
TOKEN = re.compile(r"^token (\d): p (\d\.\d{8}), q (\d\.\d{8}), min\(p, q\) (\d\.\d{8}), residual (\d\.\d{8})$")
ROUND = re.compile(r"^k = (\d): expected tokens a round (\d+\.\d{8})$")
NOW = re.compile(r"^drafts k = (\d) \(the slider\): expected tokens a round (\d+\.\d{8})$")
ALPHA = re.compile(r"^acceptance rate alpha (\d\.\d{8})$")


def assert_matches_python(explorer) -> dict:
    mix, k = value_of(explorer, MIX), int(value_of(explorer, K))
    expected = speculative_view(P, Q, mix, k)
    seen: dict = {"tokens": {}, "p": {}, "draft": {}, "overlap": {}, "residual": {}, "now": []}
    for label in labels(explorer):
        if found := TOKEN.match(label):
            x = int(found[1])
            for key, group in (("p", 2), ("draft", 3), ("overlap", 4), ("residual", 5)):
                seen[key][x] = float(found[group])
        elif found := ROUND.match(label):
            seen["tokens"][int(found[1])] = float(found[2])
        elif found := NOW.match(label):
            seen["now"].append((int(found[1]), float(found[2])))
        elif found := ALPHA.match(label):
            seen["alpha"] = float(found[1])
        else:
            raise AssertionError(f"unexpected mark {label!r}")
    setting = f"mix {mix}, k {k}"
    approx = pytest.approx
    assert [seen["p"][x] for x in range(4)] == approx([float(a) for a in P], abs=1e-6), setting
    for key in ("draft", "overlap", "residual"):
        assert sorted(seen[key]) == [0, 1, 2, 3], setting
        assert [seen[key][x] for x in range(4)] == approx(expected[key], abs=1e-6), f"{setting}: {key}"
    assert seen["alpha"] == approx(expected["alpha"], abs=1e-6), setting
    assert sorted(seen["tokens"]) == list(range(K_MAX + 1)), setting
    assert [seen["tokens"][j] for j in range(K_MAX + 1)] == approx(expected["tokens"], abs=1e-6), setting
    assert len(seen["now"]) == 1 and seen["now"][0][0] == k, setting
    assert seen["now"][0][1] == approx(expected["at_k"], abs=1e-6), setting
    return expected


def test_the_speculative_explorer_computes_what_python_does(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert (value_of(explorer, MIX), value_of(explorer, K)) == (0, 4)  # the chapter's q, four drafts
    assert assert_matches_python(explorer)["alpha"] == 0.625
    move(explorer, press, MIX, "ArrowRight", 3)
    assert value_of(explorer, MIX) == pytest.approx(0.15)
    assert_matches_python(explorer)
    move(explorer, press, MIX, "PageUp")
    assert_matches_python(explorer)
    move(explorer, press, MIX, "End")  # the draft is p: nothing is rejected, a round emits k + 1 tokens
    assert value_of(explorer, MIX) == 1
    assert assert_matches_python(explorer)["at_k"] == 5
    move(explorer, press, K, "ArrowLeft")
    assert value_of(explorer, K) == 3
    assert_matches_python(explorer)
    move(explorer, press, MIX, "Home")  # the uniform draft
    assert value_of(explorer, MIX) == -1
    assert assert_matches_python(explorer)["alpha"] == 0.75
    move(explorer, press, K, "End")
    assert value_of(explorer, K) == K_MAX
    assert_matches_python(explorer)
    move(explorer, press, K, "Home")
    assert_matches_python(explorer)
    for mix in (-0.65, -0.2, 0.35, 0.8, 0.95):  # as a drag sets it
        move(explorer, slide_to, MIX, mix)
        assert value_of(explorer, MIX) == pytest.approx(mix)
        assert_matches_python(explorer)
    move(explorer, slide_to, K, 6)
    assert_matches_python(explorer)
    move(explorer, press, MIX, "PageDown")
    assert_matches_python(explorer)


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)


def test_each_control_reads_on_its_own_lines_on_a_phone(site_tab):
    """On a 390-px phone the mix slider's long name ("draft: -1 uniform, 0 q, 1 p") wrapped its value onto a line of
    its own; each name is now one line, each slider on one line with its value, and the two sliders line up."""
    explorer = open_explorers(site_tab, PAGE).first
    assert not controls_problems(explorer)
    assert_fits_a_phone(explorer)
