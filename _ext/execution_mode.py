"""Let ``$BOOK_EXECUTE`` override ``execute_notebooks`` of _config.yml for one build.

``make test`` builds with ``BOOK_EXECUTE=off``: the website then shows the chapters' committed outputs,
which the nbval step of the same ``make test`` has just re-executed and compared cell by cell, instead
of executing every chapter a second time. ``make book`` leaves it unset and uses the execution cache.
"""

from __future__ import annotations

import os

from sphinx.application import Sphinx
from sphinx.config import Config

MODES = ("off", "force", "auto", "cache", "inline")


def override(app: Sphinx, config: Config) -> None:
    mode = os.environ.get("BOOK_EXECUTE")
    if not mode:
        return
    if mode not in MODES:
        raise ValueError(f"BOOK_EXECUTE={mode!r} is not an execution mode; use one of {', '.join(MODES)}.")
    config.nb_execution_mode = mode


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", override, priority=100)  # before myst-nb reads its configuration
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
