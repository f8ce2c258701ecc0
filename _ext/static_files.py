"""Copy an edited static file to the site even when no page changed.

Sphinx ends an incremental build early when no page is out of date ("no targets are out of date."),
before the step that copies ``html_static_path`` and ``html_extra_path`` into the output. An edit to
``_static/site.css`` alone would then never reach ``_build/html``, and the browser test would check the
old stylesheet. When a built copy of one of the book's own static files differs from its source, this
marks the root page as outdated: Sphinx rebuilds that one page and then copies the static files as usual.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

from sphinx.application import Sphinx


def stale_copies(app: Sphinx) -> list[str]:
    """The book's static and extra files whose copy in the output is missing or differs from the source."""
    confdir, outdir = Path(app.confdir).resolve(), Path(app.outdir)
    folders = [(p, outdir / "_static") for p in app.config.html_static_path]
    folders += [(p, outdir) for p in app.config.html_extra_path]
    stale = []
    for entry, target in folders:
        source = (confdir / entry).resolve()
        if not source.is_relative_to(confdir):  # a theme's or an extension's own folder: not edited here
            continue
        files = [source] if source.is_file() else sorted(f for f in source.rglob("*") if f.is_file())
        for file in files:
            if file.name.endswith("_t"):  # a template, rendered on copy: never equal to its source
                continue
            built = target / (file.name if file == source else file.relative_to(source))
            if not built.is_file() or not filecmp.cmp(file, built, shallow=False):
                stale.append(str(file.relative_to(confdir)))
    return stale


def rebuild_root_if_stale(app: Sphinx, env, added: set, changed: set, removed: set) -> list[str]:
    if app.builder.format != "html" or added or changed or removed:
        return []  # some page is rebuilt anyway, and the static files are copied after it
    return [app.config.root_doc] if stale_copies(app) else []


def setup(app: Sphinx) -> dict:
    app.connect("env-get-outdated", rebuild_root_if_stale)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
