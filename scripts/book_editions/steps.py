"""The steps more than one edition takes, each with one job (book_editions/walk.py says how steps run, and the
two rules of their order: a gate step before ``ResolveMyst``, a step before those its ``comes_before`` names).

An edition's own steps are in its module: learners.py (fold the solutions), student.py (stub them) and
nbgrader_course.py (mark them for nbgrader).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .cells import exercise_metadata, figure_caption, is_glue_record, prediction_cell
from .exercise_cells import EXERCISE_META
from .walk import At, Step


class ResolveMyst(Step):
    """A markdown cell in plain Markdown, as JupyterLab and Colab render it (book_editions/plain_markdown.py)."""

    def cell(self, at: At) -> None:
        if at.is_markdown:
            at.cell.source = at.chapter.text.plain(at.cell.source)


class DropGlueRecords(Step):
    """A code cell without the invisible outputs through which myst-nb's ``glue`` records a value."""

    def cell(self, at: At) -> None:
        if at.is_code:
            at.cell.outputs = [out for out in at.cell.outputs if not is_glue_record(out)]


class FigureCaption(Step):
    """Under a code cell that draws a numbered figure, a markdown cell with its number and caption."""

    def cell(self, at: At) -> None:
        if caption := figure_caption(at.cell, at.chapter.text):
            at.add(caption)


class ExerciseMetadata(Step):
    """An exercise's text cell keeps its label, title, level and number in its ``exercise`` metadata."""

    def cell(self, at: At) -> None:
        if at.is_markdown and at.exercise:
            at.cell.metadata[EXERCISE_META] = exercise_metadata(at.exercise, at.chapter.text)


class PredictionCell(Step):
    """Under the text of an exercise that asks for written words (a prediction, or an answer in words), a
    markdown cell where the learner writes them."""

    def cell(self, at: At) -> None:
        if at.is_markdown and at.exercise and at.exercise.written:
            at.add(prediction_cell(at.cell, words=at.exercise.words))


@dataclass(frozen=True, repr=False)
class DropGated(Step):
    """Leave out the cells of the given types from a ``{solution-start}`` gate to its ``{solution-end}`` gate."""

    cell_types: Collection[str]

    @property
    def takes_gates(self) -> bool:
        """A gate is a markdown cell: dropping markdown drops the gates (book_editions/walk.py's order rules)."""
        return "markdown" in self.cell_types

    def cell(self, at: At) -> None:
        if at.index in at.chapter.gated and at.cell.cell_type in self.cell_types:
            at.drop()


__all__ = ["DropGated", "DropGlueRecords", "ExerciseMetadata", "FigureCaption", "PredictionCell", "ResolveMyst"]
