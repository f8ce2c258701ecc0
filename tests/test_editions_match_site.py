"""The editions' numbers are the website's: for each chapter, the numbers that book_editions/numbering.py gives
its figures, labelled equations and exercises, and the glued values and citations that
book_editions/plain_markdown.py writes, are those the built website prints (``_build/html``, as `make build-strict`
leaves it; BOOK_HTML points elsewhere).

The editions resolve MyST themselves rather than take the text from Sphinx's build (CONTRIBUTING.md, "Adding an
edition", says why); this test is what holds the two resolvers to the same numbers.
"""

import html
import re

import nbformat
import pytest
from book_chapters import CHAPTERS, ROOT
from book_editions.myst_syntax import ROLE_RE
from book_editions.plain_markdown import ChapterText
from built_site import require_site

CAPTION_NUMBER = re.compile(r'<span class="caption-number">(?P<kind>Fig\.|Exercise) (?P<number>[\d.]+) </span>')
FIGURE_ID = re.compile(r'<figure[^>]*\bid="(?P<id>[^"]+)"')
EXERCISE_ID = re.compile(r'<div class="exercise admonition" id="(?P<id>[^"]+)"')
EQUATION = re.compile(r'id="equation-(?P<id>[^"]+)">\s*<span class="eqno">\((?P<number>[\d.]+)\)')
PASTED_TEXT = re.compile(r'<span class="pasted-text">(?P<value>.*?)</span>', re.DOTALL)
CITATION = re.compile(r'<span class="bibtex-citation"[^>]*>(?P<value>.*?)</span>', re.DOTALL)


def html_id(label: str) -> str:
    """The id Sphinx gives a label in HTML: lower case, each run of other characters one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def site_numbers(page: str) -> dict[tuple[str, str], str]:
    """``{(kind, html id): number}`` of the figures, exercises and labelled equations a chapter's page prints."""
    found = {}
    for m in CAPTION_NUMBER.finditer(page):
        before = page[:m.start()]
        pattern, kind = (FIGURE_ID, "figure") if m.group("kind") == "Fig." else (EXERCISE_ID, "exercise")
        opened = list(pattern.finditer(before))
        found[kind, opened[-1].group("id")] = m.group("number")  # the caption of the last figure (exercise) opened
    for m in EQUATION.finditer(page):
        found["equation", m.group("id")] = m.group("number")
    return found


def resolved(nb: nbformat.NotebookNode, text: ChapterText, kinds: tuple[str, ...]) -> list[str]:
    """What the editions write for the chapter's roles of ``kinds`` (``glue:text``; ``cite:t``, ...), in the order
    of its markdown cells and figure captions."""
    values = []
    for cell in nb.cells:
        source = (cell.source if cell.cell_type == "markdown"
                  else str(cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", "")))
        values += [text.role(m.group("role"), m.group("content")) for m in ROLE_RE.finditer(source)
                   if m.group("role") in kinds]
    return values


def shown(pattern: re.Pattern, page: str) -> list[str]:
    """The text of each match of ``pattern`` in ``page``, as a reader sees it (tags dropped, entities read)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", m.group("value"))) for m in pattern.finditer(page)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_the_editions_numbers_and_glued_values_are_the_websites(chapter):
    page = (require_site() / "chapters" / f"{chapter.stem}.html").read_text(encoding="utf-8")
    nb = nbformat.read(chapter, as_version=4)
    text = ChapterText.of(nb, chapter, ROOT)
    ours = {(t.kind, html_id(label)): t.number for label, t in text.targets.items() if t.kind != "section"}
    theirs = site_numbers(page)
    differ = {key: (ours.get(key), theirs.get(key)) for key in ours.keys() | theirs.keys()
              if ours.get(key) != theirs.get(key)}
    assert not differ, (f"{chapter.name}: the editions number these differently from the website "
                        f"((kind, id): (editions' number, website's number)): {differ}")
    for what, ours_values, site_values in [
            ("glued values", resolved(nb, text, ("glue:text",)), shown(PASTED_TEXT, page)),
            ("citations", resolved(nb, text, ("cite", "cite:p", "cite:ps", "cite:t", "cite:ts")),
             shown(CITATION, page))]:
        pairs = [(a, b) for a, b in zip(ours_values, site_values, strict=False) if a != b]
        assert ours_values == site_values, (f"{chapter.name}: the editions' {what} differ from the website's "
                                            f"((editions', website's), the first five): {pairs[:5]}; "
                                            f"{len(ours_values)} here, {len(site_values)} there")
