"""Which files are the book's pages and chapters: the one answer, read from ``_toc.yml``, for the scripts, the tests,
the Sphinx extensions and the Makefile (``python scripts/book_toc.py`` prints the chapters, as ``make`` reads them).

A chapter is a ``chapters/`` entry of ``_toc.yml``, numbered by its place among them; ``tests/test_book.py`` fails
on a notebook in ``chapters/`` that ``_toc.yml`` does not list, and on an entry with no notebook.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_files(root: Path = ROOT) -> list[str]:
    """Every ``file:`` entry of ``root/_toc.yml``, the root page first, without suffixes (e.g. ``chapters/01_x``)."""

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for key, value in node.items():
                if key != "file":
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"], *walk({k: v for k, v in toc.items() if k != "root"})]


def chapters(root: Path = ROOT) -> list[Path]:
    """The chapter notebooks in reading order: the ``chapters/`` entries of ``root/_toc.yml``, as paths."""
    return [root / f"{f}.ipynb" for f in toc_files(root) if f.startswith("chapters/")]


def chapter(number: int, root: Path = ROOT) -> Path:
    """Chapter ``number``'s notebook (its place among the chapters of ``_toc.yml``, from 1); LookupError if none."""
    found = chapters(root)
    if not 1 <= number <= len(found):
        raise LookupError(f"the book has no chapter {number}: {root / '_toc.yml'} lists chapters 1 to {len(found)}")
    return found[number - 1]


def setup(app) -> dict:
    """Sphinx's hook (``_config.yml`` lists this module among the local extensions): nothing to register; loading
    it puts ``scripts/`` on the path, so that the extensions in ``_ext/`` read the chapters from here."""
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # the Makefile's CHAPTERS: paths relative to the book's folder, one line
    print(" ".join(p.relative_to(ROOT).as_posix() for p in chapters()))
    sys.exit(0)
