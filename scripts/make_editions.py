"""Write the learners' editions of the chapters: the notebooks a learner opens in JupyterLab or on Colab.

    python scripts/make_editions.py chapters/*.ipynb --out editions            (make editions: the committed
                                                                                 copies the Colab and Binder buttons open)
    python scripts/make_editions.py chapters/*.ipynb --out my-notebooks --keep  (make lab: the learner's own copies)

The chapters stay the one source (MyST, for the website and CI). An edition is its chapter, with what it
computed, made for plain Jupyter:

- every markdown cell is plain Markdown (scripts/plain_markdown.py): glued values as numbers, references and
  citations as text, equations numbered once with ``\\tag{1.2}`` as on the website, exercises as headings;
- under each figure, a markdown cell gives "Figure 1.1:" and its caption;
- each solution is folded, not removed: its ``{solution-start}`` cell becomes a heading, "Solution to Exercise
  1.2", that JupyterLab and Jupyter Notebook 7 show collapsed (cell metadata ``jp-MarkdownHeadingCollapsed``)
  and Colab too (notebook metadata ``colab.collapsed_sections``, which lists the cell's ``metadata.id``): the
  solution's text, code and output (the answer to a "predict, then run" question) sit hidden under it, and a
  click opens them. Its ``{solution-end}`` cell becomes a heading, "Your answer", over a code cell for the
  learner's own attempt: it runs after the solution, so the check cell below it checks the learner's answer,
  and Run All still runs the whole chapter. Each solution code cell begins with a comment line, "# The book's
  solution to Exercise 1.2 (folded) ...", by which the check tells the folded solution's names from the
  learner's: an answer cell that does not define the name the check reads fails (checks/_answer.py). Until the learner writes there, the cell's one line of code,
  ``ah.checks.no_answer_yet("1.2")``, makes the check say that it checked the book's solution and that the
  exercise waits for an answer (not a bare "✓ correct" under an empty cell); the check's committed output in
  the edition says the same, as Run All would;
- a "predict, then run" exercise gets a prediction cell under its text, and one that asks for words (say why,
  explain, scripts/exercise_cells.py) a cell for them, as in the student editions;
- the Colab set-up cell (tagged ``colab-setup``) is folded and shows no execution count; ``make lab``'s copies,
  which Colab never opens, leave it out;
- the code cells, the check cells and their outputs are otherwise the chapter's (glue records aside), unchanged.

No cell is executed: the outputs are the committed ones, which nbval compares with a fresh run, so an
edition made twice is the same file. With ``--keep``, a copy the learner has edited is never overwritten
(learner_copies.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from book_toc import ROOT
from edition_cells import derived_id, figure_caption, is_glue_record, new_markdown, prediction_cell
from exercise_cells import EXERCISE_META, GATE_BLOCK, find_exercises
from learner_copies import place, report
from make_student import exercise_metadata
from plain_markdown import ChapterText, MystError

from attn_helpers.checks._answer import SOLUTION_LINE, correct_line, waiting_note

COLLAPSED = "jp-MarkdownHeadingCollapsed"  # JupyterLab's own metadata for a folded heading
ANSWER = ("# Your answer to Exercise {number}: write your code here, in place of these three lines,\n"
          "# run it, then run the check below. Until then, the check checks the folded solution above.\n"
          'ah.checks.no_answer_yet("{number}")')
CORRECT = re.compile(r"^✓ (.+): correct$")


def as_run_all_shows(check: nbformat.NotebookNode, number: str) -> None:
    """Give the check cell under an untouched answer cell the output Run All gives it: that the book's solution
    passed, and that the exercise waits for the learner's answer (attn_helpers.checks._answer.py)."""
    for out in check.outputs:
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            lines = out.text.splitlines()
            if lines and all(CORRECT.match(line) for line in lines):
                out.text = "\n".join([waiting_note(number), *(correct_line(CORRECT.match(line)[1], True)
                                                               for line in lines)]) + "\n"


COLAB_TAG = "colab-setup"  # each chapter's first code cell, which sets up Colab and does nothing elsewhere


def learner_edition(chapter: Path, root: Path = ROOT, colab: bool = True) -> nbformat.NotebookNode:
    """The learners' edition of ``chapter`` (a notebook of the book in ``root``); see the module's docstring.

    With ``colab`` (the committed editions, which Colab and Binder open) the Colab set-up cell stays, its code
    folded and without the "[1]" of the chapter's run; without (``make lab``'s copies) it is left out."""
    nb = nbformat.read(chapter, as_version=4)
    text = ChapterText.of(nb, chapter, root)
    exercises = find_exercises(nb)
    by_cell = {ex.cell: ex for ex in exercises}
    solved = {i: ex for ex in exercises for i in ex.solution_cells}
    gates: dict[int, list[str]] = {}
    owner = {}
    for ex in exercises:
        for kind, _, i in ex.gates:
            gates.setdefault(i, []).append(kind)
            owner[i] = ex
    cells, folded = [], []
    waiting = None  # the number of the exercise whose answer cell was just added: its check cell comes next
    for i, cell in enumerate(nb.cells):
        if waiting and cell.cell_type == "code":
            as_run_all_shows(cell, waiting)
        waiting = None if cell.cell_type == "code" else waiting
        if i in gates:
            number = text.targets[owner[i].label].number
            prose = text.plain(GATE_BLOCK.sub("", cell.source)).strip()
            if "start" in gates[i]:
                heading = new_markdown(cell, "solution", f"#### Solution to Exercise {number}", **{COLLAPSED: True})
                heading.metadata["id"] = heading.id  # the id Colab's collapsed_sections refers to
                folded.append(heading.id)
                cells.append(heading)
            if prose:
                cells.append(new_markdown(cell, "solution-text", prose))
            if "end" in gates[i]:
                cells.append(new_markdown(cell, "answer", "#### Your answer"))
                cells.append(nbformat.v4.new_code_cell(ANSWER.format(number=number), id=derived_id(cell, "answer-code")))
                waiting = number
            continue
        if cell.cell_type == "markdown":
            cell.source = text.plain(cell.source)
            cells.append(cell)
            if i in by_cell:
                cell.metadata[EXERCISE_META] = exercise_metadata(by_cell[i], text)
                if by_cell[i].written:
                    cells.append(prediction_cell(cell, words=by_cell[i].words))
            continue
        if cell.cell_type == "code":
            cell.outputs = [out for out in cell.outputs if not is_glue_record(out)]
            if COLAB_TAG in cell.metadata.get("tags", []):
                if not colab:
                    continue
                cell.execution_count = None  # not run yet, as far as the learner is concerned
                cell.metadata.setdefault("jupyter", {})["source_hidden"] = True  # folded: it is Colab's
        if i in solved:
            number = text.targets[solved[i].label].number
            cell.source = SOLUTION_LINE.format(number=number) + "\n" + cell.source
        cells.append(cell)
        if caption := figure_caption(cell, text):
            cells.append(caption)
    nb.cells = cells
    nb.metadata["colab"] = {"collapsed_sections": folded}
    return nb


def as_text(nb: nbformat.NotebookNode) -> str:
    """The file's text, as nbformat writes it (validated)."""
    nbformat.validate(nb)
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="chapter notebooks (chapters/NN_slug.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("editions"), help="output folder (default: editions)")
    parser.add_argument("--keep", action="store_true",
                        help="the learner's folder: never overwrite a copy the learner has edited (make lab)")
    args = parser.parse_args(argv)
    for chapter in args.chapters:
        if chapter.suffix != ".ipynb" or not chapter.is_file():
            print(f"error: {chapter} is not a notebook file; pass chapters/*.ipynb", file=sys.stderr)
            return 2
    try:
        editions = {chapter.name: learner_edition(chapter) for chapter in args.chapters}
    except MystError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.keep:
        print(report(place({name: as_text(nb) for name, nb in editions.items()}, args.out), args.out))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, nb in editions.items():
        (args.out / name).write_text(as_text(nb), encoding="utf-8")
    print(f"wrote {len(editions)} editions to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
