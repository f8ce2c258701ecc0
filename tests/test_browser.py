"""The built website in a real browser: headless Chromium (Debian's `chromium` package) driven by Playwright.

The site is served from 127.0.0.1 and every request to any other host is blocked, so these tests
also prove that the website works offline. For every page: it loads with no console error and no
request that failed or left the machine, its math is typeset by MathJax, its images have loaded; a
screenshot goes to _build/screenshots/. Across pages: the navigation reaches every chapter of
_toc.yml, and a solution drop-down opens on click.

Needs /usr/bin/chromium (`apt-get update && apt-get install -y chromium`); never `playwright install`.
Without it the tests skip, or fail when $CI is set.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from built_site import SITE, html_pages, require_site, skip_or_fail, toc_pages

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = "apt-get update && apt-get install -y chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
SCREENSHOTS = SITE.parent / "screenshots"  # _build/screenshots for the default _build/html
PAGES = [p.as_posix() for p in html_pages()]
CHAPTERS = [p for p in toc_pages() if p.startswith("chapters/")]
MATH_TIMEOUT_MS = 20_000


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep the test output readable
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, on a free port; yields the base URL."""
    site = require_site()
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium and one browsing context for the module; each test opens its own tab."""
    if not CHROMIUM.is_file() or not shutil.which(str(CHROMIUM)):
        skip_or_fail(f"The browser test needs Debian's Chromium at {CHROMIUM}. Install it with: {INSTALL}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        context = chromium.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        try:
            yield context
        finally:
            context.close()
            chromium.close()


class PageProblems:
    """A browser tab on the site that records console errors, page errors, and failed or outside requests."""

    def __init__(self, context, base_url: str) -> None:
        self.page = context.new_page()
        self.problems: list[str] = []
        host = urlsplit(base_url).netloc

        def route(r):
            url = r.request.url
            if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != host:
                self.problems.append(f"request to another host (the site must work offline): {url}")
                return r.abort()
            return r.continue_()

        self.page.route("**/*", route)
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console error: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"JavaScript error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed request: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def tab(browser, server):
    tab = PageProblems(browser, server)
    yield tab
    tab.close()


def typeset_math(page) -> dict:
    """Wait for MathJax's first typesetting; count math elements, those rendered, and TeX errors."""
    count = page.locator(".math").count()
    if count:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=MATH_TIMEOUT_MS)
        page.evaluate("() => MathJax.startup.promise")
    return page.evaluate("""() => ({
        math: document.querySelectorAll('.math').length,
        typeset: [...document.querySelectorAll('.math')].filter(e => e.querySelector('mjx-container')).length,
        errors: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent),
    })""")


def images(page) -> list[dict]:
    """Every <img> once it has finished loading (lazy ones are made eager first)."""
    page.evaluate("() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')")
    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=MATH_TIMEOUT_MS)
    return page.evaluate("() => [...document.images].map(i => ({src: i.getAttribute('src'), width: i.naturalWidth}))")


def screenshot_path(page_path: str) -> Path:
    return SCREENSHOTS / (page_path.removesuffix(".html").replace("/", "__") + ".jpg")


def check_solution_dropdown(page, page_path: str) -> None:
    """The first solution is hidden, and its toggle button shows it."""
    solution = page.locator(".solution.dropdown").first
    body = solution.locator("section, .cell").first
    assert not body.is_visible(), f"{page_path}: the first solution is visible before any click"
    button = solution.locator("button.toggle-button")
    assert button.get_attribute("aria-expanded") == "false"
    button.click()
    body.wait_for(state="visible", timeout=5_000)
    assert body.is_visible() and button.get_attribute("aria-expanded") == "true", f"{page_path}: solution did not open"


@pytest.mark.parametrize("page_path", PAGES or ["intro.html"])
def test_page_loads_typesets_math_and_shows_images(tab, server, page_path):
    """Per page: no error, math typeset, images loaded, a screenshot; on chapters, a solution opens on click."""
    page = tab.page
    response = page.goto(server + page_path, wait_until="load")
    assert response is not None and response.ok, f"{page_path}: HTTP {response and response.status}"
    if 'http-equiv="Refresh"' in (SITE / page_path).read_text(encoding="utf-8"):  # index.html -> the root page
        page.wait_for_url(lambda url: urlsplit(url).path != "/" + page_path)
        page.wait_for_load_state("load")
    math = typeset_math(page)
    assert math["typeset"] == math["math"], f"{page_path}: MathJax typeset {math['typeset']} of {math['math']} formulas"
    assert not math["errors"], f"{page_path}: TeX errors {math['errors']}"
    broken = [i["src"] for i in images(page) if i["width"] == 0]
    assert not broken, f"{page_path}: images that did not load: {broken}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=screenshot_path(page_path), full_page=True, type="jpeg", quality=80)
    assert screenshot_path(page_path).stat().st_size > 0
    if page_path in CHAPTERS:
        assert page.locator(".solution.dropdown").count(), f"{page_path}: exercises should have hidden solutions"
        check_solution_dropdown(page, page_path)
    assert not tab.problems, f"{page_path}:\n" + "\n".join(tab.problems)


def test_chapter_pages_contain_typeset_math_and_figures(tab, server):
    """Guard against a vacuous pass: the chapters do have formulas and figures, and they render."""
    page = tab.page
    page.goto(server + CHAPTERS[0], wait_until="load")
    math = typeset_math(page)
    assert math["math"] > 0 and math["typeset"] == math["math"]
    assert page.locator("mjx-container").count() >= math["math"]
    figures = [i for i in images(page) if i["src"] and "_images/" in i["src"]]
    assert figures and all(i["width"] > 0 for i in figures)
    assert not tab.problems, "\n".join(tab.problems)


def test_navigation_reaches_every_chapter(browser, server):
    """The sidebar links every page of _toc.yml, and following "next" from the first page visits them in order.

    Only the navigation matters here (the per-page test checks everything else), so this tab skips
    MathJax, images and fonts to move through the pages quickly.
    """
    page = browser.new_page()
    page.route(lambda url: "/_static/mathjax/" in url or "/_images/" in url or url.endswith((".woff", ".woff2")),
               lambda route: route.abort())
    try:
        page.goto(server, wait_until="domcontentloaded")  # index.html redirects to the root page
        page.wait_for_url(lambda url: url.endswith(toc_pages()[0]))
        linked = set(page.locator("nav.bd-docs-nav a.reference.internal").evaluate_all(
            "links => links.map(a => new URL(a.getAttribute('href'), location.href).pathname.slice(1))"))
        missing = [p for p in toc_pages()[1:] if p not in linked]
        assert not missing, f"the navigation sidebar does not link {missing}"

        visited = [urlsplit(page.url).path.lstrip("/")]
        while page.locator("a.right-next").count():
            with page.expect_navigation(wait_until="domcontentloaded"):
                page.locator("a.right-next").first.click()
            visited.append(urlsplit(page.url).path.lstrip("/"))
            assert len(visited) <= len(toc_pages()) + 1, f"'next' links loop: {visited}"
    finally:
        page.close()
    assert visited == toc_pages(), "following 'next' from the first page should visit the _toc.yml pages in order"
    assert set(CHAPTERS) <= set(visited)
