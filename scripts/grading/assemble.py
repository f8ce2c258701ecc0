"""Read the book's chapter (the instructor's copy) and assemble from a submission the notebook to execute.

As nbgrader's autograde does, the exercises and their check cells come from the book, not from the
submission: every output of the submission is cleared, each exercise's check cell is replaced by the
book's (matched by label, inserted if the student deleted it), and after it the grader adds a cell that
saves the answer variables that check reads (answers.py), for the re-check in a fresh process.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from exercise_cells import Exercise
from exercise_cells import find_exercises as _find_exercises

from .answers import save_cell_source
from .sandbox import ROOT

LABEL_CHAPTER_RE = re.compile(r"^ex-ch(\d+)-")
SAVE_TAG = "grader-save"


def find_exercises(nb: nbformat.NotebookNode) -> list[Exercise]:
    """exercise_cells.find_exercises, also for a notebook without any exercise.

    (Its ``zip(..., strict=True)`` raises ValueError when a notebook has no exercise at all.)
    """
    try:
        return _find_exercises(nb)
    except ValueError:
        return []


@dataclass
class BookExercise:
    label: str
    check_source: str   # the book's check cell
    names: list[str]    # the variables it reads (the answers)


@dataclass
class Book:
    path: Path
    chapter: str | None              # '01', from the labels
    exercises: list[BookExercise]
    check_import: str                # the statement that binds `check`, e.g. from attn_helpers.checks import ch01 as check
    package_root: Path = ROOT        # the folder with the attn_helpers and data that each submission gets a copy of


class BookError(Exception):
    """The chapter does not follow the exercise convention well enough to grade from it."""


def label_chapter(label: str | None) -> str | None:
    """'01' for 'ex-ch01-batch', else None."""
    m = LABEL_CHAPTER_RE.match(label or "")
    return m.group(1) if m else None


def _read_names(source: str) -> list[str]:
    """The variables a check cell reads, without `check` itself and builtins."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != "check" \
                and not hasattr(builtins, node.id) and node.id not in names:
            names.append(node.id)
    return names


def _check_import(nb: nbformat.NotebookNode) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    to_python = TransformerManager().transform_cell  # IPython's magics (%config …) as the Python they run
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(to_python(cell.source))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name) == "check" for a in node.names):
                return ast.unparse(node)
    raise BookError("the chapter never imports its checks as `check` (from attn_helpers.checks import chNN as check)")


def read_book(path: Path) -> Book:
    """The exercises (label, check cell, names it reads) of the chapter notebook at ``path``."""
    nb = nbformat.read(path, as_version=4)
    exercises = []
    for ex in find_exercises(nb):
        if ex.label is None or ex.check_cell is None:
            raise BookError(f"{path.name}: the exercise at cell {ex.cell} has no label or no check cell")
        source = nb.cells[ex.check_cell].source
        exercises.append(BookExercise(ex.label, source, _read_names(source)))
    if not exercises:
        raise BookError(f"{path.name} has no exercises")
    chapters = {label_chapter(e.label) for e in exercises}
    return Book(path, chapters.pop() if len(chapters) == 1 else None, exercises, _check_import(nb))


def find_chapter(chapters_dir: Path, chapter: str) -> Path:
    """``chapters/NN_*.ipynb`` for chapter ``NN`` (1 or 01)."""
    found = sorted(chapters_dir.glob(f"{int(chapter):02d}_*.ipynb"))
    if len(found) != 1:
        raise BookError(f"expected one notebook {int(chapter):02d}_*.ipynb in {chapters_dir}, found {len(found)}")
    return found[0]


def submission_chapter(nb: nbformat.NotebookNode) -> str | None:
    """The chapter most of a notebook's exercise labels belong to, or None if it has none."""
    counts = Counter(c for ex in find_exercises(nb) if (c := label_chapter(ex.label)))
    return counts.most_common(1)[0][0] if counts else None


def infer_chapter(notebooks: list[nbformat.NotebookNode]) -> str | None:
    """The chapter most notebooks of a folder belong to, by their exercise labels."""
    counts = Counter(c for nb in notebooks if (c := submission_chapter(nb)))
    return counts.most_common(1)[0][0] if counts else None


@dataclass
class Assembled:
    nb: nbformat.NotebookNode
    check_cells: dict[str, int] = field(default_factory=dict)    # label -> index of the book's check cell
    save_cells: dict[str, int] = field(default_factory=dict)     # label -> index of the grader's save cell
    answer_cells: dict[str, list[int]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    other_chapter: str | None = None  # set when the submission's exercises belong to another chapter
    origin: dict[int, int] = field(default_factory=dict)         # index here -> index in the submission


def _code(source: str, tag: str | None = None) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata={"tags": [tag]} if tag else {})


def assemble(submission: nbformat.NotebookNode, book: Book, answers_dir: Path) -> Assembled:
    """The notebook to execute: the submission's cells, outputs cleared, the book's check cells put back."""
    found = {}
    for ex in find_exercises(submission):
        found.setdefault(ex.label, ex)  # a duplicated exercise: the first one counts
    wanted = {e.label: e for e in book.exercises}
    mine = [label for label in found if label in wanted]
    others = Counter(c for label in found if (c := label_chapter(label)) and c != book.chapter)
    # where each exercise's check goes: (index of the cell it replaces, or of the cell it follows)
    replace, after = {}, {}
    ends = {label: next((e.cell for e in find_exercises(submission) if e.cell > found[label].cell),
                        len(submission.cells)) for label in mine}
    for label in mine:
        ex = found[label]
        if ex.check_cell is not None:
            replace[ex.check_cell] = label
        else:  # the check cell was deleted or edited beyond recognition: add the book's at the end
            after[ends[label] - 1] = label
    out = Assembled(nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                      "language": "python"}}))
    out.missing = [e.label for e in book.exercises if e.label not in mine]
    if not mine and others:
        out.other_chapter = others.most_common(1)[0][0]
    index = {}

    def add_check(label: str) -> None:
        out.check_cells[label] = len(out.nb.cells)
        out.nb.cells.append(_code(wanted[label].check_source, "exercise-check"))
        out.save_cells[label] = len(out.nb.cells)
        out.nb.cells.append(_code(save_cell_source(label, wanted[label].names, answers_dir / f"{label}.pt"),
                                  SAVE_TAG))

    for i, cell in enumerate(submission.cells):
        if i in replace:
            add_check(replace[i])
        else:
            index[i] = len(out.nb.cells)
            out.origin[index[i]] = i
            if cell.cell_type == "code":
                out.nb.cells.append(_code(cell.source))  # no outputs, count, or tags (skip-execution…)
            elif cell.cell_type == "markdown":
                out.nb.cells.append(nbformat.v4.new_markdown_cell(cell.source))
            else:
                out.nb.cells.append(nbformat.v4.new_raw_cell(cell.source))
            if i in after:
                add_check(after[i])
    for label in mine:
        ex = found[label]
        out.answer_cells[label] = [index[i] for i in ex.answer_cells if i in index]
    return out
