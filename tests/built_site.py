"""Shared by the tests of the built website (test_links.py, test_browser.py): where it is, what it holds.

These tests check `_build/html` as `make build-strict` leaves it; `make test` runs them after the build.
Without a built site they skip, or fail when $CI is set (CI must build before it tests).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from book_toc import toc_files  # noqa: E402

SITE = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
ASSET_DIRS = ("_static", "_sources", "_images")


def skip_or_fail(message: str) -> None:
    """Fail in CI (where everything must run), skip elsewhere; either way with ``message``."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require_site() -> Path:
    if not (SITE / "intro.html").is_file():
        skip_or_fail(f"No built website at {SITE}: run `make build-strict` first.")
    return SITE


def html_pages(site: Path = SITE) -> list[Path]:
    """Every HTML page of the site, as paths relative to it (assets excluded)."""
    if not site.is_dir():
        return []
    return sorted(p.relative_to(site) for p in site.rglob("*.html") if p.relative_to(site).parts[0] not in ASSET_DIRS)


def toc_pages(root: Path = ROOT) -> list[str]:
    """The pages of _toc.yml in reading order, as site paths such as ``chapters/01_weighted_average.html``."""
    return [f"{Path(f).with_suffix('')}.html" for f in toc_files(root)]
