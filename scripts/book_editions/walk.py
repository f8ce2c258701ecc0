"""The one cell walk of every edition: an ``Edition`` is an ordered list of ``Step``s, each with one job.

As in nbgrader, whose converters are lists of preprocessors, a step does one thing to the cells it concerns
(resolve the MyST of a markdown cell, drop the glue records of a code cell, add a caption under a figure ...)
and leaves the rest alone. ``Edition.make`` walks the chapter's cells once, in order; each cell goes through
the steps in the list's order, and each step may change it, drop it (the steps after it then skip it) or add
cells after it (which no later step sees). Then each step may finish the notebook as a whole. A new edition,
or a new cell convention, is one more list, or one more step in a list (CONTRIBUTING.md, "Adding an edition").

Most steps can go anywhere in a list; two rules of order hold, and ``Edition.order_errors`` says in a sentence
which one a list breaks (tests/test_edition_steps.py runs it over every edition):

- **A gate step before ``ResolveMyst``.** The gates of a solution, the ``{solution-start}`` and ``{solution-end}``
  cells, have no plain-Markdown form: a step that takes them out of the way (``Step.takes_gates``: learners'
  ``FoldSolution``, ``DropGated`` of markdown cells) must come before ``ResolveMyst``, which would stop at them.
- **A step before the steps it names in ``Step.comes_before``**, when both are in the list (``AnswerCell``
  before ``FoldSolution``, which takes the gate's place above the answer cells).
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

    takes_gates = False  # True for a step that drops or replaces the gate cells (it must precede ResolveMyst)
    comes_before: tuple[str, ...] = ()  # names of the steps this one must precede when both are in a list

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

    def order_errors(self) -> list[str]:
        """A sentence for each rule of order (this module's docstring) that the steps' list breaks."""
        names = [type(step).__name__ for step in self.steps]
        errors = []
        if "ResolveMyst" in names:
            resolve = names.index("ResolveMyst")
            if not any(step.takes_gates for step in self.steps[:resolve]):
                errors.append(f"the edition {self.name!r} has no gate step (FoldSolution, DropGated of markdown "
                              "cells) before ResolveMyst, which cannot resolve a {solution-start} or "
                              "{solution-end} cell: put one before it (book_editions/walk.py)")
        for i, step in enumerate(self.steps):
            for later in step.comes_before:
                if later in names[:i]:
                    errors.append(f"in the edition {self.name!r}, {names[i]} must come before {later} "
                                  f"({type(step).__name__}.comes_before): move it up")
        return errors

    def make(self, path: Path, root: Path = ROOT) -> nbformat.NotebookNode:
        """The edition of the chapter notebook at ``path`` (a notebook of the book in ``root``)."""
        return self.apply(Chapter.read(path, root))


__all__ = ["At", "Edition", "Step"]
