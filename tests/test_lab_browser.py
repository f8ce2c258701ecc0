"""The learners' path in the real thing: chapter 1's edition in the learners' JupyterLab, run in headless Chromium.

One test, as a learner meets the book after `make lab`: JupyterLab starts from the book's environment, with the
learners' settings (scripts/lab.py: no nbgrader, no jupyterlab-myst), on 127.0.0.1, a free port and a token, in
a temporary folder that holds a fresh edition of chapter 1 (scripts/make_editions.py) in which the learner has
typed a wrong answer to the last exercise. It opens the notebook, runs all cells from the Run menu, and asserts
what the learner sees: the prose without MyST syntax and with the glued numbers; figure and equation numbers as
on the website (each equation numbered once); the solutions folded; the checks under the untouched answer cells
saying that they checked the book's solution; no nbgrader Validate button; and the
failed check as one short message: its hint, and no traceback line, no line of attn_helpers/checks.

The failed check's form comes from attn_helpers/checks (CheckFailed renders through IPython's
``_render_traceback_``). Needs /usr/bin/chromium (`apt-get install -y chromium`); without it the test skips,
or fails when $CI is set. It takes about 15-30 s, most of it JupyterLab's start and the chapter's run.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
import torch
from book_editions.learners import as_text, learner_edition  # noqa: E402
from book_editions.plain_markdown import ChapterText  # noqa: E402
from built_site import ROOT, skip_or_fail
from lab import lab_command, lab_env  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHAPTER = ROOT / "chapters" / "01_weighted_average.ipynb"
# The learner's answer to the last exercise of chapter 1: a softmax over the wrong dimension.
WRONG = ("Xb = Xs.transpose(0, 1)\n"
         "Wb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=1)\n"
         "Ys = torch.bmm(Wb, Xb).transpose(0, 1)")
LEAKS = ("{glue", "{numref", "{eq}", "{cite", "{ref}", "{doc}", ":label:", "```{", "{exercise}", "{solution")
# JupyterLab's own settings for this test only: every cell in the page (not only those scrolled into view), and
# no pop-up asking about news.
SETTINGS = {"@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"}}
TIMEOUT_MS = 90_000


DESKTOP = {"width": 1366, "height": 900}


@contextlib.contextmanager
def desktop_page(playwright, viewport: dict[str, int] = DESKTOP) -> Iterator:  # noqa: ANN001
    """A page of 1366 x 900 (or ``viewport``) in Debian's Chromium, closed with its browser when the block ends."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
    try:
        yield browser.new_page(viewport=viewport)
    finally:
        browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def learners_lab(tmp_path: Path, notebooks: dict[str, str], settings: dict | None = None) -> Iterator[tuple[str, str]]:
    """The learners' JupyterLab serving a folder that holds ``notebooks`` (name -> text), with ``settings`` (file ->
    value) besides the test's own; yields (base URL, token)."""
    if not CHROMIUM.is_file():
        skip_or_fail(f"The JupyterLab browser test needs Debian's Chromium at {CHROMIUM}: apt-get install -y chromium")
    folder = tmp_path / "my-notebooks"
    folder.mkdir()
    for name, text in notebooks.items():
        (folder / name).write_text(text, encoding="utf-8")
    for name, value in {**SETTINGS, **(settings or {})}.items():
        (tmp_path / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "settings" / name).write_text(json.dumps(value))
    port, token = free_port(), secrets.token_hex(16)
    env = {**lab_env(), "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "run")}
    command = lab_command(folder, "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                          f"--IdentityProvider.token={token}", f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
                          f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.2)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def lab(tmp_path):
    """The learners' JupyterLab with chapter 1's edition, a wrong answer typed in; yields (base URL, token, edition)."""
    nb = learner_edition(CHAPTER)
    answers = [c for c in nb.cells if c.id.endswith("-answer-code")]
    answers[-1].source = WRONG
    with learners_lab(tmp_path, {CHAPTER.name: as_text(nb)}) as (base, token):
        yield base, token, nb


def test_a_learner_runs_chapter_1_in_jupyterlab(lab):
    base, token, nb = lab
    from playwright.sync_api import sync_playwright

    text = ChapterText.of(nbformat.read(CHAPTER, as_version=4), CHAPTER)
    equations = sorted(t.number for t in text.targets.values() if t.kind == "equation")
    with sync_playwright() as playwright:
        with desktop_page(playwright) as page:
            page.goto(f"{base}/lab/tree/{CHAPTER.name}?token={token}")
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=TIMEOUT_MS)
            # Let the notebook settle (its markdown rendered, its folds applied) as a learner's first read does:
            # Run All clicked in the very first second can leave cells after a folded section unexecuted.
            page.wait_for_function("() => document.querySelectorAll('.jp-showHiddenCellsButton').length >= 3",
                                   timeout=TIMEOUT_MS)
            page.wait_for_timeout(1500)
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
            check = page.locator(".jp-CodeCell", has_text="check.sequence_first_attention(Wb, Ys)")
            error = check.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            error.wait_for(timeout=TIMEOUT_MS)
            notebook = page.locator(".jp-Notebook")
            seen = notebook.inner_text()
            math = page.evaluate("() => [...document.querySelectorAll('.jp-MarkdownOutput mjx-container')]"
                                 ".map(e => e.textContent)")
            message = error.inner_text().strip()
            hidden_answer = page.locator(".jp-CodeCell", has_text="q_doubled = torch.tensor").first
            solution_folded = not hidden_answer.is_visible()
            validate = page.locator("button", has_text="Validate").count()

    leaks = [leak for leak in LEAKS if leak in seen]
    assert not leaks, f"MyST syntax reaches the learner: {leaks}"
    assert "a weight of 0.8808 and the second" in seen, "a glued number is not shown as its value"
    assert "Each row of Figure 1.1 sums to one" in seen and "Figure 1.1: Each row shows" in seen
    tags = [n for m in math for n in re.findall(r"\((\d+(?:\.\d+)?)\)", m)]
    assert sorted(set(tags)) == equations and len(tags) == len(equations), \
        f"equation numbers {tags}; the website numbers {equations}, each once"
    assert solution_folded and "tensor([0.9820, 0.0180])" not in seen, "the solution of Exercise 1.1 is in view"
    folds = re.findall(r"Solution to Exercise (\d\.\d)\n\d+ cells? hidden\n", seen)
    assert folds == ["1.1", "1.2", "1.3"], f"solutions in view: {folds} of 1.1, 1.2, 1.3 are folded"
    # Run All ran the folded solutions of 1.1 and 1.2 under their untouched answer cells: their checks say so
    assert seen.count("is not answered yet: this checked the book's folded solution") == 2, \
        "a check under an empty answer cell reads as the learner's success"
    assert "✓ W: correct (the book's solution)" in seen and "✓ W: correct\n" not in seen
    assert validate == 0, "nbgrader's Validate button is in the learners' JupyterLab"
    lines = [line for line in message.splitlines() if line.strip()]
    assert "softmax" in message and "dim" in message, f"the failed check gives no hint: {message!r}"
    code = [line for line in lines if re.match(r"\s*(-*>\s*)?\d+\s", line)]  # numbered source lines of a traceback
    assert lines[0].startswith("CheckFailed") and len(lines) <= 6 and not code and not any(
        w in message for w in ("Traceback", "File ", "attn_helpers", "-----", "expected_W")), \
        f"the failed check shows more than its message (what is wrong and the hint):\n{message}"


def api(base: str, token: str, path: str) -> list:
    request = urllib.request.Request(f"{base}/api/{path}", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or "[]")


def wait_for_session(base: str, token: str) -> None:
    """Wait until the opened notebook's kernel session exists."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not api(base, token, "sessions"):
        if time.monotonic() > deadline:
            pytest.fail("the opened notebook started no kernel session")
        time.sleep(0.2)


EXPLORER_CHAPTER = ROOT / "chapters" / "02_scaling.ipynb"


@pytest.mark.parametrize("interface", ["lab", "notebooks"])
def test_an_explorer_moves_in_jupyter_without_running_a_cell(tmp_path, interface):
    """Chapter 2's temperature explorer, from the edition's saved output, in JupyterLab and in Jupyter Notebook 7
    (a plain notebook interface, as Colab is): no kernel runs, the keyboard moves the slider (arrow keys, Home,
    End) while the arrow keys still move between cells, and the weights shown equal ``temperature_view``'s to 1e-6
    at each temperature."""
    from explorer_browser import labels, labels_after, press, temperature_shown, value_of

    slider = "log₁₀ of temperature T"

    def weights_shown(explorer) -> list[float]:
        return temperature_shown(labels(explorer))["weights"]
    from playwright.sync_api import sync_playwright

    import attn_helpers as ah

    scores = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0], dtype=torch.float64)  # chapter 2's row of scores
    edition = as_text(learner_edition(EXPLORER_CHAPTER))
    with learners_lab(tmp_path, {EXPLORER_CHAPTER.name: edition}) as (base, token), sync_playwright() as playwright:
        with desktop_page(playwright) as page:
            page.goto(f"{base}/{interface}/tree/{EXPLORER_CHAPTER.name}?token={token}" if interface == "lab"
                      else f"{base}/notebooks/{EXPLORER_CHAPTER.name}?token={token}")
            explorer = page.locator(".jp-RenderedVegaLite").first
            explorer.locator("svg").wait_for(timeout=TIMEOUT_MS)
            # Jupyter starts a kernel for an opened notebook: the learner shuts it down from the Kernel menu, to show
            # that the explorer needs none.
            wait_for_session(base, token)
            page.click(".lm-MenuBar-itemLabel:text-is('Kernel')")
            page.click(".lm-Menu-itemLabel:text-is('Shut Down Kernel')")
            page.wait_for_selector("text=No Kernel", timeout=TIMEOUT_MS)  # the notebook's toolbar says so
            shown = {10 ** value_of(explorer, slider): weights_shown(explorer)}
            # The arrow keys move the focused slider (the learners' lab keeps them from JupyterLab's moving between
            # cells there, scripts/learners_lab/settings), as do Home and End.
            for key, times in (("ArrowRight", 10), ("End", 1), ("Home", 1)):
                before = labels(explorer)
                press(explorer, slider, key, times)
                labels_after(explorer, before)
                shown[10 ** value_of(explorer, slider)] = weights_shown(explorer)
            # ...and between cells, the arrow keys still move from one cell to the next
            page.locator(".jp-Cell").nth(3).click(position={"x": 5, "y": 5})
            page.keyboard.press("Escape")
            active = ("() => [...document.querySelectorAll('.jp-Cell')]"
                      ".findIndex(c => c.classList.contains('jp-mod-active'))")
            before_move = page.evaluate(active)
            page.keyboard.press("ArrowDown")
            page.wait_for_function(f"() => ({active})() === {before_move + 1}", timeout=TIMEOUT_MS)
            kernels = len(api(base, token, "kernels"))
    assert sorted(shown) == pytest.approx([0.1, 1.0, 10 ** 0.1, 10.0])  # the slider moves log₁₀ T
    for T, weights in shown.items():
        assert weights == pytest.approx(ah.explorers.temperature_view(scores, T)["weights"], abs=1e-6), f"T = {T}"
    assert kernels == 0, "a kernel was running while the explorer moved"


# Chapter 10's tile walk (the explorer issue 49 found with its top cut off on a phone) and chapter 11's two.
CONTROLS_CHAPTERS = [ROOT / "chapters" / "10_flash_attention.ipynb", ROOT / "chapters" / "11_longer_than_trained.ipynb"]
# The explorers in view, drawn: each with its controls (Vega's bindings) and its chart (the svg Vega draws).
DRAWN = ("[...document.querySelectorAll('.jp-RenderedVegaLite')].filter(o => o.checkVisibility() && "
         "o.querySelector('.vega-bindings') && o.querySelector('.vega-embed > svg, .vega-embed > canvas'))")
# ...and where each one's controls and chart lie on the page, as [top, bottom].
CONTROLS_AND_CHART = f"""() => {DRAWN}.map(output => {{
    const span = e => [e.getBoundingClientRect().top, e.getBoundingClientRect().bottom];
    return {{controls: span(output.querySelector('.vega-bindings')),
             chart: span(output.querySelector('.vega-embed > svg, .vega-embed > canvas'))}};
}})"""


def vega_outputs(path: Path) -> int:
    """How many Vega-Lite outputs (explorers) the chapter's learners' edition holds."""
    return sum(any(t.startswith("application/vnd.vegalite") for t in out.get("data", {}))
               for cell in learner_edition(path).cells for out in cell.get("outputs", []))


def test_an_explorers_controls_are_above_its_chart(tmp_path):
    """On a 390-px phone and on a desktop, every explorer of chapters 10 and 11 has its controls above its chart, as
    on the website, so that a control and what it moves are in view together. JupyterLab's Vega renderer puts
    them under the chart; the learners' lab's CSS (scripts/learners_lab/custom/custom.css) moves them."""
    from explorer_browser import PHONE
    from playwright.sync_api import sync_playwright

    explorers = {path.name: vega_outputs(path) for path in CONTROLS_CHAPTERS}
    editions = {path.name: as_text(learner_edition(path)) for path in CONTROLS_CHAPTERS}
    seen = {}
    with learners_lab(tmp_path, editions) as (base, token), sync_playwright() as playwright:
        for screen, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
            with desktop_page(playwright, viewport) as page:
                for name, count in explorers.items():
                    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")  # (reset: this notebook alone)
                    page.wait_for_function(f"() => {DRAWN}.length >= {count}", timeout=TIMEOUT_MS)
                    seen[screen, name] = page.evaluate(CONTROLS_AND_CHART), viewport["height"]
    for (screen, name), (shown, height) in seen.items():
        assert len(shown) == explorers[name], f"{name} on a {screen}: {len(shown)} explorers, not {explorers[name]}"
        for n, explorer in enumerate(shown, 1):
            (controls_top, controls_bottom), (chart_top, _) = explorer["controls"], explorer["chart"]
            where = f"{name}'s explorer {n} on a {screen}"
            assert controls_bottom <= chart_top, (f"{where}: its controls ({controls_top:.0f}-{controls_bottom:.0f} px)"
                                                  f" are not above its chart (from {chart_top:.0f} px)")
            assert chart_top - controls_top < height, f"{where}: its controls and its chart's top are not in one screen"



FIT_CHAPTERS = [*CONTROLS_CHAPTERS, ROOT / "chapters" / "12_cost_of_the_cache.ipynb"]
# Each explorer in view: its chart's box, the width Vega drew it at, and the right edge of what the notebook shows
# (its output area, within the notebook's scrolling panel, scroll bar excluded).
CHART_AND_ROOM = f"""() => {DRAWN}.map(output => {{
    const svg = output.querySelector('.vega-embed > svg');
    const panel = output.closest('.jp-WindowedPanel-outer, .jp-Notebook');
    const room = Math.min(output.closest('.jp-OutputArea-output').getBoundingClientRect().right,
                          panel.getBoundingClientRect().left + panel.clientWidth, innerWidth);
    return {{left: svg.getBoundingClientRect().left, right: svg.getBoundingClientRect().right, room,
             shown: svg.getBoundingClientRect().width, drawn: Number(svg.getAttribute('width'))}};
}})"""


def test_an_explorer_fits_its_output_and_its_sliders_line_up(tmp_path):
    """The explorers of chapters 10, 11 and 12 in the learners' JupyterLab (its file browser closed, as a learner on
    a phone closes it) and in Notebook 7, on a 390-px phone and on a desktop: each chart ends within what the
    notebook shows (at 390 px JupyterLab leaves an output about 270 px wide, and cut off chapter 10's explorer and
    the others' right sides), scaled down only where it must be, drawn at its own size on a desktop; each control's
    name on one line and each slider's value on its line, and the sliders of an explorer lined up (chapter 11's
    were 18 px apart, their names being of different lengths; chapter 12's value went to a line of its own)."""
    from explorer_browser import PHONE, controls_problems
    from playwright.sync_api import sync_playwright

    explorers = {path.name: vega_outputs(path) for path in FIT_CHAPTERS}
    editions = {path.name: as_text(learner_edition(path)) for path in FIT_CHAPTERS}
    seen, problems = {}, []
    with learners_lab(tmp_path, editions) as (base, token), sync_playwright() as playwright:
        for screen, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
            with desktop_page(playwright, viewport) as page:
                for interface in ("lab", "notebooks"):
                    for name, count in explorers.items():
                        page.goto(f"{base}/lab/tree/{name}?reset&token={token}" if interface == "lab"
                                  else f"{base}/notebooks/{name}?token={token}")
                        page.wait_for_function(f"() => {DRAWN}.length >= {count}", timeout=TIMEOUT_MS)
                        if interface == "lab" and page.locator(".jp-FileBrowser").is_visible():
                            page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click()
                            page.locator(".jp-FileBrowser").wait_for(state="hidden", timeout=TIMEOUT_MS)
                        page.wait_for_timeout(500)  # the notebook laid out again at its new width
                        where = f"{name} in {interface} on a {screen}"
                        seen[where] = page.evaluate(CHART_AND_ROOM)
                        for n, output in enumerate(page.locator(".jp-RenderedVegaLite:has(.vega-bindings)").all(), 1):
                            problems += [f"{where}, explorer {n}: {p}" for p in controls_problems(output)]
    for where, charts in seen.items():
        assert len(charts) == explorers[where.split(" ")[0]], where
        for n, chart in enumerate(charts, 1):
            assert chart["right"] <= chart["room"] + 0.5, \
                f"{where}: explorer {n} reaches {chart['right']:.0f} px, past the {chart['room']:.0f} px shown"
            if "desktop" in where:
                assert chart["shown"] == pytest.approx(chart["drawn"], abs=0.5), f"{where}: explorer {n} scaled"
            else:
                assert chart["shown"] >= 0.75 * chart["drawn"], f"{where}: explorer {n} shrunk below 3/4"
    assert not problems, problems

# The WCAG contrast of every text of an explorer against its background, in the browser: [text, ratio] each.
TEXT_CONTRASTS = """svg => {
    const rgb = c => (c.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
    const luminance = c => rgb(c).map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
        .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    let drawnOn = svg;  // Vega paints the background as the svg's own background colour; else an ancestor's shows
    while (drawnOn.parentElement && /^rgba\\(.*, 0\\)$|^transparent$/.test(getComputedStyle(drawnOn).backgroundColor)) {
        drawnOn = drawnOn.parentElement;
    }
    const background = getComputedStyle(drawnOn).backgroundColor;
    return [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => {
        const [a, b] = [luminance(getComputedStyle(t).fill), luminance(background)].sort((x, y) => y - x);
        return [t.textContent, (a + 0.05) / (b + 0.05)];
    });
}"""


def test_an_explorer_reads_in_jupyterlabs_dark_theme(tmp_path):
    """With JupyterLab's dark theme, vega-embed's dark theme paints the background #333 and would leave the
    explorers' own text black on it; the explorer's light colours are its own, so every text keeps a contrast of
    at least 4.5 (WCAG AA) with the background it is drawn on."""
    from playwright.sync_api import sync_playwright

    dark = {"@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": "JupyterLab Dark"}}
    edition = as_text(learner_edition(EXPLORER_CHAPTER))
    with (learners_lab(tmp_path, {EXPLORER_CHAPTER.name: edition}, dark) as (base, token),
          sync_playwright() as playwright, desktop_page(playwright) as page):
        page.goto(f"{base}/lab/tree/{EXPLORER_CHAPTER.name}?token={token}")
        svg = page.locator(".jp-RenderedVegaLite svg").first
        svg.wait_for(timeout=TIMEOUT_MS)
        theme = page.evaluate("() => document.body.dataset.jpThemeLight")
        contrasts = svg.evaluate(TEXT_CONTRASTS)
    assert theme == "false", "JupyterLab did not start in its dark theme"
    assert len(contrasts) > 10, contrasts
    low = [(text, round(ratio, 2)) for text, ratio in contrasts if ratio < 4.5]
    assert not low, f"texts of the explorer hard to read in JupyterLab's dark theme: {low}"


SOLUTIONS_CHAPTER = ROOT / "chapters" / "05_multi_head.ipynb"  # solutions with code, outputs and prose
SOLUTION_CELLS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(c => ({
    solution: c.textContent.includes("The book's solution to Exercise"),
    heading: [...c.querySelectorAll('.jp-RenderedMarkdown h4')]
        .some(h => h.textContent.startsWith('Solution to Exercise')),
    folded: c.querySelector('.jp-showHiddenCellsButton') !== null,  // "3 cells hidden", under a folded heading
    editor: [...c.querySelectorAll('.jp-InputArea-editor')].some(e => e.checkVisibility()),
    output: [...c.querySelectorAll('.jp-OutputArea-output')].some(e => e.checkVisibility()),
    open: c.querySelectorAll('details[open]').length}))"""


def solutions_in_view(page) -> tuple[list[str], int]:
    """What of the solutions a learner sees: (one line per solution cell whose code or output is in view, or
    whose written solution is open; the number of "Solution to Exercise" headings folded)."""
    cells = page.evaluate(SOLUTION_CELLS)
    shown = [f"cell {i}: {'code ' if c['editor'] else ''}{'output ' if c['output'] else ''}"
             f"{'prose' if c['open'] else ''}" for i, c in enumerate(cells)
             if (c["solution"] and (c["editor"] or c["output"])) or c["open"]]
    return shown, sum(c["heading"] and c["folded"] for c in cells)


@pytest.mark.parametrize("interface", ["lab", "notebooks"])
def test_solutions_stay_hidden_however_the_chapter_is_run(tmp_path, interface):
    """Chapter 5's edition in JupyterLab and in Notebook 7: Run All leaves every solution folded, and so does
    stepping through the whole chapter with Shift+Enter (the toolbar's run button runs the same command), which
    makes each cell in turn the active one, and so unfolds each solution's heading (JupyterLab does so for an
    active cell under a folded heading): every solution's code and output stay out of view, and its written
    solution closed, until the learner opens them."""
    from playwright.sync_api import sync_playwright

    nb = learner_edition(SOLUTIONS_CHAPTER)
    exercises = sum(c.cell_type == "markdown" and c.source.startswith("#### Solution to Exercise") for c in nb.cells)
    with learners_lab(tmp_path, {SOLUTIONS_CHAPTER.name: as_text(nb)}) as (base, token), \
            sync_playwright() as playwright:
        with desktop_page(playwright) as page:
            page.goto(f"{base}/lab/tree/{SOLUTIONS_CHAPTER.name}?token={token}" if interface == "lab"
                      else f"{base}/notebooks/{SOLUTIONS_CHAPTER.name}?token={token}")
            wait_for_session(base, token)
            page.wait_for_function(f"() => document.querySelectorAll('.jp-showHiddenCellsButton').length >= "
                                   f"{exercises}", timeout=TIMEOUT_MS)
            page.wait_for_timeout(1500)  # as in the test above: the notebook settled before Run All
            page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
            last_check = page.locator(".jp-CodeCell", has_text="check.multi_head_function(multi_head_by_hand)")
            last_check.locator(".jp-OutputArea-output").first.wait_for(timeout=TIMEOUT_MS)
            after_run_all = solutions_in_view(page)
            # then cell by cell from the top, as a learner steps through: Shift+Enter on each cell in turn
            page.locator(".jp-Cell").first.click(position={"x": 5, "y": 5})
            page.keyboard.press("Escape")
            cells = page.locator(".jp-Cell").count()
            for _ in range(cells):
                page.keyboard.press("Shift+Enter")
            page.wait_for_function(f"() => [...document.querySelectorAll('.jp-Cell')].findIndex(c => "
                                   f"c.classList.contains('jp-mod-active')) >= {cells - 1}", timeout=TIMEOUT_MS)
            last_check.locator(".jp-OutputArea-output", has_text="correct").first.wait_for(timeout=TIMEOUT_MS)
            page.wait_for_function("() => ![...document.querySelectorAll('.jp-InputPrompt')]"
                                   ".some(p => p.textContent.includes('*'))", timeout=TIMEOUT_MS)
            after_stepping = solutions_in_view(page)
            seen = page.locator(".jp-Notebook").inner_text()
    assert after_run_all == ([], exercises), f"after Run All, solutions in view: {after_run_all}"
    shown, _ = after_stepping  # (the headings unfold: JupyterLab unfolds the heading of the active cell)
    assert not shown, f"after Shift+Enter through the chapter, solutions in view: {shown}"
    solutions = [cell for cell in nb.cells if "solution" in cell.metadata.get("tags", [])]
    elsewhere = "\n".join(cell.source + "".join(out.get("text", "") for out in cell.get("outputs", []))
                          for cell in nb.cells if cell not in solutions)
    for cell in solutions:  # no line of a solution's code or output (but those the chapter has elsewhere)
        printed = [line for out in cell.outputs for line in out.get("text", "").splitlines()]
        lines = cell.source.splitlines()[1:] + printed
        shown = [line for line in lines if len(line.strip()) > 12 and line.strip() in seen and line not in elsewhere]
        assert not shown, f"in view: {shown}"
    assert "The single head looks back" not in seen, "the written solution of Exercise 5.4 is in view"
