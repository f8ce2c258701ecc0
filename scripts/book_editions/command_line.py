"""The command line that make_editions.py, make_student.py and make_nbgrader.py share: chapters, ``--out``,
a check of each chapter's path, and a clear error for a chapter the editions cannot resolve."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .myst_syntax import MystError

NOT_A_NOTEBOOK = "is not a notebook file; pass chapters/*.ipynb"


def is_notebook(path: Path) -> bool:
    return path.suffix == ".ipynb" and path.is_file()


def edition_main(argv: list[str] | None, description: str, out: str, out_help: str,
                 write: Callable[[argparse.Namespace], Iterable[str]], *,
                 chapters_help: str = "chapter notebooks (chapters/NN_slug.ipynb)",
                 is_chapter: Callable[[Path], bool] = is_notebook, not_a_chapter: str = NOT_A_NOTEBOOK) -> int:
    """Parse ``argv``: chapters and ``--out`` (default ``out``); check every chapter; then print each line
    ``write(args)`` yields while it writes the editions. Return 0, or 2 after an error naming a chapter that is
    not one, or what the MyST resolver could not resolve."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("chapters", nargs="+", type=Path, help=chapters_help)
    parser.add_argument("--out", type=Path, default=Path(out), help=out_help)
    args = parser.parse_args(argv)
    for chapter in args.chapters:
        if not is_chapter(chapter):
            print(f"error: {chapter} {not_a_chapter}", file=sys.stderr)
            return 2
    try:
        for line in write(args):
            print(line)
    except MystError as exc:  # not a chapter of _toc.yml, say
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = ["NOT_A_NOTEBOOK", "edition_main", "is_notebook"]
