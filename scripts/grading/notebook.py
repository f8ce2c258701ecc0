"""Grade one submitted notebook against the book's chapter, in named phases: assemble, execute sandboxed, read
what the kernel showed, re-check, report.

As the editions are a list of steps over one cell walk (``book_editions/walk.py``), grading is a list of phases,
:data:`PHASES`, over one :class:`Grading`: each phase is a function that does one job, reads what the phases before
it left there and adds its own; a phase may end the grading early (``finished``), leaving the rows it has.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .answers import has_function
from .assemble import SAVE_TAG, Assembled, Book, assemble, submission_chapter
from .execute import Stopped, execute
from .outcome import Outcome, Result
from .recheck import SANDBOXED, read_reports, recheck
from .report import OTHER, WHOLE, Row, prediction_text
from .sandbox import make_workdir, wrap


def _error(cell) -> str | None:
    """'ExceptionType: message' of the first error a cell raised, else None."""
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            return f"{out.ename}: {out.evalue}".strip().rstrip(":").splitlines()[0]  # one line for the table
    return None


def _stdout(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.output_type == "stream")


def _explain(err: str) -> str:
    if err.startswith("NotImplementedError"):
        # the student edition's stub, whose message says what to do (book_editions.cells.stub)
        if "is not answered yet" in err:
            err = "NotImplementedError"
        return f"{err} (not answered: the stub is still there)"
    return err


def _not_run(stopped: Stopped | None, origin: dict[int, int]) -> Outcome:
    """Why a check cell did not run; cells are numbered as in the submission (grader cells: as added)."""
    if stopped is None:
        return Outcome(Result.ERROR, "the check cell did not run")
    cell = f"cell {origin.get(stopped.cell, stopped.cell)}" if stopped.cell is not None else "a cell"
    if stopped.kind == "never started":
        return Outcome(Result.ERROR, "not run: the kernel never started (see the (notebook) row)")
    if stopped.kind == "timeout":
        why = stopped.detail if stopped.detail.startswith("the notebook") else f"{cell} {stopped.detail}"
        return Outcome(Result.TIMEOUT, f"not run: the kernel was killed because {why}")
    return Outcome(Result.ERROR, f"not run: the kernel died at {cell} (os._exit, a crash or running out of memory): "
                                 f"{stopped.detail}")


def _in_kernel(nb, answer_cells: list[int], check_cell: int, stopped: Stopped | None,
               origin: dict[int, int]) -> Outcome:
    """The outcome of one exercise as its cells show it in the executed notebook.

    The check decides, as in nbgrader: an answer cell that raised after defining what the check reads (a
    stub's ``raise NotImplementedError()`` left below the answer, say) does not fail a check that passed;
    it is noted. When the check did not pass, an error in the answer's cells is the likelier reason.
    """
    answer_error = next((err for i in answer_cells if (err := _error(nb.cells[i]))), None)
    check = nb.cells[check_cell]
    if check.get("execution_count") is None:
        return Outcome(Result.ERROR, _explain(answer_error)) if answer_error else _not_run(stopped, origin)
    # only now: the checks' package imports torch, seconds the grading of a notebook that never ran need not wait
    from attn_helpers.checks.protocol import PASS_MARK, book_solution_passed, failure, shows_a_pass

    if err := _error(check):
        if answer_error:
            return Outcome(Result.ERROR, _explain(answer_error))
        if (failed := failure(err)) and failed[0] == "not answered":  # the answer cell defines no answer
            return Outcome(Result.ERROR, f"not answered: {failed[1]}")
        if failed:
            return Outcome(Result.FAILED, failed[1])
        return Outcome(Result.ERROR, _explain(err))
    if not shows_a_pass(_stdout(check)):
        return Outcome(Result.ERROR, f"the check cell printed no '{PASS_MARK} … correct' line")
    if book_solution_passed(_stdout(check)):  # a learners' edition whose answer cell was left as made
        return Outcome(Result.ERROR, "not answered: a learners' edition (make lab, Colab) handed in with this "
                                     "exercise's answer cell untouched, so the check ran on the book's folded solution")
    return Outcome(Result.PASSED, f"(an answer cell also raised {answer_error})" if answer_error else "")


_PACKAGE_COPY: Path | None = None


def prepare_checks(package_root: Path, import_now: bool) -> None:
    """Copy attn_helpers for the re-checks in this (the grader's) process, before any submission runs.

    With bwrap no kernel can write the copy (nor see it, under /tmp); without bwrap a kernel could, so
    the checks are imported from it at once, before the first kernel starts. Until then nothing of the grader
    imports attn_helpers (the protocol of the checks' messages included: it is imported where it is read).
    """
    global _PACKAGE_COPY
    if _PACKAGE_COPY is None:
        _PACKAGE_COPY = Path(tempfile.mkdtemp(prefix="grade-package-"))
        atexit.register(shutil.rmtree, _PACKAGE_COPY, True)
        make_workdir(_PACKAGE_COPY, package_root)
        sys.path.insert(0, str(_PACKAGE_COPY / "book"))
    if import_now:  # attn_helpers' own import is light: plotting, pandas and the checks load when used
        import attn_helpers.checks  # noqa: F401


def _recheck_sandboxed(book: Book, labels: list[str], answers: Path, base: Path, timeout: float,
                       hide: list[Path]) -> dict[str, Outcome]:
    """Re-check the saved answers of ``labels`` (answers with functions, which run the student's code) in a fresh
    sandboxed process, ``python -m grading.recheck``, with a fresh copy of attn_helpers."""
    checks = {ex.label: ex.check_source for ex in book.exercises}
    work, private = base / "recheck", base / "recheck-private"
    work.mkdir()
    private.mkdir()
    cwd = make_workdir(work, book.package_root)
    (work / "answers").mkdir()
    exercises = []
    for label in labels:
        saved = answers / f"{label}.pt"
        shutil.copy(saved, work / "answers" / saved.name)
        exercises.append({"label": label, "check_source": checks[label], "file": str(work / "answers" / saved.name)})
    spec = work / "spec.json"
    spec.write_text(json.dumps({"check_import": book.check_import, "exercises": exercises}))
    package = work / "book" / "grading"  # on the sandbox's PYTHONPATH, beside its copy of attn_helpers
    package.mkdir()
    for module in SANDBOXED:
        shutil.copy(Path(__file__).with_name(module), package / module)
    argv = wrap([sys.executable, "-m", "grading.recheck", str(spec)], work, cwd, private, hide)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout * len(exercises) + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    results = read_reports(out, labels)
    for label in labels:
        if label not in results:
            last = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
            results[label] = Outcome(Result.UNVERIFIED, f"the re-check in a fresh process did not finish: {last}")
    return results


def after_recheck(in_kernel: Outcome, again: Outcome) -> Outcome:
    """An exercise that passed in the student's kernel, as its re-check leaves it: passed only if both agree."""
    if again.result in (Result.FAILED, Result.ERROR):
        return Outcome(again.result, f"the check passed in the student's kernel but not on its saved answers: "
                                     f"{again.detail}")
    if again.result == Result.UNVERIFIED:
        return Outcome(again.result, f"the check passed in the student's kernel; {again.detail}")
    if again.result == Result.PASSED:
        return Outcome(Result.PASSED, in_kernel.detail)  # what the kernel noted, if anything
    return again


@dataclass
class Grading:
    """One submission on its way through the :data:`PHASES`: what it is graded against and in, and what each
    phase found so far."""

    submission: nbformat.NotebookNode
    student: str
    book: Book
    timeout: float
    notebook_timeout: float
    hide: list[Path]
    base: Path                               # a fresh folder, removed after grading
    asm: Assembled | None = None             # the notebook to execute (assemble)
    stopped: Stopped | None = None           # why execution stopped early, if it did (execute_sandboxed)
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # label -> outcome, in the book's order at the end
    rows: list[Row] = field(default_factory=list)
    finished: bool = False                   # a phase found nothing more to grade

    @property
    def work(self) -> Path:
        return self.base / "work"

    @property
    def private(self) -> Path:
        return self.base / "private"


def assemble_submission(g: Grading) -> None:
    """The book's check cells put back into the submission, with a save cell after each; a row for each exercise
    missing, and for a notebook of another chapter, or one in which no exercise of the chapter was found."""
    for folder in (g.work, g.private, g.work / "answers", g.private / "answers"):
        folder.mkdir(parents=True)
    g.asm = asm = assemble(g.submission, g.book, g.work / "answers")
    g.rows += [Row(g.student, label, Result.MISSING.value, "this exercise is not in the submission (deleted, or its "
                                                           "label was changed)") for label in asm.missing]
    if asm.other_chapter:
        g.rows.insert(0, Row(g.student, WHOLE, Result.ERROR.value,
                             f"this is chapter {asm.other_chapter}'s notebook (its exercises are "
                             f"ex-ch{asm.other_chapter}-…); the assignment is chapter {g.book.chapter}"))
    if not asm.check_cells:
        if not asm.other_chapter:
            chapter = submission_chapter(g.submission) or "unknown"
            g.rows.insert(0, Row(g.student, WHOLE, Result.ERROR.value,
                                 f"none of the chapter's exercises were found (its chapter: {chapter})"))
        g.finished = True


def execute_sandboxed(g: Grading) -> None:
    """The assembled notebook run in a sandboxed kernel; each save cell's answers copied out as soon as saved. A
    kernel that never started is the grader's problem, said once, on the (notebook) row and on stderr."""
    cwd = make_workdir(g.work, g.book.package_root)
    save_cells = {i: label for label, i in g.asm.save_cells.items()}

    def copy_out(cell_index: int) -> None:  # take the answers out of the sandbox as soon as they are saved
        if cell_index in save_cells:
            saved = g.work / "answers" / f"{save_cells[cell_index]}.pt"
            if saved.is_file() and not saved.is_symlink():
                shutil.copy(saved, g.private / "answers" / saved.name)

    g.stopped = stopped = execute(g.asm.nb, g.work, cwd, g.private, g.timeout, g.notebook_timeout, g.hide, copy_out)
    if stopped is not None and stopped.kind == "never started":  # the grader's set-up, not the submission
        log = " | ".join(stopped.log) or "(the kernel's log is empty)"
        print(f"error: the kernel for {g.student} never started ({stopped.detail}); the last lines of its log:\n"
              + "\n".join(f"    {line}" for line in stopped.log), file=sys.stderr)
        g.rows.insert(0, Row(g.student, WHOLE, Result.ERROR.value,
                             f"the kernel never started, so nothing was graded: a problem of the grader's set-up, "
                             f"not of the submission; the last lines of the kernel's log: {log}"))


def read_the_kernel(g: Grading) -> None:
    """Each exercise's outcome as its cells show it in the executed notebook (:func:`_in_kernel`)."""
    asm = g.asm
    g.outcomes = {label: _in_kernel(asm.nb, asm.answer_cells[label], asm.check_cells[label], g.stopped, asm.origin)
                  for label in asm.check_cells}


def check_the_saves(g: Grading) -> None:
    """A passed exercise whose save cell raised cannot be re-checked: unverified, saying why."""
    for label, i in g.asm.save_cells.items():
        if g.outcomes[label].result == Result.PASSED and (err := _error(g.asm.nb.cells[i])):
            g.outcomes[label] = Outcome(Result.UNVERIFIED, f"the grader could not save the answers: {err}")


def recheck_the_passes(g: Grading) -> None:
    """Every exercise that passed in the kernel, checked again on its saved answers outside that kernel: plain
    data in this process (answers.py loads it without running code), functions in a fresh sandboxed process."""
    passed = [label for label, outcome in g.outcomes.items() if outcome.result == Result.PASSED]
    answers = g.private / "answers"
    with_code = [label for label in passed if has_function(answers / f"{label}.pt")]
    checks = {ex.label: ex.check_source for ex in g.book.exercises}
    again = {}
    for label in passed:
        if label not in with_code:
            prepare_checks(g.book.package_root, import_now=True)
            again[label] = recheck(g.book.check_import, label, checks[label], answers / f"{label}.pt")
    if with_code:
        again |= _recheck_sandboxed(g.book, with_code, answers, g.base, g.timeout, g.hide)
    for label, outcome in again.items():
        g.outcomes[label] = after_recheck(g.outcomes[label], outcome)


def note_the_recovered(g: Grading) -> None:
    """Worth a look: an exercise found by its heading, the notebook having lost its cell metadata."""
    for label in g.asm.recovered:
        g.outcomes[label] = g.outcomes[label].noting("found by its heading: the notebook lost its cell metadata")


def write_the_rows(g: Grading) -> None:
    """One row per exercise in the book's order (with its written prediction), then one for the first error of a
    cell outside the exercises (a broken teaching cell can explain failing exercises further down)."""
    asm, order = g.asm, [e.label for e in g.book.exercises]
    g.rows += [Row(g.student, label, g.outcomes[label].result.value, g.outcomes[label].detail,
                   prediction_text(asm.predictions[label]) if label in asm.predictions else "")
               for label in order if label in g.outcomes]
    g.rows.sort(key=lambda r: (r.exercise != WHOLE, order.index(r.exercise) if r.exercise in order else -1))
    graded = {i for label in asm.check_cells for i in [*asm.answer_cells[label], asm.check_cells[label]]}
    graded |= set(asm.save_cells.values())
    others = [(i, err) for i, cell in enumerate(asm.nb.cells) if i not in graded and (err := _error(cell))]
    if others:
        i, err = others[0]
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        g.rows.append(Row(g.student, OTHER, Result.ERROR.value, f"cell {asm.origin.get(i, i)}: {_explain(err)}{more}"))


#: The phases of grading one submission, in order.
PHASES: list[Callable[[Grading], None]] = [assemble_submission, execute_sandboxed, read_the_kernel, check_the_saves,
                                           recheck_the_passes, note_the_recovered, write_the_rows]


def grade_notebook(path: Path, student: str, book: Book, timeout: float = 60, notebook_timeout: float = 300,
                   hide: list[Path] = ()) -> list[Row]:
    """Grade one submission; one row per exercise of the book's chapter, plus notes."""
    try:
        sub = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook, unreadable ...
        return [Row(student, WHOLE, "error", f"cannot read the notebook: {type(exc).__name__}: {exc}".splitlines()[0])]
    try:
        return _grade(sub, student, book, timeout, notebook_timeout, hide)
    except Exception as exc:  # a notebook malformed in a way nbformat let through: one row, not a crash
        return [Row(student, WHOLE, "error", f"cannot grade the notebook: {type(exc).__name__}: {exc}".splitlines()[0])]


def _grade(sub: nbformat.NotebookNode, student: str, book: Book, timeout: float, notebook_timeout: float,
           hide: list[Path]) -> list[Row]:
    g = Grading(sub, student, book, timeout, notebook_timeout, list(hide), Path(tempfile.mkdtemp(prefix="grade-")))
    try:
        for phase in PHASES:
            phase(g)
            if g.finished:
                break
        return g.rows
    finally:
        shutil.rmtree(g.base, ignore_errors=True)


__all__ = ["PHASES", "Grading", "grade_notebook", "prepare_checks", "SAVE_TAG"]
