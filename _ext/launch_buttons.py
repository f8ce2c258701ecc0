"""Launch buttons for real addresses only: a JupyterHub button appears when a hub is configured.

The theme (sphinx-book-theme) shows a launch button for every ``*_url`` set under ``launch_buttons`` in
_config.yml. Binder and Colab are public services, so the book sets them there. A JupyterHub belongs to
a course or an institution, so the book sets none, and that button is absent. A course that builds its
own copy of the site gives its hub's address for one build, without editing _config.yml:

    BOOK_JUPYTERHUB_URL=https://hub.example.edu make book

(the button then opens the chapter on that hub through nbgitpuller). A launch address that is not an
https URL, or whose host is a reserved placeholder (example.org, *.test, *.invalid, localhost: RFC 2606),
stops the build with an error, so a placeholder can never again give readers a dead button.

The buttons of a chapter open its learners' edition, ``editions/NN_slug.ipynb`` (made by
scripts/make_editions.py and committed, since Colab and Binder open notebooks from the repository): plain
Markdown with the solutions folded, not the MyST chapter, which Colab shows raw. The theme builds each button's
address from the page's path; ``point_to_editions`` turns ``chapters/`` into ``editions/`` in it, and a chapter
without an edition is a build warning (an error in the strict build). The ".ipynb" download button serves
the same edition, copied into the site as ``editions/NN_slug.ipynb``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import book_toc  # scripts/, on the path as a local extension of _config.yml (and in the tests, pyproject.toml)
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

ENV_JUPYTERHUB = "BOOK_JUPYTERHUB_URL"
URL_KEYS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url", "jupyterlite_url")
PLACEHOLDER_DOMAINS = ("example.com", "example.org", "example.net")
PLACEHOLDER_TLDS = (".example", ".test", ".invalid", ".localhost", ".local")


def placeholder_problem(key: str, url: str) -> str | None:
    """Why ``url`` cannot be a launch address that readers follow, or None when it can."""
    parts = urlsplit(url)
    if key == "jupyterlite_url" and not parts.netloc:
        return None  # JupyterLite may be served from this site itself (a path)
    if parts.scheme != "https" or not parts.hostname:
        return f"{key}: {url!r} is not an https:// address"
    host = parts.hostname.lower()
    if host == "localhost" or host.endswith(PLACEHOLDER_TLDS) or any(
            host == d or host.endswith("." + d) for d in PLACEHOLDER_DOMAINS):
        return f"{key}: {url!r} is a placeholder (reserved host {host}), not a real service"
    return None


def configure(app: Sphinx, config: Config) -> None:
    """Apply $BOOK_JUPYTERHUB_URL, drop empty addresses, and refuse placeholders."""
    options = config.html_theme_options or {}
    buttons = dict(options.get("launch_buttons") or {})
    hub = os.environ.get(ENV_JUPYTERHUB, "").strip()
    if hub:
        buttons["jupyterhub_url"] = hub
    for key in URL_KEYS:
        if key in buttons and not str(buttons[key] or "").strip():
            del buttons[key]  # an empty address means "no button"
    problems = [p for key in URL_KEYS if key in buttons if (p := placeholder_problem(key, str(buttons[key])))]
    if problems:
        raise ConfigError("Launch buttons must point to real services: " + "; ".join(problems)
                          + f". Remove the line from launch_buttons in _config.yml (or for a JupyterHub, set "
                          f"${ENV_JUPYTERHUB} to your hub's address).")
    config.html_theme_options = {**options, "launch_buttons": buttons}


EDITIONS = "editions"            # the folder of learners' editions, beside chapters/
OPENS_A_NOTEBOOK = ("Binder", "JupyterHub", "Colab", "Deepnote", "JupyterLite")


def chapter_pages(app: Sphinx) -> list[str]:
    """The chapters' page names (``chapters/01_weighted_average``), as ``_toc.yml`` lists them."""
    return [f"chapters/{p.stem}" for p in book_toc.chapters(Path(app.srcdir))]


def edition_url(url: str, pagename: str) -> str:
    """``url`` (a launch button's address for the chapter page ``pagename``) opening its learners' edition."""
    chapter = f"{pagename}.ipynb"                                        # chapters/01_weighted_average.ipynb
    return url.replace(chapter, f"{EDITIONS}/{chapter.split('/', 1)[1]}")


def point_to_editions(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """After the theme has built the launch buttons of a chapter page, point them at the chapter's edition."""
    if pagename not in chapter_pages(app):
        return
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    buttons = [b for g in groups for b in g.get("buttons", []) if b.get("text") in OPENS_A_NOTEBOOK]
    if not buttons:
        return
    edition = Path(app.srcdir) / EDITIONS / f"{Path(pagename).name}.ipynb"
    if not edition.is_file():
        LOGGER.warning(f"{pagename}: no learners' edition {edition.relative_to(app.srcdir)} for its launch buttons "
                       f"to open (Colab would show the MyST source): run `make editions` and commit it")
        return
    for button in buttons:
        button["url"] = edition_url(button["url"], pagename)


def download_edition(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Make a chapter page's ".ipynb" download button serve its learners' edition, as the launch buttons open it
    (the theme's button serves ``_sources/chapters/NN.ipynb``, the MyST chapter with its solutions open).

    The edition is copied into the site, to ``editions/NN_slug.ipynb``, by :func:`copy_editions`. A page whose
    source is a notebook gets two buttons with that file from the theme (notebook and source): one is kept."""
    edition = Path(app.srcdir) / EDITIONS / f"{Path(pagename).name}.ipynb"
    if pagename not in chapter_pages(app) or not edition.is_file():
        return  # point_to_editions warns of a chapter without an edition
    url = context["pathto"](f"{EDITIONS}/{edition.name}", 1)
    for group in (b for b in context.get("header_buttons", []) if b.get("label") == "download-buttons"):
        buttons, seen = [], False
        for button in group.get("buttons", []):
            if str(button.get("url", "")).endswith(".ipynb"):
                if seen:
                    continue
                seen = True
                button.update(url=url, text=".ipynb", label="download-notebook-button",
                              tooltip="Download this chapter as a notebook (solutions folded, for Jupyter)")
            buttons.append(button)
        group["buttons"] = buttons


def copy_editions(app: Sphinx, exception: Exception | None) -> None:
    """Copy the learners' edition of every chapter into the site, ``editions/NN_slug.ipynb``, for the download
    button (on every build: a build with no page to write still gets the current editions)."""
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / EDITIONS
    for chapter in book_toc.chapters(Path(app.srcdir)):
        edition = Path(app.srcdir) / EDITIONS / chapter.name
        if edition.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(edition, target / edition.name)


def with_download_attribute(html: str, edition: str) -> str:
    """``html`` with a ``download`` attribute, naming the file ``edition``, on each link to the site's copy of the
    edition (not on the Colab and Binder buttons, which open it there; the theme's link macro takes no other
    attribute): a host that serves ``.ipynb`` files as text then still saves
    it, rather than showing it in a tab."""
    link = re.compile(rf'<a href="((?![a-z]+:)[^"]*/{re.escape(EDITIONS)}/{re.escape(edition)})"(?! download=)')
    return link.sub(lambda m: f'<a href="{m[1]}" download="{edition}"', html)


def mark_downloads(app: Sphinx, exception: Exception | None) -> None:
    """Give each chapter page's download button its ``download`` attribute (:func:`with_download_attribute`)."""
    if exception is not None or app.builder.format != "html":
        return
    for doc in chapter_pages(app):
        page = Path(app.outdir) / f"{doc}.html"
        if page.is_file():
            html = page.read_text(encoding="utf-8")
            marked = with_download_attribute(html, f"{Path(doc).name}.ipynb")
            if marked != html:
                page.write_text(marked, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", configure, priority=100)
    app.connect("html-page-context", point_to_editions, priority=600)  # after the theme's add_launch_buttons (501)
    app.connect("html-page-context", download_edition, priority=600)  # after the theme's add_header_buttons
    app.connect("build-finished", copy_editions)
    app.connect("build-finished", mark_downloads)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
