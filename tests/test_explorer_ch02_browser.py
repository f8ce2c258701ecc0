"""Chapter 2's temperature explorer on the built website: moved from the keyboard (arrow, Page and Home/End keys)
and by a drag along its log-scaled slider, its bars (with each key's score), largest weight, entropy, the uniform
weight and ln 5, the marks T = 1 and T = √8, and where T stands, equal ``attn_helpers.explorers.temperature_view``
(and the chapter's numbers) to 1e-6 at each temperature tried.

With it, the parts every explorer shares on the website (issue 49, item 6), tried on this page: the caption at the
chart, the controls above it on a phone, the text at the page's size on a desktop, and the page's dark scheme,
switched to while the reader is at a setting that survives the switch."""

from __future__ import annotations

import math
import re

import pytest
import torch
from explorer_browser import (
    PHONE,
    TIMEOUT_MS,
    assert_fits_a_phone,
    control,
    labels,
    move,
    open_explorers,
    press,
    slide_to,
    temperature_shown,
    value_of,
)

import attn_helpers as ah

PAGE = "chapters/02_scaling.html"
SCORES = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])  # the chapter's row of scores (cell "scores = ...")
KEYS = [f"key {i}" for i in range(1, 6)]
SLIDER = "log₁₀ of temperature T"
D = 8  # the chapter passes d=8: T = √8 is marked


def assert_matches_python(explorer) -> float:
    """Everything the chart shows, at the slider's T, against ``temperature_view``; returns that T."""
    T = 10 ** value_of(explorer, SLIDER)
    seen = temperature_shown(labels(explorer))
    expected = ah.explorers.temperature_view(SCORES.double(), T)
    assert seen["T"] == pytest.approx(T, abs=1e-6)
    assert seen["keys"] == KEYS and seen["scores"] == SCORES.tolist()
    assert seen["weights"] == pytest.approx(expected["weights"], abs=1e-6), f"weights at T = {T}"
    assert seen["entropy"] == pytest.approx(expected["entropy"], abs=1e-6), f"entropy at T = {T}"
    assert seen["largest"] == pytest.approx(expected["largest"], abs=1e-6), f"largest weight at T = {T}"
    assert seen["uniform"] == pytest.approx(expected["uniform"], abs=1e-6)
    assert seen["ln_t"] == pytest.approx(expected["uniform_entropy"], abs=1e-6)
    assert seen["marks"] == pytest.approx({"T = 1": 1.0, f"T = √{D}": math.sqrt(D)}, abs=1e-6)
    return T


def test_the_temperature_explorer_computes_what_python_does(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert value_of(explorer, SLIDER) == 0.0
    assert assert_matches_python(explorer) == 1.0
    move(explorer, press, SLIDER, "ArrowRight", 10)  # ten steps of 0.01 in log₁₀ T
    assert assert_matches_python(explorer) == pytest.approx(10 ** 0.1)
    move(explorer, press, SLIDER, "PageUp")
    assert assert_matches_python(explorer) > 10 ** 0.1 * 1.1  # a large step
    move(explorer, press, SLIDER, "End")
    assert assert_matches_python(explorer) == pytest.approx(10.0)
    assert temperature_shown(labels(explorer))["entropy"] > 1.55  # nearly uniform: ln 5 = 1.609
    move(explorer, press, SLIDER, "Home")
    assert assert_matches_python(explorer) == pytest.approx(0.1)
    assert temperature_shown(labels(explorer))["largest"] > 0.9999  # nearly one-hot
    for log_t in (math.log10(0.25), math.log10(0.5), 0.45, -0.3):  # as a drag sets it; the track snaps to 0.01
        move(explorer, slide_to, SLIDER, log_t)
        assert assert_matches_python(explorer) == pytest.approx(10 ** log_t, rel=0.012)


def test_the_explorer_fits_a_phone_screen_with_its_control_above_the_chart(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
    control_bottom = control(explorer, SLIDER).evaluate("el => el.getBoundingClientRect().bottom")
    chart = explorer.locator(".book-explorer-view svg").first.evaluate(
        "el => { const r = el.getBoundingClientRect(); return [r.top, r.height]; }")
    assert control_bottom <= chart[0], "the slider is not above the chart"
    assert chart[1] + chart[0] - control_bottom < PHONE["height"] - 100, "chart and slider do not fit on a phone"
    caption = explorer.locator("svg [aria-roledescription='title']").first.get_attribute("aria-label")
    assert caption == "Title text 'Slide T: low T sharpens, high T flattens'"


def test_on_a_desktop_the_text_is_the_pages_size(site_tab):
    page = site_tab[0]
    try:
        page.set_viewport_size({"width": 1280, "height": 900})
        explorer = open_explorers(site_tab, PAGE).first
        sizes = explorer.locator(".book-explorer-view svg text").evaluate_all(
            "ts => ts.map(t => t.getBoundingClientRect().height / t.getBBox().height"
            " * parseFloat(getComputedStyle(t).fontSize))")
        body = float(page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.bd-article p'))"
                                   ".fontSize)"))
        assert min(sizes) >= 0.95 * body, f"the explorer's smallest text is {min(sizes):.1f} px, the page's {body} px"
    finally:
        page.set_viewport_size(PHONE)


def test_in_the_dark_scheme_it_follows_the_page_and_keeps_the_readers_setting(site_tab):
    page = site_tab[0]
    explorer = open_explorers(site_tab, PAGE).first
    move(explorer, press, SLIDER, "ArrowLeft", 30)
    before = labels(explorer)
    try:
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        page.wait_for_function("() => document.querySelector('.book-explorer').dataset.theme === 'dark'"
                               " && document.querySelector('.book-explorer').dataset.ready", timeout=TIMEOUT_MS)
        assert value_of(explorer, SLIDER) == pytest.approx(-0.3)
        assert labels(explorer) == before  # the same setting, drawn again
        fills = explorer.locator(".book-explorer-view svg text").evaluate_all(
            "ts => ts.map(t => getComputedStyle(t).fill)")
        light = re.compile(r"rgb\((\d+), (\d+), (\d+)\)")
        text_fills = [tuple(map(int, light.match(f).groups())) for f in fills if light.match(f)]
        grey = [f for f in text_fills if len(set(f)) == 1]  # the text that is not one of the marks' colours
        assert grey and all(min(f) >= 200 for f in grey), f"dark text on a dark page: {grey}"
        background = explorer.locator(".book-explorer-view svg").evaluate(
            "el => [getComputedStyle(el).backgroundColor, ...[...el.querySelectorAll('rect.background')]"
            ".map(r => r.getAttribute('fill') || getComputedStyle(r).fill)]")
        assert not any(b in ("white", "#ffffff", "rgb(255, 255, 255)") for b in background), background
        assert_matches_python(explorer)
    finally:
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
