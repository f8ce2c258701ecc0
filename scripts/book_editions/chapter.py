"""A chapter as the editions' steps read it: its notebook, its text resolver and the role of each of its cells.

``Chapter.read(path)`` reads a chapter notebook once and works out, before any step changes a cell, what each
cell is by the book's exercise convention (book_editions/exercise_cells.py): an exercise's text, a solution, a
gate of a solution dropdown, a check. The steps (book_editions/steps.py and the editions' own modules) only
look these up, so each of them does its one job whatever the steps before it changed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from book_toc import ROOT

from .exercise_cells import GATE_BLOCK, Exercise, find_exercises, is_solution
from .myst_syntax import MystError
from .plain_markdown import ChapterText


@dataclass
class Chapter:
    """A chapter notebook, its MyST resolver and its exercises, with each cell's role by cell index."""

    nb: nbformat.NotebookNode
    path: Path
    text: ChapterText
    exercises: list[Exercise]
    # By cell index, worked out before any step changes a cell:
    cells: list[nbformat.NotebookNode] = field(init=False)     # the chapter's cells, in order
    exercise_at: dict[int, Exercise] = field(init=False)       # the {exercise} cells
    owner: dict[int, Exercise] = field(init=False)             # every cell from an exercise's text to its check
    gates: dict[int, tuple[Exercise, list[str]]] = field(init=False)  # gate cells: exercise, ["start", "end"]
    gated: set[int] = field(init=False)                        # gate cells and the cells between two gates
    tagged_solutions: dict[int, Exercise] = field(init=False)  # code cells tagged `solution`, by exercise
    solution_code: set[int] = field(init=False)                # code cells tagged `solution` or between gates
    checks: dict[int, Exercise] = field(init=False)            # check cells

    def __post_init__(self) -> None:
        exercises = self.exercises
        self.cells = list(self.nb.cells)
        self.exercise_at = {ex.cell: ex for ex in exercises}
        self.owner = {i: ex for ex in exercises for i in range(ex.cell, (ex.check_cell or ex.cell) + 1)}
        self.gates = {}
        for ex in exercises:
            for kind, _, i in ex.gates:
                self.gates.setdefault(i, (ex, []))[1].append(kind)
        self.gated = inside_gates(exercises)
        self.tagged_solutions = {i: ex for ex in exercises for i in ex.solution_cells}
        self.solution_code = {i for i, cell in enumerate(self.cells)
                              if cell.cell_type == "code" and (is_solution(cell) or i in self.gated)}
        self.checks = {ex.check_cell: ex for ex in exercises}

    @classmethod
    def read(cls, path: Path, root: Path = ROOT, nb: nbformat.NotebookNode | None = None) -> Chapter:
        """The chapter at ``path`` (a notebook of the book in ``root``), or ``nb`` read from there already."""
        nb = nbformat.read(path, as_version=4) if nb is None else nb
        return cls(nb, Path(path), ChapterText.of(nb, path, root), find_exercises(nb))

    def written_solution(self, ex: Exercise) -> str:
        """The prose of ``ex``'s solution dropdown (its gate cells and the markdown between them), in plain Markdown."""
        parts = (GATE_BLOCK.sub("", self.cells[i].source).strip() for i in sorted(self.gated)
                 if self.owner.get(i) is ex and self.cells[i].cell_type == "markdown")
        return self.text.plain("\n\n".join(part for part in parts if part))

    @functools.cached_property
    def written_solutions(self) -> dict[str | None, str]:
        """:meth:`written_solution` of every exercise, by label, as the chapter was before any step changed it."""
        return {ex.label: self.written_solution(ex) for ex in self.exercises}

    def number(self, ex: Exercise | None) -> str:
        """The exercise's number, "1.2", as the website prints it (book_editions/numbering.py): the one number every
        edition writes for it. ``ex`` None (a cell that belongs to no exercise) is a MystError that says so."""
        if ex is None:
            raise MystError(f"{self.path.name}: a solution cell (tagged `solution`) comes before the chapter's first "
                            "{exercise}: move it under its exercise's text")
        return self.text.exercise_number(ex.label)


def inside_gates(exercises: list[Exercise]) -> set[int]:
    """Indices of the cells between a ``{solution-start}`` cell and its ``{solution-end}`` cell (gates included)."""
    inside, open_at = set(), None
    for ex in exercises:
        for kind, _, i in ex.gates:
            if kind == "start":
                open_at = i
            elif open_at is not None:
                inside.update(range(open_at, i + 1))
                open_at = None
    return inside


__all__ = ["Chapter", "inside_gates"]
