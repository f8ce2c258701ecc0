"""Write the learners' editions of the chapters: the notebooks a learner opens in JupyterLab or on Colab.

    python scripts/make_editions.py chapters/*.ipynb --out editions   (make editions: the committed copies the
                                                                        Colab and Binder buttons open)

``make lab`` makes the learner's own copies with scripts/lab.py instead: the same edition without the Colab
set-up cell (``LAB``), placed so that a copy the learner edited is kept (book_editions/learner_copies.py).

The chapters stay the one source (MyST, for the website and CI). An edition is its chapter, with what it
computed, made for plain Jupyter:

- every markdown cell is plain Markdown (book_editions/plain_markdown.py): glued values as numbers, references and
  citations as text, equations numbered once with ``\\tag{1.2}`` as on the website, exercises as headings;
- under each figure, a markdown cell gives "Figure 1.1:" and its caption;
- each solution is folded, not removed: its ``{solution-start}`` cell becomes a heading, "Solution to Exercise
  1.2", that JupyterLab and Jupyter Notebook 7 show collapsed (cell metadata ``jp-MarkdownHeadingCollapsed``)
  and Colab too (notebook metadata ``colab.collapsed_sections``, which lists the cell's ``metadata.id``): the
  solution's text, code and output (the answer to a "predict, then run" question) sit hidden under it, and a
  click opens them. Running the chapter cell by cell (Shift+Enter) unfolds each such heading in JupyterLab and
  Notebook 7, which unfold the heading above the active cell: so each solution cell also keeps itself out of
  view, its code and output collapsed (cell metadata ``jupyter.source_hidden`` and ``outputs_hidden``; the kernel
  runs it under ``%%capture``, since a run shows a cell's new output), its prose in a closed ``<details>``.
  Its ``{solution-end}`` cell becomes a heading, "Your answer", over a code cell for the
  learner's own attempt: it runs after the solution, so the check cell below it checks the learner's answer,
  and Run All still runs the whole chapter. Each solution code cell begins with a comment line, "# The book's
  solution to Exercise 1.2 (folded) ...", by which the check tells the folded solution's names from the
  learner's: an answer cell that does not define the name the check reads is not answered, and an answer in a
  cell the learner added between the solution and the check is judged (attn_helpers/checks/_answer.py).
  Until the learner writes there, the cell's one line of code,
  ``ah.checks.no_answer_yet("1.2")``, makes the check say that it checked the book's solution and that the
  exercise waits for an answer (not a bare "✓ correct" under an empty cell); the check's committed output in
  the edition says the same, as Run All would;
- a "predict, then run" exercise gets a prediction cell under its text, and one that asks for words (say why,
  explain, book_editions/exercise_cells.py) a cell for them, as in the student editions;
- the Colab set-up cell (tagged ``colab-setup``) is folded and shows no execution count; ``make lab``'s copies
  (scripts/lab.py), which Colab never opens, leave it out;
- the code cells, the check cells and their outputs are otherwise the chapter's (glue records aside), unchanged.

No cell is executed: the outputs are the committed ones, which nbval compares with a fresh run, so an
edition made twice is the same file.

The edition is a list of steps over one walk of the cells: ``LEARNERS`` (and ``LAB``) in book_editions/learners.py.
"""

from __future__ import annotations

import sys

from book_editions.command_line import edition_main
from book_editions.learners import as_text, learner_edition


def write(args):
    """Make every edition first (a MyST error stops before anything is written), then write them."""
    editions = {chapter.name: learner_edition(chapter) for chapter in args.chapters}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, nb in editions.items():
        (args.out / name).write_text(as_text(nb), encoding="utf-8")
    yield f"wrote {len(editions)} editions to {args.out}/"


def main(argv: list[str] | None = None) -> int:
    return edition_main(argv, __doc__.splitlines()[0], "editions", "output folder (default: editions)", write)


if __name__ == "__main__":
    sys.exit(main())
