"""The one cell walk of every edition: an ``Edition`` is an ordered list of ``Step``s, each with one job.

As in nbgrader, whose converters are lists of preprocessors, a step does one thing to the cells it concerns
(resolve the MyST of a markdown cell, drop the glue records of a code cell, add a caption under a figure ...)
and leaves the rest alone. ``Edition.make`` walks the chapter's cells once, in order; each cell goes through
the steps in the list's order, and each step may change it, drop it (the steps after it then skip it) or add
cells after it (which no later step sees). Then each step may finish the notebook as a whole. A new edition,
or a new cell convention, is one more list, or one more step in a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from book_toc import ROOT

from .chapter import Chapter
from .exercise_cells import Exercise


@dataclass
class At:
    """One of the chapter's cells on its way through the steps: its index in the chapter, the cell as the steps
    have made it so far (None once dropped) and the cells they added after it."""

    chapter: Chapter
    index: int
    cell: nbformat.NotebookNode | None
    added: list[nbformat.NotebookNode] = field(default_factory=list)

    @property
    def is_markdown(self) -> bool:
        return self.cell.cell_type == "markdown"

    @property
    def is_code(self) -> bool:
        return self.cell.cell_type == "code"

    @property
    def exercise(self) -> Exercise | None:
        """The exercise whose text this cell is, else None."""
        return self.chapter.exercise_at.get(self.index)

    def drop(self) -> None:
        """Leave this cell out of the edition (cells added after it stay)."""
        self.cell = None

    def add(self, cell: nbformat.NotebookNode) -> None:
        """Put ``cell`` after this one (and after the cells added before it)."""
        self.added.append(cell)


class Step:
    """One job of an edition. ``begin`` sees the chapter before the walk, ``cell`` each of its cells in turn,
    ``end`` the finished notebook; each does nothing unless the step needs it."""

    def begin(self, chapter: Chapter) -> None:
        pass

    def cell(self, at: At) -> None:
        pass

    def end(self, nb: nbformat.NotebookNode, chapter: Chapter) -> None:
        pass

    def __repr__(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Edition:
    """An edition of the chapters: a name and the ordered steps that make it from a chapter."""

    name: str
    steps: Sequence[Step]

    def apply(self, chapter: Chapter) -> nbformat.NotebookNode:
        """Walk ``chapter``'s cells once through the steps; return its notebook, now the edition (changed in place)."""
        for step in self.steps:
            step.begin(chapter)
        cells = []
        for i, cell in enumerate(chapter.nb.cells):
            at = At(chapter, i, cell)
            for step in self.steps:
                if at.cell is None:
                    break
                step.cell(at)
            cells += ([] if at.cell is None else [at.cell]) + at.added
        chapter.nb.cells = cells
        for step in self.steps:
            step.end(chapter.nb, chapter)
        return chapter.nb

    def make(self, path: Path, root: Path = ROOT) -> nbformat.NotebookNode:
        """The edition of the chapter notebook at ``path`` (a notebook of the book in ``root``)."""
        return self.apply(Chapter.read(path, root))


__all__ = ["At", "Edition", "Step"]
