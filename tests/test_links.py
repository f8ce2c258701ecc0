"""Internal link check of the built website: every internal href and src resolves to a file, and every
#fragment to an element with that id on the target page. External links are not followed (offline).
Also from the built pages: launch buttons lead to real services only, and citations agree with the
bibliography's labels."""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
from built_site import ROOT, SITE, html_pages, require_site, toc_pages

LINK_ATTRIBUTES = {"href", "src", "poster", "data"}
EXTERNAL_SCHEMES = {"http", "https", "mailto", "javascript", "data", "tel", "ftp"}


class PageParser(HTMLParser):
    """Collects the ids (and anchor names) a page defines and the URLs it links to, with line numbers."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[int, str, str]] = []  # (line, tag, url)
        self.refresh: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v for k, v in attrs if v is not None}
        if "id" in values:
            self.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.ids.add(values["name"])
        if tag == "meta" and values.get("http-equiv", "").lower() == "refresh":
            self.refresh = values.get("content", "").partition("url=")[2].strip() or None
        if tag == "meta":
            return
        for name in LINK_ATTRIBUTES & values.keys():
            self.links.append((self.getpos()[0], tag, values[name]))


@cache
def parse(page: PurePosixPath) -> PageParser:
    parser = PageParser()
    parser.feed((SITE / page).read_text(encoding="utf-8"))
    parser.close()
    return parser


def is_internal(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and url.strip() != ""


def broken_links(page: PurePosixPath) -> list[str]:
    """Human-readable problems with the internal links of ``page`` (a path relative to the site)."""
    parser = parse(page)
    urls = [(line, tag, url) for line, tag, url in parser.links]
    if parser.refresh:
        urls.append((0, "meta refresh", parser.refresh))
    problems = []
    for line, tag, url in urls:
        parts = urlsplit(url)
        if parts.scheme in EXTERNAL_SCHEMES or parts.netloc:
            continue
        if not is_internal(url):
            problems.append(f"line {line}: <{tag}> has an empty or odd URL {url!r}")
            continue
        target = PurePosixPath(page.parent, unquote(parts.path)) if parts.path else page
        resolved = (SITE / target).resolve()
        if not resolved.is_relative_to(SITE.resolve()):
            problems.append(f"line {line}: <{tag}> {url!r} points outside the site")
            continue
        if resolved.is_dir():
            resolved = resolved / "index.html"
        if not resolved.is_file():
            problems.append(f"line {line}: <{tag}> {url!r}: no file {resolved.relative_to(SITE.resolve())}")
            continue
        fragment = unquote(parts.fragment)
        if fragment and resolved.suffix == ".html":
            ids = parse(PurePosixPath(resolved.relative_to(SITE.resolve()).as_posix())).ids
            if fragment not in ids:
                problems.append(f"line {line}: <{tag}> {url!r}: {resolved.name} has no element with id {fragment!r}")
    return problems


PAGES = [PurePosixPath(p.as_posix()) for p in html_pages()]


def test_site_has_every_page_of_the_toc():
    site = require_site()
    missing = [p for p in toc_pages() if not (site / p).is_file()]
    assert not missing, f"pages of _toc.yml missing from the built site: {missing}"
    assert len(PAGES) >= len(toc_pages())


@pytest.mark.parametrize("page", PAGES or [PurePosixPath("intro.html")], ids=str)
def test_internal_links_resolve(page: PurePosixPath):
    require_site()
    problems = broken_links(page)
    assert not problems, f"{page} has broken internal links:\n" + "\n".join(problems)


def test_link_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path: Path, monkeypatch):
    """The checker itself: a good link passes, a missing file and a missing #id are both reported."""
    this_module = sys.modules[__name__]
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_text(
        '<a href="sub/b.html#here">ok</a> <a href="sub/b.html#gone">bad id</a> '
        '<img src="nothing.png"> <a href="https://example.org/x">external</a> <a href="#top" id="top">self</a>'
    )
    (tmp_path / "sub" / "b.html").write_text('<h1 id="here">B</h1><a href="../a.html">back</a>')
    monkeypatch.setattr(this_module, "SITE", tmp_path)
    parse.cache_clear()
    try:
        problems = broken_links(PurePosixPath("a.html"))
        assert len(problems) == 2, problems
        assert "no element with id 'gone'" in problems[0]
        assert "no file nothing.png" in problems[1]
        assert broken_links(PurePosixPath("sub/b.html")) == []
    finally:
        parse.cache_clear()


# --- Launch buttons and citations: static checks of the built pages -------------------------------------

from launch_buttons import configure, placeholder_problem  # noqa: E402  (_ext/ is on the path: pyproject.toml)

CHAPTER_PAGES = [p for p in PAGES if p.parts[0] == "chapters"]
HREF = re.compile(r'href="(https?://[^"]+)"')


@pytest.mark.parametrize("page", CHAPTER_PAGES or [PurePosixPath("chapters/none.html")], ids=str)
def test_launch_buttons_lead_to_real_services(page: PurePosixPath):
    """Binder and Colab buttons, which open the chapter's learners' edition (editions/, plain Markdown, not the MyST
    chapter), and no JupyterHub one unless a hub is configured ($BOOK_JUPYTERHUB_URL)."""
    require_site()
    html = (SITE / page).read_text(encoding="utf-8")
    launch = [u for u in HREF.findall(html) if "mybinder.org" in u or "colab.research" in u or "git-pull?" in u]
    assert any("mybinder.org" in u for u in launch) and any("colab.research" in u for u in launch), launch
    hub = os.environ.get("BOOK_JUPYTERHUB_URL")
    hub_links = [u for u in launch if "git-pull?" in u]
    assert bool(hub_links) == bool(hub), f"{page}: JupyterHub launch links {hub_links}, configured hub {hub!r}"
    edition = f"editions/{page.stem}.ipynb"
    assert all(edition in u and "chapters/" not in u for u in launch), \
        f"{page}: launch links {launch} open not {edition}"
    assert (ROOT / edition).is_file()
    placeholders = [u for u in HREF.findall(html) if placeholder_problem("url", u)]
    assert not placeholders, f"{page} links to placeholder addresses: {placeholders}"


DOWNLOADS = re.compile(r'<a href="(?!https?:)([^"]+\.ipynb)"[^>]*>.*?<span class="btn__text-container">([^<]*)</span>',
                       re.DOTALL)


@pytest.mark.parametrize("page", CHAPTER_PAGES or [PurePosixPath("chapters/none.html")], ids=str)
def test_the_download_button_serves_the_learners_edition(page: PurePosixPath):
    """The ".ipynb" download button of a chapter gives its learners' edition (solutions folded, plain Markdown), as
    the Colab and Binder buttons open it, never the MyST chapter in _sources/ (issue 40)."""
    require_site()
    html = (SITE / page).read_text(encoding="utf-8")
    downloads = [(url, text) for url, text in DOWNLOADS.findall(html)]
    assert [text for _, text in downloads] == [".ipynb"], f"{page}: .ipynb links {downloads}"
    links = re.findall(r'<a href="([^"]+\.ipynb)"([^>]*)>', html)
    marked = [url for url, attributes in links if f'download="{page.stem}.ipynb"' in attributes]
    assert marked == [url for url, _ in links if not url.startswith("https:")] == [downloads[0][0]], \
        f"{page}: the download attribute is on {marked}, of the links {links}"
    url = downloads[0][0]
    assert "_sources" not in url and "_sources/chapters" not in html, f"{page}: {url}"
    served = (SITE / page.parent / unquote(url)).resolve()
    assert served == (SITE / "editions" / f"{page.stem}.ipynb").resolve(), served
    assert served.read_bytes() == (ROOT / "editions" / f"{page.stem}.ipynb").read_bytes()
    text = served.read_text(encoding="utf-8")
    assert ":class: dropdown" not in text and "{glue:" not in text and "{solution-start}" not in text


def test_the_download_link_gets_a_download_attribute_once():
    from launch_buttons import with_download_attribute

    html = ('<a href="../editions/01_a.ipynb" target="_blank" class="btn">'
            '<a href="../_sources/chapters/01_a.ipynb" target="_blank">'
            '<a href="https://colab.research.google.com/github/o/r/blob/main/editions/01_a.ipynb" target="_blank">')
    marked = with_download_attribute(html, "01_a.ipynb")
    assert marked == html.replace('01_a.ipynb" target', '01_a.ipynb" download="01_a.ipynb" target', 1)
    assert with_download_attribute(marked, "01_a.ipynb") == marked


def test_placeholder_launch_addresses_are_refused():
    assert placeholder_problem("jupyterhub_url", "https://jupyterhub.example.org")
    assert placeholder_problem("jupyterhub_url", "http://hub.university.edu")  # not https
    assert placeholder_problem("binderhub_url", "https://hub.test")
    assert placeholder_problem("jupyterhub_url", "https://hub.university.edu") is None
    assert placeholder_problem("jupyterlite_url", "lite/lab/index.html") is None


def test_a_jupyterhub_button_only_when_configured(monkeypatch):
    """_ext/launch_buttons.py: $BOOK_JUPYTERHUB_URL adds the hub; empty addresses and placeholders give no button."""
    from types import SimpleNamespace

    from sphinx.errors import ConfigError

    config = SimpleNamespace(html_theme_options={"launch_buttons": {"binderhub_url": "https://mybinder.org",
                                                                    "jupyterhub_url": ""}})
    monkeypatch.delenv("BOOK_JUPYTERHUB_URL", raising=False)
    configure(None, config)
    assert config.html_theme_options["launch_buttons"] == {"binderhub_url": "https://mybinder.org"}
    monkeypatch.setenv("BOOK_JUPYTERHUB_URL", "https://hub.university.edu")
    configure(None, config)
    assert config.html_theme_options["launch_buttons"]["jupyterhub_url"] == "https://hub.university.edu"
    monkeypatch.setenv("BOOK_JUPYTERHUB_URL", "https://jupyterhub.example.org")
    with pytest.raises(ConfigError, match="placeholder"):
        configure(None, config)


CITATION = re.compile(r'<span class="bibtex-citation"[^>]*>(.*?)</span>', re.DOTALL)
CITED = re.compile(r'href="[^"]*bibliography\.html#([\w-]+)"')
ENTRY = re.compile(r'<div class="citation" id="([\w-]+)" role="listitem">\s*<span class="label">'
                   r'<span class="fn-bracket">\[</span>(.*?)<span class="fn-bracket">\]</span>', re.DOTALL)
TAG = re.compile(r"<[^>]+>")


def test_citations_and_bibliography_agree():
    """The bibliography labels each entry "Vaswani et al., 2017", and every citation of it names that author and
    year."""
    require_site()
    bibliography = (SITE / "bibliography.html").read_text(encoding="utf-8")
    entries = {i: TAG.sub("", label) for i, label in ENTRY.findall(bibliography)}
    assert len(entries) >= 5, "the bibliography's entries (role=listitem, labelled) were not found"
    # an author may be a handle, "bloc97, 2023"
    assert all(re.fullmatch(r"[^\W\d][^\[\]]*, \d{4}[a-z]?", label) for label in entries.values()), entries
    checked, problems = 0, []
    for page in [PurePosixPath("intro.html"), *CHAPTER_PAGES]:
        for span in CITATION.findall((SITE / page).read_text(encoding="utf-8")):
            text = " ".join(TAG.sub("", span).split())
            for target in CITED.findall(span):
                author, _, year = entries.get(target, "?, ?").rpartition(", ")
                checked += 1
                if author.replace(" et al.", "") not in text or year not in text:
                    problems.append(f"{page}: the citation {text!r} leads to the entry [{entries.get(target)}]")
    assert checked >= 5 and not problems, "\n".join(problems) or "too few citations found"


EXPLORER_BLOCK = re.compile(r'<div class="book-explorer"[^>]*><script type="application/json">(.*?)</script>', re.S)
SCRIPT_SRC = re.compile(r'<script src="([^"]+)"')


def test_explorer_pages_load_vega_from_the_site_and_grow_by_at_most_about_1_mb():
    """The explorers' pages load Vega from _static/vega/ (no other host), other pages do not load it at all, and
    an explorer page's Vega files and specifications together stay under 1.1 MB (issue 42: "about 1 MB")."""
    site = require_site()
    pages = {p: (site / p).read_text(encoding="utf-8") for p in html_pages(site)}
    with_explorers = {p: text for p, text in pages.items() if 'class="book-explorer"' in text}
    assert "chapters/02_scaling.html" in {p.as_posix() for p in with_explorers}
    for page, text in pages.items():
        vega = [src for src in SCRIPT_SRC.findall(text) if "/vega/" in src]
        if page not in with_explorers:
            assert not vega, f"{page} loads Vega without showing an explorer"
            continue
        assert len(vega) == 3 and all(not urlsplit(src).netloc for src in vega), f"{page}: {vega}"
        files = [(site / page).parent / src.split("?")[0] for src in vega]
        grown = sum(f.stat().st_size for f in files) + sum(len(spec) for spec in EXPLORER_BLOCK.findall(text))
        assert grown < 1.1e6, f"{page} grows by {grown / 1e6:.2f} MB with its explorers"
