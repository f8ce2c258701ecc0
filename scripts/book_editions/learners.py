"""The learners' editions: the chapters as a learner opens them in JupyterLab or on Colab, solutions folded.

scripts/make_editions.py says what an edition holds; here it is as its list of steps, ``LEARNERS`` for the
committed editions (which the Colab and Binder buttons open) and ``LAB`` for ``make lab``'s copies, which
Colab never opens and which leave out the Colab set-up cell.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from book_toc import ROOT

from attn_helpers.checks.protocol import SOLUTION_LINE, correct_line, parse_correct_line, waiting_note

from .cells import derived_id, new_markdown
from .chapter import Chapter
from .exercise_cells import GATE_BLOCK
from .steps import DropGlueRecords, ExerciseMetadata, FigureCaption, PredictionCell, ResolveMyst
from .walk import At, Edition, Step

COLLAPSED = "jp-MarkdownHeadingCollapsed"  # JupyterLab's own metadata for a folded heading
ANSWER = ("# Your answer to Exercise {number}: write your code here, in place of these three lines,\n"
          "# run it, then run the check below. Until then, the check checks the folded solution above.\n"
          'ah.checks.no_answer_yet("{number}")')
COLAB_TAG = "colab-setup"  # each chapter's first code cell, which sets up Colab and does nothing elsewhere


def answered_before(chapter: Chapter, index: int) -> str | None:
    """The number of the exercise whose "Your answer" cell the edition puts right before the chapter's cell
    ``index`` (only cells that are not code between them), else None."""
    for i in range(index - 1, -1, -1):
        if chapter.cells[i].cell_type == "code":
            return None
        if i in chapter.gates and "end" in chapter.gates[i][1]:
            return chapter.number(chapter.gates[i][0])
    return None


class CheckAsRunAllShows(Step):
    """The check cell under an untouched answer cell shows what Run All prints there: that the book's solution
    passed, and that the exercise waits for the learner's answer (attn_helpers/checks/protocol.py)."""

    def cell(self, at: At) -> None:
        if not at.is_code or (number := answered_before(at.chapter, at.index)) is None:
            return
        for out in at.cell.outputs:
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                passes = [parse_correct_line(line) for line in out.text.splitlines()]
                if passes and all(found is not None and not found[1] for found in passes):  # the learner's own passes
                    shown = [correct_line(name, book_solution=True) for name, _ in passes]
                    out.text = "\n".join([waiting_note(number), *shown]) + "\n"


class AnswerCell(Step):
    """Under each ``{solution-end}`` gate, a "Your answer" heading over a code cell for the learner's own attempt:
    it runs after the folded solution, so the check cell below it checks the learner's answer. It comes before
    ``FoldSolution`` in the list, which takes the gate cell's place (and puts the gate's prose above these)."""

    comes_before = ("FoldSolution",)

    def cell(self, at: At) -> None:
        ex, kinds = at.chapter.gates.get(at.index, (None, []))
        if "end" in kinds:
            at.add(new_markdown(at.cell, "answer", "#### Your answer"))
            at.add(nbformat.v4.new_code_cell(ANSWER.format(number=at.chapter.number(ex)),
                                             id=derived_id(at.cell, "answer-code")))


class FoldSolution(Step):
    """Each solution folded under a heading, "Solution to Exercise 1.2", that JupyterLab, Notebook 7 and Colab
    show collapsed: the ``{solution-start}`` cell gives way to that heading, a gate's prose (if any) to a hidden
    cell, and a gate with neither is dropped."""

    takes_gates = True

    def cell(self, at: At) -> None:
        if at.index not in at.chapter.gates:
            return
        ex, kinds = at.chapter.gates[at.index]
        gate = at.cell
        prose = at.chapter.text.plain(GATE_BLOCK.sub("", gate.source)).strip()
        folded = []
        if "start" in kinds:
            heading = new_markdown(gate, "solution", f"#### Solution to Exercise {at.chapter.number(ex)}",
                                   **{COLLAPSED: True})
            heading.metadata["id"] = heading.id  # the id Colab's collapsed_sections refers to
            folded.append(heading)
        if prose:
            folded.append(hidden(new_markdown(gate, "solution-text", prose)))
        if not folded:
            at.drop()
            return
        # In the gate's place, so above what the steps before added under it ("Your answer"); the steps after see
        # plain Markdown there, which ResolveMyst leaves as it is.
        at.cell = folded[0]
        at.added[:0] = folded[1:]

    def end(self, nb: nbformat.NotebookNode, chapter: Chapter) -> None:
        """Colab folds the headings its notebook metadata lists, by their ``metadata.id``."""
        folded = [derived_id(chapter.cells[i], "solution") for i, (_, kinds) in sorted(chapter.gates.items())
                  if "start" in kinds]
        nb.metadata["colab"] = {"collapsed_sections": folded}


SOLUTION_TEXT = "<details><summary>The book's solution in words (click to open)</summary>\n\n{prose}\n\n</details>"


def hidden(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``cell``, a solution's cell, kept out of view however the learner runs it: a code cell's source and
    outputs collapsed (its first line, ``# The book's solution to Exercise 1.2 (folded) …``, is what JupyterLab
    shows of it); a markdown cell's prose inside a closed ``<details>`` (running a markdown cell uncollapses
    it, but renders a ``<details>`` closed)."""
    if cell.cell_type == "code":
        cell.setdefault("metadata", {}).setdefault("jupyter", {}).update(source_hidden=True, outputs_hidden=True)
    elif cell.cell_type == "markdown":
        cell.source = SOLUTION_TEXT.format(prose=cell.source.strip())
    return cell


class HideSolution(Step):
    """Every cell of a solution, code and prose, kept out of view on top of its folded heading. Running a
    chapter cell by cell (Shift+Enter, the toolbar's run button) makes each cell in turn the active one, and
    JupyterLab and Notebook 7 unfold the heading above the active cell, and show the output of a code cell run
    and the text of a markdown cell run, whatever their metadata: so a solution's code stays collapsed
    (``source_hidden``, which a run keeps), its output is not made (the kernel runs a cell that begins with
    ``# The book's solution`` under ``%%capture``, attn_helpers/checks/_answer.py) and its prose is a closed
    ``<details>``."""

    def cell(self, at: At) -> None:
        if at.index in at.chapter.solution_code or (at.index in at.chapter.gated and at.index not in at.chapter.gates):
            hidden(at.cell)


class SolutionLine(Step):
    """A solution code cell begins with the comment line by which the check tells the folded solution's names
    from the learner's (attn_helpers/checks/_answer.py)."""

    def cell(self, at: At) -> None:
        if (ex := at.chapter.tagged_solutions.get(at.index)) is not None:
            at.cell.source = SOLUTION_LINE.format(number=at.chapter.number(ex)) + "\n" + at.cell.source


def is_colab_setup(at: At) -> bool:
    return at.is_code and COLAB_TAG in at.cell.metadata.get("tags", [])


class FoldColabSetup(Step):
    """The Colab set-up cell folded, without the "[1]" of the chapter's run (not run yet, for the learner)."""

    def cell(self, at: At) -> None:
        if is_colab_setup(at):
            at.cell.execution_count = None
            at.cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


class DropColabSetup(Step):
    """No Colab set-up cell: the copies ``make lab`` makes are opened in JupyterLab, never on Colab."""

    def cell(self, at: At) -> None:
        if is_colab_setup(at):
            at.drop()


def learners_steps(colab_setup: Step) -> list[Step]:
    """The learners' steps, in an order that matters (tests/test_edition_steps.py holds each list to it):
    ``AnswerCell`` before ``FoldSolution`` (which takes the gate's place, above the answer), both gate steps
    before ``ResolveMyst`` (which cannot resolve a gate; see book_editions/steps.py)."""
    return [CheckAsRunAllShows(), AnswerCell(), FoldSolution(), ResolveMyst(), ExerciseMetadata(), PredictionCell(),
            DropGlueRecords(), colab_setup, SolutionLine(), HideSolution(), FigureCaption()]


LEARNERS = Edition("learners", learners_steps(FoldColabSetup()))
LAB = Edition("make lab's copies", learners_steps(DropColabSetup()))


def learner_edition(chapter: Path, root: Path = ROOT, colab: bool = True) -> nbformat.NotebookNode:
    """The learners' edition of ``chapter`` (a notebook of the book in ``root``): ``LEARNERS``, or without
    ``colab`` (``make lab``'s copies) ``LAB``."""
    return (LEARNERS if colab else LAB).make(chapter, root)


def as_text(nb: nbformat.NotebookNode) -> str:
    """The file's text, as nbformat writes it (validated)."""
    nbformat.validate(nb)
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


__all__ = ["LAB", "LEARNERS", "AnswerCell", "CheckAsRunAllShows", "DropColabSetup", "FoldColabSetup", "FoldSolution",
           "HideSolution", "SolutionLine", "as_text", "learner_edition"]
