"""Copy an edited static file to the site even when no page changed.

Sphinx ends an incremental build early when no page is out of date ("no targets are out of date."),
before the step that copies ``html_static_path`` and ``html_extra_path`` into the output. An edit to
``_static/site.css`` alone would then never reach ``_build/html``, and the browser test would check the
old stylesheet. When a built copy of one of the book's own static files differs from its source, this
marks the root page as outdated: Sphinx rebuilds that one page and then copies the static files as usual.
"""

from __future__ import annotations

import filecmp
import os
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util.matching import Matcher


def book_files(folder: Path, excluded: Matcher) -> list[Path]:
    """The files Sphinx copies from one static or extra folder (or the one file): what `excluded` leaves."""
    if folder.is_file():
        return [folder]
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        dirs[:] = [d for d in dirs if not excluded((rel / d).as_posix())]
        found += [Path(root, f) for f in files if not excluded((rel / f).as_posix())]
    return sorted(found)


def stale_copies(app: Sphinx) -> list[str]:
    """The book's static and extra files whose copy in the output is missing or differs from the source.

    Only the folders the book's configuration names (relative paths); those of the theme and of extensions
    are absolute, and not edited here. Excluded as Sphinx excludes them when it copies: the patterns of
    `exclude_patterns`, and for static files also hidden ones (an editor's swap file, .ipynb_checkpoints).
    """
    confdir, outdir = Path(app.confdir), Path(app.outdir)
    patterns = list(app.config.exclude_patterns)
    folders = [(entry, outdir / "_static", Matcher([*patterns, "**/.*"])) for entry in app.config.html_static_path]
    folders += [(entry, outdir, Matcher(patterns)) for entry in app.config.html_extra_path]
    stale = []
    for entry, target, excluded in folders:
        if Path(entry).is_absolute():
            continue
        source = confdir / entry
        for file in book_files(source, excluded):
            if file.name.lower().endswith(("_t", ".jinja")):  # a template, rendered on copy: never equal to its source
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
