"""Read the book's chapter (the instructor's copy) and assemble from a submission the notebook to execute.

As nbgrader's autograde does, the exercises and their check cells come from the book, not from the
submission: every output of the submission is cleared, each exercise's check cell is replaced by the
book's (matched by label, inserted if the student deleted it), and after it the grader adds a cell that
saves the answer variables that check reads (answers.py), for the re-check in a fresh process.

A student edition whose cell metadata was lost (a notebook rebuilt by copying cells, an editor that drops
tags) still has its visible exercise headings, "### Exercise 1.2 (medium): …" (book_editions/exercise_cells.py,
EXERCISE_HEADING, which the editions write and ``read_heading`` reads): each is matched to the
exercise whose label its text shows (or else the book's exercise of that number), and its check cell is
the one that calls the book's check function.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import book_toc
import nbformat
from book_editions.exercise_cells import (
    CHECK_TAG,
    EXERCISE_META,
    EXERCISE_RE,
    GATE_RE,
    Exercise,
    exercise_meta,
    find_exercises,
    is_solution,
    read_heading,
    written_prediction,
)
from book_editions.numbering import numbered

from .answers import save_cell_source
from .sandbox import ROOT

LABEL_CHAPTER_RE = re.compile(r"^ex-ch(\d+)-")
CHECK_FUNCTION_RE = re.compile(r"\bcheck\.(\w+)\(")
SAVE_TAG = "grader-save"


@dataclass
class BookExercise:
    label: str
    check_source: str   # the book's check cell
    names: list[str]    # the variables it reads (the answers)
    predict: bool = False  # a written prediction or answer in words (Exercise.written): to the grades, for a person


@dataclass
class Book:
    path: Path
    chapter: str | None              # '01', from the labels
    exercises: list[BookExercise]
    check_import: str                # the statement that binds `check`,
    #                                  e.g. from attn_helpers.checks import ch01 as check
    package_root: Path = ROOT        # the folder with the attn_helpers and data that each submission gets a copy of

    @property
    def numbers(self) -> dict[str, str]:
        """Label by exercise number ("1.2"), as the editions number them (book_editions/numbering.py): N.k, the
        k-th exercise of chapter N."""
        if self.chapter is None:
            return {}
        return {numbered(int(self.chapter), k): e.label for k, e in enumerate(self.exercises, start=1)}


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
        exercises.append(BookExercise(ex.label, source, _read_names(source), ex.written))
    if not exercises:
        raise BookError(f"{path.name} has no exercises")
    chapters = {label_chapter(e.label) for e in exercises}
    return Book(path, chapters.pop() if len(chapters) == 1 else None, exercises, _check_import(nb))


CHAPTER_RE = re.compile(r"^\s*(?:ch(?:apter)?[ _-]?)?0*(?P<number>\d{1,3})\s*$", re.IGNORECASE)


def chapter_number(chapter: str) -> str:
    """'01' for '1', '01' or 'ch01' (the name of nbgrader's assignment); BookError for anything else."""
    m = CHAPTER_RE.match(chapter)
    if not m:
        raise BookError(f"CHAPTER={chapter!r} is not a chapter: give its number, 1 or 01, or nbgrader's name for "
                        f"it, ch01")
    return f"{int(m.group('number')):02d}"


def find_chapter(chapter: str, root: Path = ROOT) -> Path:
    """The notebook of chapter ``NN`` (1, 01 or ch01) of the book in ``root``, as ``_toc.yml`` lists it."""
    try:
        return book_toc.chapter(int(chapter_number(chapter)), root)
    except LookupError as exc:
        raise BookError(f"CHAPTER={chapter!r}: {exc}") from None


def _heading(cell: nbformat.NotebookNode) -> tuple[str, str | None] | None:
    """(number, label shown under its text or None) of a student edition's exercise heading cell, else None:
    the heading and label line that book_editions/exercise_cells.py formats (EXERCISE_HEADING, SHOWN_LABEL)."""
    return read_heading(cell.source) if cell.cell_type == "markdown" else None


def submission_chapter(nb: nbformat.NotebookNode) -> str | None:
    """The chapter most of a notebook's exercise labels belong to (those its headings show, if it lost its
    cell metadata), or None if it has none."""
    labels = [ex.label for ex in find_exercises(nb)] or [
        shown for cell in nb.cells if (heading := _heading(cell)) and (shown := heading[1])]
    counts = Counter(c for label in labels if (c := label_chapter(label)))
    return counts.most_common(1)[0][0] if counts else None


def infer_chapter(notebooks: list[nbformat.NotebookNode]) -> str | None:
    """The chapter most notebooks of a folder belong to, by their exercise labels."""
    counts = Counter(c for nb in notebooks if (c := submission_chapter(nb)))
    return counts.most_common(1)[0][0] if counts else None


def recover_headings(nb: nbformat.NotebookNode, book: Book) -> tuple[nbformat.NotebookNode, list[str]]:
    """``nb`` with a student edition's exercise metadata put back on the headings that lost it.

    A markdown cell that starts "### Exercise N.k", without exercise metadata, is the exercise its text
    shows the label of ("*Label: `ex-ch01-batch`*"), or else the book's exercise numbered N.k; unless the
    notebook has that exercise already. Returns a copy, and the labels recovered.
    """
    have = {ex.label for ex in find_exercises(nb)}
    nb, recovered = copy.deepcopy(nb), []
    for cell in nb.cells:
        if exercise_meta(cell) is not None or not (heading := _heading(cell)):
            continue
        number, shown = heading
        label = shown or book.numbers.get(number)
        if label and label not in have and label not in recovered:
            cell.setdefault("metadata", {})[EXERCISE_META] = {"label": label}
            recovered.append(label)
    return nb, recovered


def _check_cell(nb: nbformat.NotebookNode, ex: Exercise, end: int, book_check: str) -> int | None:
    """Which cell of the submission's exercise ``ex`` (cells up to ``end``) is its check cell, if any.

    A student edition tags it. Without the tag (the book's own form, or metadata lost) it is the first code
    cell, not an answer tagged `solution`, that calls a function the book's check cell calls: an answer
    that calls another helper of the checks (``Xs = check.sequence_first_batch()``) is never taken for it.
    """
    code = [i for i in range(ex.cell + 1, end) if nb.cells[i].cell_type == "code"]
    tagged = [i for i in code if CHECK_TAG in nb.cells[i].get("metadata", {}).get("tags", [])]
    if tagged:
        return tagged[0]
    functions = set(CHECK_FUNCTION_RE.findall(book_check))
    return next((i for i in code if not is_solution(nb.cells[i])
                 and functions & set(CHECK_FUNCTION_RE.findall(nb.cells[i].source))), None)


def _prediction(nb: nbformat.NotebookNode, ex: Exercise) -> str | None:
    """The text of a student edition's prediction cell for ``ex`` (tagged, or, metadata lost, the markdown cell
    right after its heading), without the prompt the edition puts on its first line, stripped; None if the
    submission has no such cell (the book's own form)."""
    i = ex.prediction_cell
    if i is None and ex.cell + 1 < len(nb.cells):
        after = nb.cells[ex.cell + 1]
        if after.cell_type == "markdown" and not _heading(after) and not EXERCISE_RE.search(after.source) \
                and not GATE_RE.search(after.source):
            i = ex.cell + 1
    return None if i is None else written_prediction(nb.cells[i].source)


@dataclass
class Assembled:
    nb: nbformat.NotebookNode
    check_cells: dict[str, int] = field(default_factory=dict)    # label -> index of the book's check cell
    save_cells: dict[str, int] = field(default_factory=dict)     # label -> index of the grader's save cell
    answer_cells: dict[str, list[int]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    other_chapter: str | None = None  # set when the submission's exercises belong to another chapter
    recovered: list[str] = field(default_factory=list)  # exercises found by their headings (metadata lost)
    predictions: dict[str, str | None] = field(default_factory=dict)  # label -> the written prediction, None: no cell
    origin: dict[int, int] = field(default_factory=dict)         # index here -> index in the submission


def _code(source: str, tag: str | None = None) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata={"tags": [tag]} if tag else {})


def assemble(submission: nbformat.NotebookNode, book: Book, answers_dir: Path) -> Assembled:
    """The notebook to execute: the submission's cells, outputs cleared, the book's check cells put back."""
    submission, recovered = recover_headings(submission, book)
    exercises = find_exercises(submission)
    found = {}
    for ex in exercises:
        found.setdefault(ex.label, ex)  # a duplicated exercise: the first one counts
    wanted = {e.label: e for e in book.exercises}
    mine = [label for label in found if label in wanted]
    others = Counter(c for label in found if (c := label_chapter(label)) and c != book.chapter)
    # where each exercise's check goes: (index of the cell it replaces, or of the cell it follows)
    replace, after = {}, {}
    for label in mine:
        ex = found[label]
        end = next((e.cell for e in exercises if e.cell > ex.cell), len(submission.cells))
        ex.check_cell = _check_cell(submission, ex, end, wanted[label].check_source)
        ex.answer_cells = [i for i in range(ex.cell + 1, end if ex.check_cell is None else ex.check_cell)
                           if submission.cells[i].cell_type == "code"]
        if ex.check_cell is not None:
            replace[ex.check_cell] = label
        else:  # the check cell was deleted or edited beyond recognition: add the book's at the end
            after[end - 1] = label
    out = Assembled(nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                      "language": "python"}}))
    out.predictions = {label: _prediction(submission, found[label]) for label in mine if wanted[label].predict}
    out.missing = [e.label for e in book.exercises if e.label not in mine]
    out.recovered = [label for label in recovered if label in mine]
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
