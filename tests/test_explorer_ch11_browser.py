"""Chapter 11's two explorers on the built website, moved from the keyboard and by a drag: the rotated query and key,
each pair's share of their score and the score equal ``attn_helpers.explorers.rope_offset_view`` to 1e-6, and every
pair's stretched frequency equals ``attn_helpers.explorers.stretch_view`` to 1e-6, at each setting tried."""

from __future__ import annotations

import re

import pytest
import torch
from explorer_browser import (
    assert_fits_a_phone,
    labels,
    move,
    numbers,
    open_explorers,
    press,
    slide_to,
    spec_of,
    value_of,
)

import attn_helpers as ah

PAGE = "chapters/11_longer_than_trained.html"
D_HEAD, TRAINED = 8, 16  # the chapter's d_head and TRAINED (cell "d_head = 8 ...")
FEATURE = re.compile(r"(query at p \+ r|key at p), feature (\d+): ")
PAIR = re.compile(r"pair (\d+): share of the score ")
STRETCHED = re.compile(r"(.+), pair (\d+): frequency ")


def explorers(site_tab) -> tuple:
    blocks = open_explorers(site_tab, PAGE)
    assert blocks.count() == 2, f"{PAGE} should show two explorers, shows {blocks.count()}"
    return blocks.nth(0), blocks.nth(1)


def query_and_key(explorer) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key (d,) the page's data holds, pairs interleaved as chapter 8's RoPE takes them."""
    (rows,) = spec_of(explorer)["datasets"].values()
    q = torch.tensor([[row["qe"], row["qo"]] for row in rows], dtype=torch.float64).flatten()  # (d,)
    k = torch.tensor([[row["ke"], row["ko"]] for row in rows], dtype=torch.float64).flatten()
    return q, k


def shown_rotation(explorer_labels: list[str]) -> dict:
    """What the first explorer shows: the rotated query and key by feature, each pair's share, the score."""
    q, k, pairs, score = {}, {}, {}, None
    for label in explorer_labels:
        if m := FEATURE.match(label):
            (q if m[1].startswith("query") else k)[int(m[2])] = numbers(label)[-1]
        elif m := PAIR.match(label):
            pairs[int(m[1])] = numbers(label)[-1]
        elif label.startswith("score "):
            (score,) = numbers(label)
    return {"q": [q[i] for i in sorted(q)], "k": [k[i] for i in sorted(k)],
            "pairs": [pairs[i] for i in sorted(pairs)], "score": score}


def assert_rotation_matches_python(explorer, q, k, p: int, r: int) -> dict:
    seen = shown_rotation(labels(explorer))
    expected = ah.explorers.rope_offset_view(q, k, p, r)
    assert len(seen["q"]) == len(seen["k"]) == D_HEAD and len(seen["pairs"]) == D_HEAD // 2
    for key in ("q", "k", "pairs"):
        assert seen[key] == pytest.approx(expected[key], abs=1e-6), f"{key} at p = {p}, r = {r}"
    assert seen["score"] == pytest.approx(expected["score"], abs=1e-6), f"score at p = {p}, r = {r}"
    return seen


def test_the_score_stays_as_p_moves_and_changes_with_r(site_tab):
    rope, _ = explorers(site_tab)
    q, k = query_and_key(rope)
    assert (value_of(rope, "position p"), value_of(rope, "offset r")) == (0, 1)
    at_start = assert_rotation_matches_python(rope, q, k, 0, 1)
    move(rope, press, "position p", "ArrowRight", 5)  # five steps of 1
    assert value_of(rope, "position p") == 5
    moved = assert_rotation_matches_python(rope, q, k, 5, 1)
    assert moved["q"] != pytest.approx(at_start["q"], abs=1e-3)  # the features turned,
    assert moved["score"] == pytest.approx(at_start["score"], abs=1e-6)  # the score did not
    for p in (17, 64):
        move(rope, slide_to, "position p", p)
        assert assert_rotation_matches_python(rope, q, k, p, 1)["score"] == pytest.approx(at_start["score"], abs=1e-6)
    scores = []
    for r, (p_before, p_after) in zip((0, 7, 32), [(64, 3), (3, 40), (40, 0)], strict=True):
        move(rope, slide_to, "offset r", r)
        scores.append(assert_rotation_matches_python(rope, q, k, p_before, r)["score"])
        move(rope, slide_to, "position p", p_after)
        assert assert_rotation_matches_python(rope, q, k, p_after, r)["score"] == pytest.approx(scores[-1], abs=1e-6)
    neighbours = zip(scores, scores[1:] + [at_start["score"]], strict=True)  # r = 0 and 7, 7 and 32, 32 and 1
    assert min(abs(a - b) for a, b in neighbours) > 1e-3  # another offset, another score


def shown_stretch(explorer_labels: list[str]) -> dict:
    """What the second explorer shows: each method's frequencies and factors by pair, and YaRN's factor on q, k."""
    frequencies: dict = {}
    factors: dict = {}
    yarn_factor = None
    for label in explorer_labels:
        if m := STRETCHED.match(label):
            method = m[1].split(",")[0]  # "YaRN as printed, β = 32" is chapter 11's "YaRN as printed"
            frequency, factor = numbers(label)
            frequencies.setdefault(method, {})[int(m[2])] = frequency
            factors.setdefault(method, {})[int(m[2])] = factor
        elif label.startswith("YaRN factor"):
            (yarn_factor,) = numbers(label)
    return {"frequencies": {name: [f[i] for i in sorted(f)] for name, f in frequencies.items()},
            "factors": {name: [f[i] for i in sorted(f)] for name, f in factors.items()}, "yarn_factor": yarn_factor}


def assert_stretch_matches_python(explorer, s: float) -> None:
    seen = shown_stretch(labels(explorer))
    expected = ah.explorers.stretch_view(D_HEAD, s, TRAINED)
    assert set(seen["factors"]) == set(ah.explorers.STRETCH_METHODS)
    for method in ah.explorers.STRETCH_METHODS:
        assert seen["factors"][method] == pytest.approx(expected["factors"][method], abs=1e-6), f"{method}, s = {s}"
        assert seen["frequencies"][method] == pytest.approx(expected["frequencies"][method], rel=1e-6), \
            f"{method}, s = {s}"
    assert seen["yarn_factor"] == pytest.approx(expected["yarn_factor"], abs=1e-6)


def test_the_stretched_frequencies_move_with_s_as_python_computes_them(site_tab):
    _, stretch = explorers(site_tab)
    assert value_of(stretch, "scale s") == 4
    assert_stretch_matches_python(stretch, 4.0)
    move(stretch, press, "scale s", "ArrowLeft", 6)  # six steps of 0.25
    assert value_of(stretch, "scale s") == pytest.approx(2.5)
    assert_stretch_matches_python(stretch, 2.5)
    for s in (1.0, 1.75, 6.0, 8.0):
        move(stretch, slide_to, "scale s", s)
        assert_stretch_matches_python(stretch, s)


def test_both_explorers_fit_a_phone_screen(site_tab):
    for explorer in explorers(site_tab):
        assert_fits_a_phone(explorer)
