"""The built website in a real browser: headless Chromium (Debian's `chromium` package) driven by Playwright.

The site is served from 127.0.0.1 and any request to another host fails the page's test, so these
tests also prove that the website works offline. Each page is visited once (`Visit`), on a 1366 px desktop
and then a 390 px phone screen, and every check below reads what that visit recorded:

- it loads with no console error and no request that failed or left the machine, its math is typeset
  by MathJax, its images have loaded, screenshots of its first screen on a desktop and a phone go to
  _build/screenshots/, and on a chapter a solution drop-down opens on click;
- at 390 px nothing makes the page wider than the screen (what is too wide scrolls in its own box);
- on both screens every box that scrolls sideways has a tab stop, so a keyboard can scroll it, and a display
  formula that scrolls also has a name for screen readers (_static/scroll_boxes.js); axe-core's
  scrollable-region-focusable checks the formulas too;
- every image in the article has alt text that is a phrase, not a file path or a hash;
- no figure more than 1,000 px wide is shown below 0.65 of its natural width at 1366 px, and a click on a
  figure opens the full-size image;
- axe-core (npm, pinned in package-lock.json, installed by `make setup`) finds no critical or serious
  accessibility violation (nor an empty table header), but for the theme's own, named in THEME_VIOLATIONS;
- no page shows leaked markup or test plumbing ("{glue", "Exercise Exercise", "NBVAL", ...).

Across pages: the navigation reaches every chapter of _toc.yml, and search-result snippets show
formulas as text, not TeX. Desktop and phone screenshots of the sections that hold the widest figures
go to _build/screenshots/figures/.

Needs /usr/bin/chromium (`apt-get update && apt-get install -y chromium`); never `playwright install`.
Without it the tests skip, or fail when $CI is set.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import book_toc
import pytest
from built_site import ROOT, SITE, html_pages, require_site, skip_or_fail, toc_pages
from explorer_browser import ALL_DRAWN_JS

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = "apt-get update && apt-get install -y chromium"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
SCREENSHOTS = SITE.parent / "screenshots"  # _build/screenshots for the default _build/html
PAGES = [p.as_posix() for p in html_pages()]
CHAPTERS = [f"chapters/{p.stem}.html" for p in book_toc.chapters()]
MATH_TIMEOUT_MS = 20_000
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# The figure rule: a figure drawn more than WIDE_FIGURE_PX wide must be shown at no less than MIN_SCALE of
# its natural width on a 1366 px desktop, or its labels become unreadable. "Natural width" is the width the
# figure was drawn for: the image's pixel width, or, for an image saved at 2x for sharp screens (a retina
# PNG, which carries its intended CSS size as a width attribute), that attribute, the width it is meant to
# be shown at; a 2x image shown at half its pixels is sharp, not shrunk.
WIDE_FIGURE_PX, MIN_SCALE = 1000, 0.65
# The sections to look at (figures 5.1, 5.2, 4.3 and 7.1 when issue 12 was filed: the widest ones).
FIGURES_TO_SCREENSHOT = ("fig-ch05-memory", "fig-ch05-heads", "fig-ch04-before-after", "fig-ch07-padding")

# Text that must never reach a reader: unrendered MyST roles and directives, test plumbing, and the
# doubled word a {numref} after "Exercise" produces.
LEAKS = ("{glue", "{numref", "{eq}", "{cite", "{ref}", "NBVAL", "Exercise Exercise", "exercise Exercise", ":label:")
# ...except where a page shows MyST source on purpose: the instructors' page's examples of the exercise
# convention are code blocks in Markdown (class highlight-markdown).
SHOWS_MYST_SOURCE = ".highlight-markdown"

# axe-core violations that come from the theme (pydata-sphinx-theme / sphinx-book-theme), outside the
# article, which the book does not control. Each is (rule id, CSS selector of the element); any other
# critical or serious violation fails, wherever it is.
#   label-content-name-mismatch: the theme's search button (its visible text "Search" and the shortcut
#   "Ctrl+K" differ from its aria-label) and its colour-mode button (label "Color mode", visible: an icon).
THEME_VIOLATIONS = [
    ["label-content-name-mismatch", "button.search-button__button"],
    ["label-content-name-mismatch", "button.theme-switch-button"],
]
# Rules reported whatever impact axe gives them: empty-table-header is "minor" to axe, but a table whose
# header cell is empty (a pandas index without a name) reads as a column without a name to a screen reader.
ANY_IMPACT = ["empty-table-header"]
ARTICLE = "#main-content article"
# The page the guards below break on purpose: the book's page template, but short (a chapter would do as well,
# at several times the cost: its formulas typeset, axe-core walks its code cells).
GUARD_PAGE = "bibliography.html"


# Where the test server hands out axe-core, beside the site (a path no page of the site can have). Loaded by URL,
# the same script each time, Chromium compiles it once for all pages (its code cache) instead of once a page.
AXE_URL_PATH = "/__test__/axe.min.js"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep the test output readable
        pass

    def translate_path(self, path: str) -> str:
        return str(AXE) if urlsplit(path).path == AXE_URL_PATH else super().translate_path(path)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, on a free port (and axe-core at AXE_URL_PATH); yields the base URL."""
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
    """One headless Chromium and one browsing context for the module."""
    if not CHROMIUM.is_file() or not shutil.which(str(CHROMIUM)):
        skip_or_fail(f"The browser test needs Debian's Chromium at {CHROMIUM}. Install it with: {INSTALL}")
    if not AXE.is_file():
        skip_or_fail(f"The browser test needs axe-core at {AXE.relative_to(ROOT)}: run `make setup` (npm ci).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        context = chromium.new_context(viewport=DESKTOP, service_workers="block")
        try:
            yield context
        finally:
            context.close()
            chromium.close()


class PageProblems:
    """A browser tab on the site that records console errors, page errors, and failed or outside requests.

    The module's pages are all visited in one tab, one after another (`fresh` clears what the previous
    page recorded): opening a tab starts a renderer process, which costs more CPU than loading a page.
    """

    def __init__(self, context, base_url: str) -> None:
        self.page = context.new_page()
        self.problems: list[str] = []
        host = urlsplit(base_url).netloc

        def outside(request):
            url = request.url
            if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != host:
                self.problems.append(f"request to another host (the site must work offline): {url}")

        # Watched, not intercepted: routing every request through Playwright costs a round trip to this
        # process for each of a page's files; a request elsewhere is reported all the same.
        self.page.on("request", outside)
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console error: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"JavaScript error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed request: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))

    def fresh(self) -> PageProblems:
        """This tab, blank, at the desktop size, with nothing recorded: ready for the next page.

        Leaving the previous page first ends what it still had under way (the search page fetches pages for
        its snippets), so what that leaves unfinished is not blamed on the next page.
        """
        self.page.goto("about:blank")
        self.page.set_viewport_size(DESKTOP)
        self.problems.clear()
        return self


@pytest.fixture(scope="module")
def shared_tab(browser, server) -> Iterator[PageProblems]:
    tab = PageProblems(browser, server)
    yield tab
    tab.page.close()


@pytest.fixture
def tab(shared_tab) -> PageProblems:
    return shared_tab.fresh()


def add_axe(page, server: str) -> None:
    """Load axe-core into ``page`` from the test server at ``server`` (see AXE_URL_PATH)."""
    page.add_script_tag(url=server + AXE_URL_PATH.lstrip("/"))


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


def screenshot_path(page_path: str, screen: str = "desktop") -> Path:
    return SCREENSHOTS / (page_path.removesuffix(".html").replace("/", "__") + f"-{screen}.jpg")


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


# JavaScript helpers evaluated in the page. describe(el) names an element so a failure says which one:
# its tag, id and classes, the nearest heading's id, and the start of its text or its src.
DESCRIBE = """
const describe = (el) => {
  let name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    [...el.classList].slice(0, 3).map(c => '.' + c).join('');
  const section = el.closest('section[id], figure[id], dl[id], dt[id]');
  const src = el.getAttribute && el.getAttribute('src');
  const text = src ? src : (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60);
  return name + (section ? ` in #${section.id}` : '') + (text ? ` ("${text}")` : '');
};
"""

IMAGES_JS = DESCRIBE + """
(selector) => {
  const article = document.querySelector(selector);
  if (!article) return [];
  return [...article.querySelectorAll('img')].map((img) => {
    const attr = parseFloat(img.getAttribute('width'));
    const styled = img.style.width.endsWith('px') ? parseFloat(img.style.width) : NaN;
    const link = img.closest('a');
    return {
      element: describe(img), src: img.getAttribute('src'), alt: img.getAttribute('alt'),
      natural: img.naturalWidth, intended: attr || styled || img.naturalWidth,
      shown: img.getBoundingClientRect().width, inFigure: !!img.closest('figure, .cell_output'),
      href: link ? new URL(link.getAttribute('href'), location.href).href : null,
      file: new URL(img.getAttribute('src'), location.href).href,
    };
  });
}
"""

# Elements whose right edge passes the screen's, and that no ancestor clips or scrolls: what makes the page
# scroll sideways. The deepest ones are reported (their ancestors stick out only because of them).
OVERFLOW_JS = DESCRIBE + """
() => {
  const width = window.innerWidth;
  const scrollWidth = document.documentElement.scrollWidth;
  if (scrollWidth <= width) return {scrollWidth, innerWidth: width, culprits: []};
  const clipped = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') return true;
    }
    return false;
  };
  const out = [...document.body.querySelectorAll('*')].filter((el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > width + 1 && getComputedStyle(el).position !== 'fixed' && !clipped(el);
  });
  const deepest = out.filter((el) => !out.some((o) => o !== el && el.contains(o)));
  return {
    scrollWidth, innerWidth: width,
    culprits: deepest.slice(0, 6).map(
      (el) => `${describe(el)} reaches ${Math.round(el.getBoundingClientRect().right)} px`),
  };
}
"""

# axe-core over the whole page but MathJax's output (thousands of glyph elements a page, whose accessibility
# is MathJax's own assistive MathML; walking them triples axe's time). Each violation says whether it is
# in the article, and which entry of THEME_VIOLATIONS (if any) its element matches.
# Boxes in the article that scroll sideways (a long formula, a wide table, a code block) and that the keyboard
# cannot reach, so cannot scroll, and display formulas that scroll without a name a screen reader can announce
# when they get the focus: the theme gives code blocks, outputs and tables a tab stop, _static/scroll_boxes.js
# gives display formulas one, with a name.
SCROLL_BOXES_JS = DESCRIBE + """
(article) => [...document.querySelectorAll(`${article} *`)].filter((el) => {
  const style = getComputedStyle(el);
  return ['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1
    && el.offsetParent !== null;
}).flatMap((el) => {
  if (el.tabIndex < 0 && !el.querySelector('a, button, input, [tabindex]')) return [describe(el) + ': no tab stop'];
  const formula = el.matches('mjx-container[display="true"]');
  if (formula && !(el.getAttribute('aria-label') || '').trim()) return [describe(el) + ': a tab stop without a name'];
  return [];
}).slice(0, 6)
"""

# The whole run leaves MathJax's output out; a second run checks the display formulas themselves (the boxes that
# scroll) with the rules about scrolling, focus and the ARIA that scroll_boxes.js adds.
FORMULA_RULES = ["scrollable-region-focusable", "aria-allowed-attr", "aria-allowed-role", "aria-prohibited-attr",
                 "presentation-role-conflict"]
AXE_JS = DESCRIBE + """
async ([article, theme, anyImpact, formulaRules]) => {
  const results = await axe.run({exclude: [['mjx-container']]}, {resultTypes: ['violations']});
  const violations = [...results.violations];
  if (document.querySelector('mjx-container[display="true"]')) {
    const formulas = await axe.run({include: [['mjx-container[display="true"]']]},
                                   {runOnly: formulaRules, resultTypes: ['violations']});
    violations.push(...formulas.violations);
  }
  const found = [];
  for (const v of violations) {
    if (!['critical', 'serious'].includes(v.impact) && !anyImpact.includes(v.id)) continue;
    for (const node of v.nodes) {
      const selector = node.target.join(' ');
      const el = document.querySelector(node.target[0]);
      const known = theme.find(([rule, sel]) => rule === v.id && el && el.matches(sel));
      found.push({rule: v.id, impact: v.impact, selector, help: v.help, theme: known ? known[1] : null,
                  inArticle: !!(el && el.closest(article)), element: el ? describe(el) : selector});
    }
  }
  return found;
}
"""

TEXT_JS = """
([article, exempt]) => {
  const el = document.querySelector(article);
  if (!el) return '';
  const copy = el.cloneNode(true);
  copy.querySelectorAll(exempt).forEach((e) => e.remove());
  return copy.textContent;
}
"""


def to_phone(page) -> None:
    """Narrow the tab to the phone's width, and return once the page has handled the resize event.

    The theme updates the tab stops of scrolling boxes 300 ms after a resize (debounced), hence the wait.
    """
    page.evaluate("() => { window.resized = new Promise(r => addEventListener('resize', () => setTimeout(r, 400),"
                  " {once: true})); }")
    page.set_viewport_size(PHONE)
    page.evaluate("() => window.resized.then(() => new Promise(r => requestAnimationFrame(r)))")


def figure_sections(page) -> dict:
    """The innermost section around each figure of FIGURES_TO_SCREENSHOT on this page, by figure name."""
    return {name: page.locator(f"section:has(#{name})").last
            for name in FIGURES_TO_SCREENSHOT if page.locator(f"#{name}").count()}


def figure_screenshot_path(name: str, screen: str) -> Path:
    return SCREENSHOTS / "figures" / f"{name}-{screen}.jpg"


# While a tall section is captured, the theme's sticky header (and the skip link, if focused) would be
# painted across its middle: they scroll away for the screenshot.
UNSTICK = """(on) => {
  if (document.activeElement) document.activeElement.blur();
  for (const el of document.querySelectorAll('#pst-skip-link, #pst-header, .bd-header-article')) {
    el.style.position = on ? 'static' : '';
    el.style.visibility = on && el.id === 'pst-skip-link' ? 'hidden' : '';
  }
}"""


def screenshot_sections(sections: dict, screen: str) -> None:
    if not sections:
        return
    page = next(iter(sections.values())).page
    page.evaluate(UNSTICK, True)
    for name, section in sections.items():
        figure_screenshot_path(name, screen).parent.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=figure_screenshot_path(name, screen), type="jpeg", quality=90)
    page.evaluate(UNSTICK, False)


@dataclass
class Visit:
    """What one visit of a page found; each test reads its own part."""

    page_path: str
    problems: list[str] = field(default_factory=list)   # console errors, failed or outside requests
    math: dict = field(default_factory=dict)
    broken_images: list[str] = field(default_factory=list)
    solution_error: str | None = None
    images: list[dict] = field(default_factory=list)
    axe: list[dict] = field(default_factory=list)
    text: str = ""
    phone: dict = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)  # on the desktop screen; the phone's are in `phone`
    redirect: bool = False
    url_path: str = ""                                   # where the visit ended (after a redirect)
    sidebar: list[str] = field(default_factory=list)     # the pages the navigation sidebar links
    next_page: str | None = None                         # where the "next" link leads
    error: str | None = None                             # the visit itself failed: every test reports it


# The pages that links lead to, as paths from the site's root.
NAV_TARGETS_JS = "links => links.map(a => new URL(a.getAttribute('href'), location.href).pathname.slice(1))"


def visit_page(tab: PageProblems, server: str, page_path: str) -> Visit:
    visit = Visit(page_path)
    page = tab.fresh().page
    try:
        response = page.goto(server + page_path, wait_until="load")
        assert response is not None and response.ok, f"{page_path}: HTTP {response and response.status}"
        if 'http-equiv="Refresh"' in (SITE / page_path).read_text(encoding="utf-8"):  # index.html -> the root page
            visit.redirect = True
            page.wait_for_url(lambda url: urlsplit(url).path != "/" + page_path)
            page.wait_for_load_state("load")
        visit.url_path = urlsplit(page.url).path.lstrip("/")
        visit.sidebar = page.locator("nav.bd-docs-nav a.reference.internal").evaluate_all(NAV_TARGETS_JS)
        visit.next_page = next(iter(page.locator("a.right-next").evaluate_all(NAV_TARGETS_JS)), None)
        visit.math = typeset_math(page)
        # the explorers (attn_helpers.explorers) draw after the page's load: axe must see them drawn
        page.wait_for_function(ALL_DRAWN_JS, timeout=MATH_TIMEOUT_MS)
        tab.problems += page.locator(".book-explorer[data-error]").evaluate_all(
            "bs => bs.map(b => 'explorer not drawn: ' + b.dataset.error)")
        visit.broken_images = [i["src"] for i in images(page) if i["width"] == 0]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=screenshot_path(page_path), type="jpeg", quality=80)
        if not visit.redirect:
            visit.images = page.evaluate(IMAGES_JS, ARTICLE)
            visit.text = page.evaluate(TEXT_JS, [ARTICLE, SHOWS_MYST_SOURCE])
            add_axe(page, server)
            visit.axe = page.evaluate(AXE_JS, [ARTICLE, THEME_VIOLATIONS, ANY_IMPACT, FORMULA_RULES])
            visit.unreachable = page.evaluate(SCROLL_BOXES_JS, ARTICLE)
            sections = figure_sections(page)
            screenshot_sections(sections, "desktop")
            to_phone(page)
            visit.phone = page.evaluate(OVERFLOW_JS)
            visit.phone["unreachable"] = page.evaluate(SCROLL_BOXES_JS, ARTICLE)
            visit.phone["distorted"] = page.evaluate(DISTORTED_JS, ARTICLE)
            page.screenshot(path=screenshot_path(page_path, "phone"), type="jpeg", quality=80)
            screenshot_sections(sections, "phone")  # the solution drop-down below is tried on the phone screen
        if page_path in CHAPTERS:
            try:
                assert page.locator(".solution.dropdown").count(), \
                    f"{page_path}: exercises should have hidden solutions"
                check_solution_dropdown(page, page_path)
            except AssertionError as e:
                visit.solution_error = str(e)
    except Exception as e:  # noqa: BLE001 - reported by every test of this page
        visit.error = f"{page_path}: the visit failed: {type(e).__name__}: {e}"
    finally:
        visit.problems = list(tab.problems)
    return visit


@pytest.fixture(scope="module")
def visits(shared_tab, server):
    """Each page visited once, on first use; the result is shared by the tests of that page."""
    done: dict[str, Visit] = {}

    def get(page_path: str) -> Visit:
        if page_path not in done:
            done[page_path] = visit_page(shared_tab, server, page_path)
        visit = done[page_path]
        assert visit.error is None, visit.error
        return visit

    return get


PARAMS = PAGES or ["intro.html"]


@pytest.mark.parametrize("page_path", PARAMS)
def test_page_loads_typesets_math_and_shows_images(visits, page_path):
    """Per page: no error, math typeset, images loaded, a screenshot; on chapters, a solution opens on click."""
    visit = visits(page_path)
    math = visit.math
    assert math["typeset"] == math["math"], f"{page_path}: MathJax typeset {math['typeset']} of {math['math']} formulas"
    assert not math["errors"], f"{page_path}: TeX errors {math['errors']}"
    assert not visit.broken_images, f"{page_path}: images that did not load: {visit.broken_images}"
    assert screenshot_path(page_path).stat().st_size > 0
    assert visit.redirect or screenshot_path(page_path, "phone").stat().st_size > 0
    assert visit.solution_error is None, visit.solution_error
    assert not visit.problems, f"{page_path}:\n" + "\n".join(visit.problems)


@pytest.mark.parametrize("page_path", PARAMS)
def test_page_fits_a_phone_screen(visits, page_path):
    """At 390 px nothing makes the page wider than the screen: long words wrap, wide boxes scroll inside."""
    phone = visits(page_path).phone
    if not phone:
        pytest.skip(f"{page_path} redirects to another page")
    assert phone["scrollWidth"] <= phone["innerWidth"], (
        f"{page_path} is {phone['scrollWidth']} px wide on a {phone['innerWidth']} px phone screen; "
        "sticking out:\n  " + "\n  ".join(phone["culprits"] or ["(no single element found)"]))
    assert not phone["unreachable"], (f"{page_path}: boxes that scroll sideways on a phone that keyboard users cannot "
                                      "scroll, or formulas without a name:\n  " + "\n  ".join(phone["unreachable"]))


@pytest.mark.parametrize("page_path", PARAMS)
def test_wide_boxes_scroll_from_the_keyboard_on_a_desktop(visits, page_path):
    """At 1366 px too, every box that scrolls sideways (the widest formulas of chapters 8, 10 and 12) has a tab stop,
    and a formula that scrolls has a name."""
    unreachable = visits(page_path).unreachable
    assert not unreachable, (f"{page_path}: boxes that scroll sideways on a desktop that keyboard users cannot "
                             "scroll, or formulas without a name:\n  " + "\n  ".join(unreachable))


# Article images whose shown shape is not the image's own: a figure narrowed to the phone's width must
# lose height in proportion (an inline height from a 2x figure's metadata must not hold it up).
DISTORTED_JS = """(article) => [...document.querySelectorAll(article + ' img')]
  .filter(i => i.naturalWidth && i.clientWidth && i.clientHeight)
  .filter(i => Math.abs(i.clientWidth / i.clientHeight - i.naturalWidth / i.naturalHeight)
               > 0.03 * i.naturalWidth / i.naturalHeight)
  .map(i => `${i.getAttribute('src')}: shown ${i.clientWidth} x ${i.clientHeight}, `
            + `drawn ${i.naturalWidth} x ${i.naturalHeight}`)"""


@pytest.mark.parametrize("page_path", PARAMS)
def test_images_keep_their_shape_on_a_phone(visits, page_path):
    phone = visits(page_path).phone
    if not phone:
        pytest.skip(f"{page_path} redirects to another page")
    assert not phone["distorted"], f"{page_path}: images squeezed out of shape at 390 px:\n  " + "\n  ".join(
        phone["distorted"])


def alt_text_problem(alt: str | None) -> str | None:
    """Why ``alt`` is not a phrase that says what an image shows, or None when it is one."""
    if not alt or not alt.strip():
        return "no alt text"
    if re.search(r"\.(png|jpe?g|svg|gif|webp)\b", alt, re.IGNORECASE) or "/" in alt.split()[0]:
        return f"alt text is a file name or path: {alt[:80]!r}"
    if re.search(r"[0-9a-f]{16,}", alt, re.IGNORECASE):
        return f"alt text contains a hash: {alt[:80]!r}"
    if len(alt.split()) < 3:
        return f"alt text is not a phrase (fewer than 3 words): {alt!r}"
    return None


@pytest.mark.parametrize("page_path", PARAMS)
def test_article_images_have_phrase_alt_text(visits, page_path):
    """Screen readers read the alt text aloud: it must say what the image shows, not name its file."""
    found = [f"{i['element']}: {p}" for i in visits(page_path).images if (p := alt_text_problem(i["alt"]))]
    assert not found, f"{page_path}: images without a phrase for alt text:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("page_path", PARAMS)
def test_wide_figures_are_shown_large_enough_and_open_full_size(visits, page_path):
    """At 1366 px a figure drawn > 1,000 px wide is shown at >= 0.65 of that width; a click opens the image file."""
    problems = []
    for image in visits(page_path).images:
        if image["intended"] > WIDE_FIGURE_PX and image["shown"] < MIN_SCALE * image["intended"]:
            problems.append(f"{image['element']}: drawn {image['intended']:.0f} px wide, shown at "
                            f"{image['shown']:.0f} px ({image['shown'] / image['intended']:.2f}x < {MIN_SCALE}): "
                            "design it for the ~740 px column (stack panels, fewer labels)")
        if image["inFigure"] and image["href"] != image["file"]:
            problems.append(f"{image['element']}: a click should open the image file {image['file']}, "
                            f"not {image['href']}")
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)


def allowed_theme_violation(violation: dict) -> bool:
    """A violation of THEME_VIOLATIONS (its rule, on an element matching its selector), outside the article."""
    return violation["theme"] is not None and not violation["inArticle"]


@pytest.mark.parametrize("page_path", PARAMS)
def test_no_critical_or_serious_accessibility_violation(visits, page_path):
    """axe-core over the whole page (critical, serious, and ANY_IMPACT rules); only THEME_VIOLATIONS are tolerated."""
    found = [v for v in visits(page_path).axe if not allowed_theme_violation(v)]
    report = [f"{v['impact']} {v['rule']} ({v['help']}) {'in the article' if v['inArticle'] else 'outside it'}: "
              f"{v['element']} [{v['selector']}]" for v in found]
    assert not report, f"{page_path}: axe-core violations:\n  " + "\n  ".join(report)


@pytest.mark.parametrize("page_path", PARAMS)
def test_no_leaked_markup_or_plumbing(visits, page_path):
    """No unrendered role, label, NBVAL marker or doubled "Exercise" in what a reader sees."""
    text = visits(page_path).text
    found = []
    for leak in LEAKS:
        for m in re.finditer(re.escape(leak), text):
            context = " ".join(text[max(m.start() - 50, 0):m.end() + 50].split())
            found.append(f"{leak!r} in: ...{context}...")
    assert not found, f"{page_path} shows markup or plumbing a reader should not see:\n  " + "\n  ".join(found)


def test_the_accessibility_and_leak_checks_can_fail(tab, server):
    """Guard against a vacuous pass: on a page made to break each rule, every check reports it."""
    page = tab.page
    page.goto(server + GUARD_PAGE, wait_until="load")
    page.evaluate("""() => {
        const a = document.querySelector('#main-content article');
        a.insertAdjacentHTML('afterbegin',
          '<p>Exercise Exercise 1.1 {glue:text}`x` <code>a_very_long_identifier_that_never_ends_and_' +
          'keeps_going_on_and_on_and_on_and_on_and_on_and_on_and_on</code></p>' +
          '<div role="list"><div role="doc-biblioentry">x</div></div>' +
          '<table><thead><tr><th></th><th>a</th></tr></thead><tbody><tr><th>x</th><td>1</td></tr></tbody></table>' +
          '<img src="../_images/x.png" alt="../_images/0bda12940178501661d140ea63ef1982.png">');
        a.querySelector('code').style.whiteSpace = 'pre';
        a.querySelector('code').style.overflowWrap = 'normal';
    }""")
    text = page.evaluate(TEXT_JS, [ARTICLE, SHOWS_MYST_SOURCE])
    assert "Exercise Exercise" in text and "{glue" in text
    add_axe(page, server)
    rules = {v["rule"] for v in page.evaluate(AXE_JS, [ARTICLE, THEME_VIOLATIONS, ANY_IMPACT, FORMULA_RULES])
             if v["inArticle"]}
    assert {"aria-required-children", "empty-table-header"} <= rules, rules
    alts = [alt_text_problem(i["alt"]) for i in page.evaluate(IMAGES_JS, ARTICLE)]
    assert any(a and "file name" in a for a in alts)
    to_phone(page)
    phone = page.evaluate(OVERFLOW_JS)
    page.set_viewport_size(DESKTOP)
    assert phone["scrollWidth"] > phone["innerWidth"] and any("code" in c for c in phone["culprits"]), phone


# A page with display formulas wider than a desktop's column (equations 10.2 and 12.3 among them).
WIDE_FORMULAS_PAGE = "chapters/10_flash_attention.html"


def test_the_keyboard_checks_fail_without_scroll_boxes_js(tab, server):
    """Guard against a vacuous pass. Served without _static/scroll_boxes.js (an empty script in its place), a page
    whose formulas scroll fails the check: MathJax gives each formula a tab stop of its own (its menu's "include in
    tab order", which a reader can switch off), but no name. With those tab stops taken away as well, the check and
    axe-core's scrollable-region-focusable both report the formulas. With the script, every formula that scrolls
    has a tab stop and its name, "Equation (10.2), scrolls sideways", and nothing is reported."""
    page = tab.page
    page.route("**/_static/scroll_boxes.js*", lambda route: route.fulfill(body="", content_type="text/javascript"))
    try:
        page.goto(server + WIDE_FORMULAS_PAGE, wait_until="load")
        typeset_math(page)
        unnamed = page.evaluate(SCROLL_BOXES_JS, ARTICLE)
        page.evaluate("() => document.querySelectorAll('mjx-container').forEach(f => f.removeAttribute('tabindex'))")
        unreachable = page.evaluate(SCROLL_BOXES_JS, ARTICLE)
        add_axe(page, server)
        rules = {v["rule"] for v in page.evaluate(AXE_JS, [ARTICLE, THEME_VIOLATIONS, ANY_IMPACT, FORMULA_RULES])}
    finally:
        page.unroute("**/_static/scroll_boxes.js*")
    assert unnamed and all("mjx-container" in box and "without a name" in box for box in unnamed), unnamed
    assert unreachable and all("mjx-container" in box and "no tab stop" in box for box in unreachable), unreachable
    assert "scrollable-region-focusable" in rules, rules
    page.goto(server + WIDE_FORMULAS_PAGE, wait_until="load")
    typeset_math(page)
    names = page.evaluate("() => [...document.querySelectorAll('.bd-article mjx-container[role=group]')]"
                          ".map(f => [f.getAttribute('tabindex'), f.getAttribute('aria-label')])")
    assert len(names) >= len(unnamed), names
    assert all(tabindex == "0" and re.fullmatch(r"Equation( \(\d+\.\d+\))?, scrolls sideways", name)
               for tabindex, name in names), names
    assert not page.evaluate(SCROLL_BOXES_JS, ARTICLE)


def test_a_request_to_another_host_is_reported(tab, server):
    """The offline rule can fail: a page that loads an image from elsewhere is reported."""
    tab.page.goto(server + GUARD_PAGE, wait_until="load")
    with tab.page.expect_request("http://example.org/figure.png"):  # the tab's own listener runs first
        tab.page.evaluate("() => { const i = new Image(); i.src = 'http://example.org/figure.png'; }")
    assert any("another host" in p and "example.org/figure.png" in p for p in tab.problems), tab.problems


def test_search_snippets_show_formulas_as_text(tab, server):
    """Search results: the snippet under each hit has no TeX source such as \\(d^{1/4}\\) or \\sqrt."""
    page = tab.page
    page.goto(server + "search.html?q=scores", wait_until="load")
    page.wait_for_selector("#search-results ul.search li p.context", timeout=MATH_TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('#search-progress')?.textContent.trim()"
                           " || document.querySelectorAll('#search-results p.context').length > 3",
                           timeout=MATH_TIMEOUT_MS)
    snippets = page.locator("#search-results p.context").all_inner_texts()
    assert snippets, "the search for 'scores' found nothing"
    tex = [s for s in snippets if re.search(r"\\[()\[\]]|\\[A-Za-z]+|\$\$", s)]
    assert not tex, "search snippets with TeX source:\n" + "\n".join(tex)
    # not vacuous: on a chapter's HTML, Sphinx's own function returns TeX, and the book's does not
    raw, clean = page.evaluate("""async (url) => {
        const html = await (await fetch(url)).text();
        return [Search.htmlToTextWithTeX(html, ''), Search.htmlToText(html, '')];
    }""", server + CHAPTERS[1])
    assert "\\(" in raw and "\\(" not in clean and "\\sqrt" not in clean
    assert not tab.problems, "\n".join(tab.problems)


def test_sections_of_the_widest_figures_screenshots(visits):
    """Desktop and phone screenshots of the sections holding the widest figures, to look at (taken by the visits)."""
    for name in FIGURES_TO_SCREENSHOT:
        chapter = next((c for c in CHAPTERS if f'id="{name}"' in (SITE / c).read_text(encoding="utf-8")), None)
        assert chapter, f"no chapter page has the figure {name}: update FIGURES_TO_SCREENSHOT in {Path(__file__).name}"
        visits(chapter)
        for screen in ("desktop", "phone"):
            path = figure_screenshot_path(name, screen)
            assert path.is_file() and path.stat().st_size > 0, f"no screenshot {path}"


def test_chapter_pages_contain_typeset_math_and_figures(visits):
    """Guard against a vacuous pass: the chapters do have formulas and figures, and they render (read from the
    visit of the first chapter: each formula holds MathJax's output, each figure has loaded)."""
    visit = visits(CHAPTERS[0])
    assert visit.math["math"] > 0 and visit.math["typeset"] == visit.math["math"]
    figures = [i for i in visit.images if i["src"] and "_images/" in i["src"]]
    assert figures and all(i["natural"] > 0 for i in figures)
    assert not visit.broken_images and not visit.problems, visit.problems


def test_navigation_reaches_every_chapter(visits):
    """The sidebar links every page of _toc.yml, and following "next" from the first page visits them in order.

    The site's address (index.html) leads to the first page; each visit recorded its page's links.
    """
    first = visits("index.html")
    assert first.redirect and first.url_path == toc_pages()[0], f"index.html leads to {first.url_path}"
    missing = [p for p in toc_pages()[1:] if p not in first.sidebar]
    assert not missing, f"the navigation sidebar does not link {missing}"
    visited = [first.url_path]
    while (following := visits(visited[-1]).next_page) is not None:
        visited.append(following)
        assert len(visited) <= len(toc_pages()) + 1, f"'next' links loop: {visited}"
    assert visited == toc_pages(), "following 'next' from the first page should visit the _toc.yml pages in order"
    assert set(CHAPTERS) <= set(visited)
