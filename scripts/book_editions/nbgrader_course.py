"""The nbgrader course source: each chapter as ``nbgrader generate_assignment`` wants it, with nbgrader's cell
metadata (schema version 3).

scripts/make_nbgrader.py says what the source holds; here it is as its list of steps, ``NBGRADER``, and
``make_nbgrader`` writes a chapter's source into a course folder.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import nbformat
from book_toc import ROOT

from .cells import tag
from .chapter import Chapter
from .exercise_cells import CHECK_TAG, SOLUTION_TAG, Exercise
from .steps import DropGated, DropGlueRecords, ExerciseMetadata, ResolveMyst
from .walk import At, Edition, Step

POINTS = {"easy": 1, "medium": 2, "hard": 3}
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CONFIG = '''\
# nbgrader's settings for this course folder, written by scripts/make_nbgrader.py (edit freely: it is kept).
import os
import warnings

from jupyter_core.paths import jupyter_runtime_dir
from sqlalchemy.exc import SAWarning

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "self-attention-from-scratch"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = 120          # seconds a cell may run when autograding; the chapters' cells take a few

# nbgrader 0.9 with SQLAlchemy 2 warns "Object of type <SubmittedAssignment> not in session" on every
# submission, and stores the grades all the same.
warnings.filterwarnings("ignore", category=SAWarning, module="nbgrader")
# ipykernel 7 warns "Kernel is running over TCP without encryption" when its sockets are TCP ports on
# localhost: as files in Jupyter's runtime folder (IPC, on Linux and macOS), they do not use the network.
if os.name == "posix":
    os.makedirs(jupyter_runtime_dir(), exist_ok=True)
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(jupyter_runtime_dir(), f"nbgrader-{os.getpid()}")
'''


def nbgrader_meta(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                  points: int | None = None) -> dict:
    """The ``nbgrader`` cell metadata, schema version 3."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


LIST_ITEM_RE = re.compile(r"^(?:[-*+]|\d+\.)\s+")


def as_comments(notes: str, width: int = 100) -> str:
    """``notes`` as Python comment lines: each paragraph, or list item, wrapped to ``width`` as a whole (its
    source's line breaks do not count), with a bare ``#`` line between paragraphs."""
    lines: list[str] = []
    for para in re.split(r"\n[ \t]*\n", notes.strip()) if notes.strip() else []:
        items: list[str] = []
        for line in para.splitlines():
            if not items or LIST_ITEM_RE.match(line.strip()):
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        lines += ["#"] if lines else []
        for item in items:
            marker = LIST_ITEM_RE.match(item)
            indent = " " * len(marker.group(0)) if marker else ""
            lines += [f"# {line}" for line in textwrap.wrap(item, width - 2, break_long_words=False,
                                                             break_on_hyphens=False, subsequent_indent=indent)]
    return "".join(line + "\n" for line in lines)


def points(ex: Exercise) -> int:
    """The points an exercise is worth: 1, 2 or 3 for easy, medium or hard."""
    if ex.level not in POINTS:
        raise ValueError(f"exercise {ex.label}: say easy, medium or hard in its title so it can be given points")
    return POINTS[ex.level]


class SolutionRegion(Step):
    """A solution code cell is an autograded answer: its code between ``### BEGIN SOLUTION`` and ``### END
    SOLUTION``, which the release replaces by the stub, after the written solution as comments (the first of
    the exercise's solution cells, unless the exercise asks for written words, which take it instead)."""

    def begin(self, chapter: Chapter) -> None:
        chapter.written_solutions  # noqa: B018  (resolved before the walk, so a MyST error there is the first)

    def cell(self, at: At) -> None:
        chapter, i = at.chapter, at.index
        if i not in chapter.solution_code:
            return
        ex = chapter.owner.get(i)
        # the exercise's solution cells before this one (grade ids -solution, -solution-2 ...)
        n = sum(1 for j in chapter.solution_code if j < i and j in chapter.owner and chapter.owner[j].label == ex.label)
        comments = as_comments(chapter.written_solutions[ex.label] if not ex.written and n == 0 else "")
        at.cell.source = f"{BEGIN}\n{comments}{at.cell.source.rstrip()}\n{END}"
        at.cell.outputs, at.cell.execution_count = [], None
        at.cell.metadata["nbgrader"] = nbgrader_meta(f"{ex.label}-solution" + (f"-{n + 1}" if n else ""),
                                                     solution=True)
        tag(at.cell, SOLUTION_TAG)


class GradedCheck(Step):
    """A check cell is a locked autograded test worth the exercise's points, with no output."""

    def cell(self, at: At) -> None:
        i = at.index
        if i in at.chapter.checks and i not in at.chapter.solution_code:
            ex = at.chapter.checks[i]
            at.cell.outputs, at.cell.execution_count = [], None
            at.cell.metadata["nbgrader"] = nbgrader_meta(f"{ex.label}-check", grade=True, locked=True,
                                                         points=points(ex))
            at.cell.metadata["tags"] = [CHECK_TAG]


class LockCell(Step):
    """Every other cell is locked read-only: ``<label>-text`` for an exercise's text, else ``chNN-cell-NNN``."""

    def cell(self, at: At) -> None:
        i = at.index
        if i in at.chapter.solution_code or i in at.chapter.checks:
            return
        grade_id = f"{at.exercise.label}-text" if at.exercise else f"ch{at.chapter.path.name[:2]}-cell-{i:03d}"
        at.cell.metadata["nbgrader"] = nbgrader_meta(grade_id, locked=True)


class WrittenAnswer(Step):
    """After the text of an exercise that asks for written words, a manually graded markdown cell worth its
    points, holding the chapter's written answer between the markers (the release puts "YOUR ANSWER HERE")."""

    def cell(self, at: At) -> None:
        ex = at.exercise
        if ex is None or not ex.written:
            return
        answer = at.chapter.written_solutions[ex.label] or (
            "Write your answer in words here." if ex.words else "Write your prediction and your reasoning here.")
        name = f"{ex.label}-{'words' if ex.words else 'prediction'}"  # also its id: the same at every build
        at.add(nbformat.v4.new_markdown_cell(f"{BEGIN}\n{answer}\n{END}", id=name[-64:], metadata={
            "nbgrader": nbgrader_meta(name, solution=True, grade=True, points=points(ex))}))


# The gate step, DropGated, comes before ResolveMyst (book_editions/walk.py's rules of order).
NBGRADER = Edition("nbgrader", [DropGated({"markdown"}), SolutionRegion(), GradedCheck(), ResolveMyst(),
                                DropGlueRecords(), ExerciseMetadata(), LockCell(), WrittenAnswer()])


def nbgrader_source(chapter: Path, root: Path = ROOT) -> nbformat.NotebookNode:
    """The nbgrader source notebook of ``chapter``: ``NBGRADER``'s steps."""
    return NBGRADER.make(chapter, root)


def make_nbgrader(chapter: Path, course: Path, root: Path = ROOT) -> Path:
    """Write ``chapter``'s nbgrader source into the course folder ``course``; return the notebook's path."""
    nb = nbgrader_source(chapter, root)
    target = course / "source" / f"ch{Path(chapter).name[:2]}" / Path(chapter).name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
    return target


__all__ = ["BEGIN", "CONFIG", "END", "NBGRADER", "POINTS", "GradedCheck", "LockCell", "SolutionRegion",
           "WrittenAnswer", "as_comments", "make_nbgrader", "nbgrader_meta", "nbgrader_source", "points"]
