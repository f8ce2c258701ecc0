"""Write an nbgrader course source from the chapters, ready for ``nbgrader generate_assignment``.

    python scripts/make_nbgrader.py chapters/*.ipynb --out nbgrader-course      (what `make nbgrader` runs)

For each chapter ``chapters/NN_slug.ipynb`` it writes ``<out>/source/chNN/NN_slug.ipynb``, and it writes
``<out>/nbgrader_config.py`` (the course's settings) if there is none. In the notebook, with nbgrader's cell
metadata (schema version 3; ``grade_id`` values are built from the exercise labels):

- each code cell tagged ``solution`` is an autograded answer: its code sits between ``### BEGIN SOLUTION``
  and ``### END SOLUTION``, which ``nbgrader generate_assignment`` replaces by the stub. A written
  solution from the chapter's solution dropdown goes in as comments inside the same region;
- each check cell is a locked autograded test cell worth 1, 2 or 3 points for an easy, medium or hard
  exercise (``<label>-check``); nbgrader restores it from this source before autograding;
- after each "predict, then run" exercise's text comes a manually graded answer cell (markdown,
  ``<label>-prediction``, the same points) holding the chapter's written answer between the markers, which
  the release replaces by "YOUR ANSWER HERE"; so does an exercise that asks for words (say why, explain:
  ``<label>-words``, see book_editions/exercise_cells.py), whose written solution goes there rather than into comments;
- every other cell is locked read-only, and the markdown is plain Markdown as in the student editions
  (book_editions/plain_markdown.py); the ``{solution-start}``/``{solution-end}`` cells are gone.

The source is a list of steps over one walk of the cells: ``NBGRADER`` in book_editions/nbgrader_course.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
from book_editions.command_line import edition_main
from book_editions.nbgrader_course import make_nbgrader


def is_chapter(path: Path) -> bool:
    return path.suffix == ".ipynb" and path.is_file() and bool(re.match(r"\d\d_", path.name))


def write(args):
    for chapter in args.chapters:
        target = make_nbgrader(chapter, args.out)
        graded = [c.metadata["nbgrader"] for c in nbformat.read(target, as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("grade")]
        yield f"wrote {target} ({len(graded)} graded cells, {sum(m['points'] for m in graded)} points)"
    yield f"Next: cd {args.out} && nbgrader generate_assignment chNN   (see instructors.md)"


def main(argv: list[str] | None = None) -> int:
    return edition_main(argv, __doc__.splitlines()[0], "nbgrader-course",
                        "the nbgrader course folder (default: nbgrader-course)", write, is_chapter=is_chapter,
                        not_a_chapter="is not a chapter notebook (chapters/NN_slug.ipynb)")


if __name__ == "__main__":
    sys.exit(main())
