"""Serve the Vega libraries from the site itself, and load them only on pages that show an explorer.

The explorers (``attn_helpers.explorers``) are Vega-Lite outputs; MyST-NB writes each as a ``book-explorer``
block (``attn_helpers/explorers/_website.py``). Vega, Vega-Lite and vega-embed come from the project's
``node_modules`` (pinned in package.json, installed by ``make setup``): this extension copies their builds to
``_static/vega/`` and adds them to the pages that have one, where ``_static/explorers.js`` (which Jupyter Book
loads on every page) draws each block. No page asks another host for anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

#: The browser builds, in the order they must load (vega-embed needs the other two).
LIBRARIES = ("vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js", "vega-embed/build/vega-embed.min.js")


def library_files(app: Sphinx) -> list[Path]:
    files = [Path(app.confdir, "node_modules", library) for library in LIBRARIES]
    missing = [str(file) for file in files if not file.is_file()]
    if missing:
        raise ExtensionError(f"the explorers need {', '.join(missing)}: run `make setup` (npm ci) first.")
    return files


def copy_libraries(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir, "_static", "vega")
        target.mkdir(parents=True, exist_ok=True)
        for file in library_files(app):
            shutil.copyfile(file, target / file.name)


def add_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    if 'class="book-explorer"' not in context.get("body", ""):
        return
    for file in library_files(app):
        app.add_js_file(f"vega/{file.name}", priority=600)


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", add_scripts)
    app.connect("build-finished", copy_libraries)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
