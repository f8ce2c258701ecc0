"""Chapter 11's two explorers on the built website, moved from the keyboard and with the mouse: the arrows of the
rotated query and key (their coordinates, and the directions the drawn arrows point), the angle between them, each
pair's share of the score, the score and the score line equal ``attn_helpers.explorers.rope_offset_view`` to 1e-6;
every pair's stretched frequency and the bounds of YaRN's ramp equal ``attn_helpers.explorers.stretch_view`` to 1e-6,
at each setting tried; both fit a phone, titles and all."""

from __future__ import annotations

import math
import re

import pytest
import torch
from explorer_browser import (
    PHONE,
    assert_fits_a_phone,
    control,
    controls_problems,
    labels,
    move,
    numbers,
    open_explorers,
    press,
    signed,
    slide_to,
    spec_of,
    value_of,
)

import attn_helpers as ah

PAGE = "chapters/11_longer_than_trained.html"
D_K, L = 128, 4096  # the stretch explorer's sizes: LLaMA's, as the chapter's cell "d_k, L, s = 128, 4096, 4" sets
TIP = re.compile(r"pair (\d+), (query at p \+ r|key at p): \(")
ANGLE = re.compile(r"pair (\d+): angle from key to query ")
OFFSET = re.compile(r"score at offset (\d+): ")
STRETCHED = re.compile(r"(.+), pair (\d+): frequency ")
BOUND = re.compile(r"pair index where rᵢ = (\d+): ")


def explorers(site_tab) -> tuple:
    blocks = open_explorers(site_tab, PAGE)
    assert blocks.count() == 2, f"{PAGE} should show two explorers, shows {blocks.count()}"
    return blocks.nth(0), blocks.nth(1)


def query_and_key(explorer) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key (d,) the page's data holds, pairs interleaved as chapter 8's RoPE takes them."""
    (rows,) = [rows for rows in spec_of(explorer)["datasets"].values() if "qe" in rows[0]]
    q = torch.tensor([[row["qe"], row["qo"]] for row in rows], dtype=torch.float64).flatten()  # (d,)
    k = torch.tensor([[row["ke"], row["ko"]] for row in rows], dtype=torch.float64).flatten()
    return q, k


def shown_rotation(explorer_labels: list[str]) -> dict:
    """What the first explorer's marks say: each drawn pair's arrows, angle and share, the score line, the score."""
    seen: dict = {"q": {}, "k": {}, "angles": {}, "pairs": {}, "scores": {}, "score": None}
    for label in explorer_labels:
        if m := TIP.match(label):
            seen["q" if m[2].startswith("query") else "k"][int(m[1])] = numbers(label)
        elif m := ANGLE.match(label):
            seen["angles"][int(m[1])], seen["pairs"][int(m[1])] = numbers(label)
        elif m := OFFSET.match(label):
            seen["scores"][int(m[1])] = numbers(label)[-1]
        elif label.startswith("score "):
            (seen["score"],) = numbers(label)
        else:
            raise AssertionError(f"unexpected mark {label!r}")
    return seen


def drawn_directions(explorer) -> dict:
    """The direction, in degrees, of every arrow drawn (its line from the circle's centre), pair by pair: each
    circle draws its query's arrow, then its key's."""
    lines = explorer.locator("svg g.mark-rule.role-mark line").evaluate_all(
        "ls => ls.map(l => [l.getAttribute('stroke'), +l.getAttribute('x2'), +l.getAttribute('y2')])")
    assert len({stroke for stroke, _, _ in lines[0::2]}) == 1 and len({stroke for stroke, _, _ in lines[1::2]}) == 1
    directions = [math.degrees(math.atan2(-y, x)) for _, x, y in lines]  # the SVG's y points down
    return {"q": directions[0::2], "k": directions[1::2]}


def turn(degrees: float) -> float:
    """An angle in degrees brought into [-180, 180)."""
    return (degrees + 180) % 360 - 180


def assert_rotation_matches_python(explorer, q, k, p: int, r: int) -> dict:
    assert (value_of(explorer, "position p"), value_of(explorer, "offset r")) == (p, r)
    seen = shown_rotation(labels(explorer))
    expected = ah.explorers.rope_offset_view(q, k, p, r)
    pairs = sorted(seen["angles"])
    assert pairs == [0, 1, 2, 3] and sorted(seen["q"]) == sorted(seen["k"]) == pairs  # every pair of d = 8 drawn
    for i in pairs:
        assert seen["q"][i] == pytest.approx(expected["q"][2 * i:2 * i + 2], abs=1e-6), f"pair {i}, p = {p}, r = {r}"
        assert seen["k"][i] == pytest.approx(expected["k"][2 * i:2 * i + 2], abs=1e-6), f"pair {i}, p = {p}, r = {r}"
        assert abs(turn(seen["angles"][i] - expected["angles"][i])) < 1e-6, f"pair {i}'s angle, p = {p}, r = {r}"
        assert seen["pairs"][i] == pytest.approx(expected["pairs"][i], abs=1e-6), f"pair {i}, p = {p}, r = {r}"
    directions = drawn_directions(explorer)  # the arrows point where the numbers say
    for vector in ("q", "k"):
        wanted = [math.degrees(math.atan2(expected[vector][2 * i + 1], expected[vector][2 * i])) for i in pairs]
        assert max(abs(turn(a - b)) for a, b in zip(directions[vector], wanted, strict=True)) < 1e-6, (vector, p, r)
    between = [turn(a - b) for a, b in zip(directions["q"], directions["k"], strict=True)]
    assert max(abs(turn(a - b)) for a, b in zip(between, expected["angles"], strict=True)) < 1e-6
    assert [seen["scores"][r] for r in sorted(seen["scores"])] == pytest.approx(expected["scores"], abs=1e-6)
    assert sorted(seen["scores"]) == list(range(len(expected["scores"])))  # offsets 0 … 32, the slider's range
    assert seen["score"] == pytest.approx(expected["score"], abs=1e-6), f"score at p = {p}, r = {r}"
    return seen


def click_at(explorer, name: str, fraction: float) -> None:
    """A mouse click on the slider ``name``'s track, ``fraction`` of the way along it."""
    box = control(explorer, name).bounding_box()
    explorer.page.mouse.click(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)


def drag(explorer, name: str, start: float, end: float) -> None:
    """Press the mouse on the slider ``name`` at ``start`` of its track, move to ``end`` and release."""
    box = control(explorer, name).bounding_box()
    mouse, y = explorer.page.mouse, box["y"] + box["height"] / 2
    mouse.move(box["x"] + start * box["width"], y)
    mouse.down()
    mouse.move(box["x"] + end * box["width"], y, steps=5)
    mouse.up()


def test_moving_p_turns_both_arrows_and_keeps_their_angle_and_the_score_line(site_tab):
    rope, _ = explorers(site_tab)
    q, k = query_and_key(rope)
    at_start = assert_rotation_matches_python(rope, q, k, 0, 1)
    move(rope, press, "position p", "ArrowRight", 5)  # five steps of 1, from the keyboard
    moved = assert_rotation_matches_python(rope, q, k, 5, 1)
    assert moved["q"][0] != pytest.approx(at_start["q"][0], abs=1e-3)  # the arrows turned,
    assert moved["k"][0] != pytest.approx(at_start["k"][0], abs=1e-3)
    for key in ("angles", "pairs", "scores"):  # the angles, the shares and the score line did not
        assert list(moved[key].values()) == pytest.approx(list(at_start[key].values()), abs=1e-6), key
    move(rope, press, "position p", "End")
    assert assert_rotation_matches_python(rope, q, k, 64, 1)["scores"] == pytest.approx(at_start["scores"], abs=1e-6)
    move(rope, press, "position p", "PageDown")
    p = int(value_of(rope, "position p"))
    assert p < 64 and assert_rotation_matches_python(rope, q, k, p, 1)["score"] == pytest.approx(at_start["score"],
                                                                                                  abs=1e-6)
    move(rope, click_at, "position p", 0.3)  # a click on the track
    p = int(value_of(rope, "position p"))
    assert 10 < p < 30
    assert assert_rotation_matches_python(rope, q, k, p, 1)["scores"] == pytest.approx(at_start["scores"], abs=1e-6)
    move(rope, drag, "position p", 0.3, 0.9)  # a drag
    p = int(value_of(rope, "position p"))
    assert 50 < p <= 64
    assert assert_rotation_matches_python(rope, q, k, p, 1)["angles"] == pytest.approx(at_start["angles"], abs=1e-6)


def test_moving_r_turns_the_query_away_from_the_key_along_the_score_line(site_tab):
    rope, _ = explorers(site_tab)
    q, k = query_and_key(rope)
    at_start = assert_rotation_matches_python(rope, q, k, 0, 1)
    move(rope, press, "offset r", "ArrowRight", 6)
    seen = assert_rotation_matches_python(rope, q, k, 0, 7)
    assert all(seen["k"][i] == pytest.approx(at_start["k"][i], abs=1e-6) for i in seen["k"])  # the key stays at 0
    assert seen["score"] == pytest.approx(at_start["scores"][7], abs=1e-6)  # to the line's point at 7
    move(rope, press, "offset r", "Home")
    assert_rotation_matches_python(rope, q, k, 0, 0)
    move(rope, click_at, "offset r", 0.75)
    r = int(value_of(rope, "offset r"))
    assert 18 < r < 30
    assert assert_rotation_matches_python(rope, q, k, 0, r)["score"] == pytest.approx(at_start["scores"][r], abs=1e-6)
    move(rope, drag, "offset r", 0.75, 1.0)
    move(rope, slide_to, "position p", 40)
    seen = assert_rotation_matches_python(rope, q, k, 40, 32)
    assert seen["score"] == pytest.approx(at_start["scores"][32], abs=1e-6)
    line = list(at_start["scores"].values())
    assert min(abs(a - b) for a, b in zip(line, line[1:], strict=False)) > 1e-3  # another offset, another score


def shown_stretch(explorer_labels: list[str]) -> dict:
    """What the second explorer shows: each method's frequencies and factors by pair, YaRN's factor on q, k, and
    the pair indices of the ramp's two rules."""
    seen: dict = {"frequencies": {}, "factors": {}, "yarn_factor": None, "bounds": {}}
    for label in explorer_labels:
        if m := STRETCHED.match(label):
            method = m[1].split(",")[0]  # "YaRN as printed, β = 32" is chapter 11's "YaRN as printed"
            frequency, factor = numbers(label)
            seen["frequencies"].setdefault(method, {})[int(m[2])] = frequency
            seen["factors"].setdefault(method, {})[int(m[2])] = factor
        elif label.startswith("YaRN factor"):
            (seen["yarn_factor"],) = numbers(label)
        elif m := BOUND.match(label):
            seen["bounds"][int(m[1])] = numbers(label)[-1]
        else:
            raise AssertionError(f"unexpected mark {label!r}")
    return {**seen, "frequencies": {name: [f[i] for i in sorted(f)] for name, f in seen["frequencies"].items()},
            "factors": {name: [f[i] for i in sorted(f)] for name, f in seen["factors"].items()}}


def assert_stretch_matches_python(explorer, s: float) -> dict:
    assert value_of(explorer, "scale s") == pytest.approx(s)
    seen = shown_stretch(labels(explorer))
    expected = ah.explorers.stretch_view(D_K, s, L)
    assert set(seen["factors"]) == set(ah.explorers.STRETCH_METHODS)
    for method in ah.explorers.STRETCH_METHODS:
        assert len(seen["factors"][method]) == D_K // 2
        assert seen["factors"][method] == pytest.approx(expected["factors"][method], abs=1e-6), f"{method}, s = {s}"
        assert seen["frequencies"][method] == pytest.approx(expected["frequencies"][method], rel=1e-6), \
            f"{method}, s = {s}"
    assert seen["yarn_factor"] == pytest.approx(expected["yarn_factor"], abs=1e-6)
    assert seen["bounds"] == pytest.approx({32: expected["bounds"]["beta"], 1: expected["bounds"]["alpha"]}, abs=1e-6)
    return seen


def test_the_stretched_frequencies_move_with_s_as_python_computes_them(site_tab):
    _, stretch = explorers(site_tab)
    seen = assert_stretch_matches_python(stretch, 4.0)
    for name in ("YaRN as printed", "YaRN as coded"):  # the ramp the paragraph describes: pairs 21 to 45
        assert seen["factors"][name][:21] == [1.0] * 21 and seen["factors"][name][46:] == [0.25] * 18
    move(stretch, press, "scale s", "ArrowLeft", 6)  # six steps of 0.25
    assert_stretch_matches_python(stretch, 2.5)
    move(stretch, press, "scale s", "End")
    assert_stretch_matches_python(stretch, 8.0)
    move(stretch, press, "scale s", "Home")
    assert all(f == pytest.approx(1, abs=1e-6) for fs in assert_stretch_matches_python(stretch, 1.0)["factors"].values()
               for f in fs)
    move(stretch, click_at, "scale s", 0.5)
    s = value_of(stretch, "scale s")
    assert 3.5 < s < 5.5 and s * 4 == int(s * 4)  # on a step of 0.25
    assert_stretch_matches_python(stretch, s)
    move(stretch, drag, "scale s", 0.5, 0.2)
    s = value_of(stretch, "scale s")
    assert 1.5 < s < 3.5
    assert_stretch_matches_python(stretch, s)


def test_both_explorers_fit_a_phone_screen_titles_and_all(site_tab):
    """Nothing reaches past a 390-px screen, and every axis title lies along its axis (the stretch explorer's
    y-axis title, longer than its axis, was cut off on a phone)."""
    page = site_tab[0]
    assert page.viewport_size == PHONE
    for explorer in explorers(site_tab):
        assert_fits_a_phone(explorer)
        axes = explorer.locator("svg g.role-axis").evaluate_all(
            """axes => axes.filter(a => a.querySelector('.role-axis-title text')).map(a => {
                 const title = a.querySelector('.role-axis-title text').getBoundingClientRect();
                 const domain = a.querySelector('.role-axis-domain line').getBoundingClientRect();
                 const box = a.closest('.book-explorer').getBoundingClientRect();
                 return [a.querySelector('.role-axis-title text').textContent, title.left, title.top, title.right,
                         title.bottom, domain.left, domain.top, domain.right, domain.bottom, box.left, box.right];
               })""")
        assert axes, "no axis title found"
        for name, left, top, right, bottom, d_left, d_top, d_right, d_bottom, b_left, b_right in axes:
            assert b_left <= left and right <= b_right, f"{signed(name)!r} reaches past the explorer"
            if d_right - d_left < 1:  # a y-axis: the title no longer than the axis
                assert d_top - 1 <= top and bottom <= d_bottom + 1, f"{name!r} runs past its axis"
            else:
                assert d_left - 1 <= left and right <= d_right + 1, f"{name!r} runs past its axis"


def test_the_two_sliders_line_up_on_a_phone(site_tab):
    """On a 390-px phone the controls wrap; the sliders "position p" and "offset r" start at one x whatever the
    length of their names (they were 22 px apart), each with its value on its line."""
    rope = open_explorers(site_tab, PAGE).first
    assert not controls_problems(rope)
