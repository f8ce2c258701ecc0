"""Write student editions of chapters: solutions become stubs, the self-check cells stay, and the text reads
well in plain Jupyter.

    python scripts/make_student.py chapters/*.ipynb --out student      (what `make student` runs)

In a student edition:

- each code cell tagged ``solution`` holds nbgrader's stub (``# YOUR CODE HERE``, ``raise NotImplementedError(...)``,
  whose message names the exercise and says what to do, so that Run All stops there with a sentence rather than
  a bare error) and no output; the ``{solution-start}`` and ``{solution-end}`` cells, and whatever lies between
  them that is not code, are gone (so no empty dropdowns and no written solutions);
- each exercise is a heading ("### Exercise 1.2 (medium): Self-attention as a function") whose cell metadata
  ``exercise`` keeps its label; a "predict, then run" exercise is followed by a markdown cell, tagged
  ``exercise-prediction``, for the written prediction: it starts with a line that says so (an empty markdown
  cell is an invisible gap in JupyterLab);
- the check cells stay, tagged ``exercise-check``, with their outputs cleared, and cannot be edited or deleted
  (cell metadata ``editable`` and ``deletable`` false, which JupyterLab and Jupyter Notebook respect);
- every markdown cell is plain Markdown (book_editions/plain_markdown.py): glued values, references, citations and
  directives are resolved as the website resolves them; the glue records in the outputs are dropped;
- under each figure, a markdown cell (tagged ``figure-caption``) shows its number and caption, as the website does;
- everything else, including the outputs of the teaching cells, is as in the book.

The edition is a list of steps over one walk of the cells: ``STUDENT`` in book_editions/student.py.
"""

from __future__ import annotations

import sys

from book_editions.command_line import edition_main
from book_editions.exercise_cells import is_solution, read
from book_editions.student import make_student


def write(args):
    for chapter in args.chapters:
        target = make_student(chapter, args.out)
        stubs = sum(1 for cell in read(target).cells if is_solution(cell))
        yield f"wrote {target} ({stubs} solution cells replaced by stubs)"


def main(argv: list[str] | None = None) -> int:
    return edition_main(argv, __doc__.splitlines()[0], "student", "output folder (default: student)", write,
                        chapters_help="chapter notebooks (.ipynb)")


if __name__ == "__main__":
    sys.exit(main())
