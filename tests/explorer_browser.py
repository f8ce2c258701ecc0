"""Shared by the explorers' browser tests: how a reader reads and moves an explorer, on the site or in JupyterLab.

An explorer (``attn_helpers.explorers``) is drawn by Vega as SVG. Each of its marks carries an ``aria-label``
(what a screen reader says of it), which the explorers write at eight decimals: the tests read the numbers
there, as shown, and compare them with the explorer's Python function. Controls are Vega's bindings: a
``<label>`` holding the control's name and its ``<input>`` or ``<select>``; the tests move them from the
keyboard, or set them as a reader's drag would (an ``input`` event).

``site_tab`` serves the built website on 127.0.0.1 and fails on any request to another host.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from built_site import require_site, skip_or_fail

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 30_000
PHONE = {"width": 390, "height": 844}
#: Waits until every explorer on the page is drawn (or failed, which the test then reports).
ALL_DRAWN_JS = "() => [...document.querySelectorAll('.book-explorer')].every(b => b.dataset.ready || b.dataset.error)"
#: The marks a reader's screen reader announces one by one (the axes, legends and caption, which Vega labels too,
#: left out).
MARKS = ("svg [role='graphics-symbol'][aria-label]"
         ":not([aria-roledescription='axis']):not([aria-roledescription='legend']):not([aria-roledescription='title'])")
NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site_tab() -> Iterator[tuple]:
    """(page, base URL, problems): one Chromium tab on the built site, at phone width, recording problems."""
    site = require_site()
    if not CHROMIUM.is_file():
        skip_or_fail(f"The explorers' browser tests need Debian's Chromium at {CHROMIUM}: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    problems: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport=PHONE)
            page.on("request", lambda r: urlsplit(r.url).scheme in ("http", "https")
                    and urlsplit(r.url).netloc != urlsplit(base).netloc and problems.append(f"request to {r.url}"))
            page.on("pageerror", lambda e: problems.append(f"JavaScript error: {e}"))
            page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
            yield page, base, problems
            browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()


def open_explorers(site_tab: tuple, page_path: str):
    """Go to ``page_path`` and wait until its explorers are drawn; returns the page's explorer blocks."""
    page, base, problems = site_tab
    problems.clear()
    page.goto(base + page_path)
    page.wait_for_function(ALL_DRAWN_JS, timeout=TIMEOUT_MS)
    blocks = page.locator(".book-explorer")
    errors = [e for e in blocks.evaluate_all("bs => bs.map(b => b.dataset.error || '')") if e]
    assert not errors and not problems, f"{page_path}: {errors + problems}"
    assert blocks.count(), f"{page_path} shows no explorer"
    return blocks


def labels(explorer) -> list[str]:
    """The aria-labels of the explorer's marks (bars, cells, text), in drawing order."""
    return explorer.locator(MARKS).evaluate_all(
        "marks => marks.map(m => m.getAttribute('aria-label'))")


def numbers(label: str) -> list[float]:
    """The decimal numbers in one mark's label, in order."""
    return [float(x) for x in NUMBER.findall(signed(label))]


def control(explorer, name: str):
    """The input or select whose label starts with ``name``."""
    label = explorer.locator("label", has=explorer.page.locator(".vega-bind-name", has_text=name))
    assert label.count() == 1, f"no control named {name!r} (or several)"
    return label.locator("input, select").first


def press(explorer, name: str, key: str, times: int = 1) -> None:
    """Focus the control ``name`` and press ``key`` on it ``times`` times, as a keyboard user does."""
    widget = control(explorer, name)
    widget.focus()
    for _ in range(times):
        widget.press(key)


def slide_to(explorer, name: str, value: float) -> None:
    """Set the slider ``name`` to ``value`` as a drag does: its value, then an ``input`` event."""
    control(explorer, name).evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", value)


def value_of(explorer, name: str) -> float:
    return float(control(explorer, name).input_value())


def labels_after(explorer, before: list[str]) -> list[str]:
    """The marks' labels once the chart has redrawn after a move (they differ from ``before``)."""
    explorer.page.wait_for_function(
        "([el, before]) => JSON.stringify([...el.querySelectorAll(`MARKS`)]"
        ".map(m => m.getAttribute('aria-label'))) !== JSON.stringify(before)".replace("MARKS", MARKS),
        arg=[explorer.element_handle(), before], timeout=TIMEOUT_MS)
    return labels(explorer)


def is_checked(explorer, name: str) -> bool:
    """Whether the check box ``name`` is ticked."""
    return control(explorer, name).is_checked()


def spec_of(explorer) -> dict:
    """The Vega-Lite specification the page holds for the explorer (its data are the executed chapter's)."""
    import json

    return json.loads(explorer.locator('script[type="application/json"]').text_content())


def signed(label: str) -> str:
    """``label`` with Vega's minus sign (U+2212, which d3-format writes before a negative number) as ``-``."""
    return label.replace("\u2212", "-")


def choose(explorer, name: str, option: str) -> None:
    """Pick ``option`` in the menu ``name``, as a reader's click does."""
    control(explorer, name).select_option(option)


def chosen(explorer, name: str) -> str:
    """The option the menu ``name`` shows."""
    return control(explorer, name).input_value()



def selected(explorer, name: str) -> str:
    """The text of the option the menu ``name`` shows."""
    return control(explorer, name).evaluate("el => el.options[el.selectedIndex].text")


def move(explorer, action, *args) -> list[str]:
    """``action(explorer, *args)`` (:func:`press`, :func:`slide_to`, :func:`choose`), then the marks' labels once
    the chart has redrawn."""
    before = labels(explorer)
    action(explorer, *args)
    return labels_after(explorer, before)


def assert_fits_a_phone(explorer) -> None:
    """The explorer's drawing and controls end within a 390-px screen (``site_tab``'s width)."""
    right = explorer.evaluate("el => Math.max(...[el, ...el.querySelectorAll('svg, .vega-bindings, label')]"
                              ".map(e => e.getBoundingClientRect().right))")
    assert right <= PHONE["width"], f"the explorer reaches {right} px on a {PHONE['width']}-px screen"


#: A mark of chapter 2's temperature explorer: a bar, with its key, score and weight.
TEMPERATURE_BAR = re.compile(r"^(key \d+) \(score (-?[\d.]+)\): weight (\d\.\d{8})$")


def temperature_shown(marks: list[str]) -> dict:
    """What chapter 2's temperature explorer shows, read from its marks' labels (``labels``): the keys, their
    scores and weights, the largest weight, the entropy and ln t, the uniform weight, where T stands, the marks."""
    seen: dict = {"keys": [], "scores": [], "weights": [], "marks": {}}
    for label in map(signed, marks):
        if bar := TEMPERATURE_BAR.match(label):
            seen["keys"].append(bar[1])
            seen["scores"].append(float(bar[2]))
            seen["weights"].append(float(bar[3]))
        elif label.startswith("largest weight "):
            (seen["largest"],) = numbers(label)
        elif label.startswith("entropy "):
            seen["entropy"], seen["ln_t"] = numbers(label)
        elif label.startswith("uniform weight "):
            seen["uniform"] = numbers(label)[-1]
        elif label.startswith("temperature T "):
            (seen["T"],) = numbers(label)
        elif label.startswith("mark at "):
            name, value = label.removeprefix("mark at ").rsplit(" = ", 1)
            seen["marks"][name] = float(value)
        else:
            raise AssertionError(f"unexpected mark {label!r}")
    return seen


#: Where each control of an explorer lies: its name, slider or menu, and value (the number Vega writes after a
#: slider), as [left, top, right, bottom] each, and the name's line height.
CONTROL_BOXES_JS = """el => [...el.querySelectorAll('.vega-bind')].map(bind => {
    const box = e => e && (r => [r.left, r.top, r.right, r.bottom])(e.getBoundingClientRect());
    const name = bind.querySelector('.vega-bind-name');
    return {name: name.textContent.trim(), nameBox: box(name),
            lineHeight: parseFloat(getComputedStyle(name).lineHeight),
            input: box(bind.querySelector('input, select')), value: box(bind.querySelector('input[type=range] + span')),
            slider: bind.querySelector('input[type=range]') !== null};
})"""


def controls_problems(explorer) -> list[str]:
    """What is wrong with how an explorer's controls are laid out: a name on more than one line, a slider's value
    not on its slider's line, or sliders that do not line up (their left edges more than 1 px apart)."""
    controls = explorer.evaluate(CONTROL_BOXES_JS)
    problems = []
    for c in controls:
        if c["nameBox"][3] - c["nameBox"][1] > 1.5 * c["lineHeight"]:
            problems.append(f"the name {c['name']!r} takes more than one line")
        if c["value"] and not c["input"][1] <= (c["value"][1] + c["value"][3]) / 2 <= c["input"][3]:
            problems.append(f"the value of {c['name']!r} is not on its slider's line")
    lefts = sorted(c["input"][0] for c in controls if c["slider"])
    if lefts and lefts[-1] - lefts[0] > 1:
        problems.append(f"the sliders start at {[round(x) for x in lefts]} px, not lined up")
    return problems
