"""Grade one submitted notebook against the book's chapter: assemble, execute sandboxed, re-check, report."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from .answers import has_function
from .assemble import SAVE_TAG, Book, assemble, submission_chapter
from .execute import Stopped, execute
from .recheck import MARK
from .report import OTHER, WHOLE, Row, prediction_text
from .sandbox import make_workdir, wrap

RECHECK = Path(__file__).with_name("recheck.py")
BOOK_SOLUTION = "(the book's solution)"  # how a check marks a pass of the folded solution in a learners' edition


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


def _not_run(stopped: Stopped | None, origin: dict[int, int]) -> tuple[str, str]:
    """Why a check cell did not run; cells are numbered as in the submission (grader cells: as added)."""
    if stopped is None:
        return "error", "the check cell did not run"
    cell = f"cell {origin.get(stopped.cell, stopped.cell)}" if stopped.cell is not None else "a cell"
    if stopped.kind == "never started":
        return "error", "not run: the kernel never started (see the (notebook) row)"
    if stopped.kind == "timeout":
        why = stopped.detail if stopped.detail.startswith("the notebook") else f"{cell} {stopped.detail}"
        return "timeout", f"not run: the kernel was killed because {why}"
    return "error", f"not run: the kernel died at {cell} (os._exit, a crash or running out of memory): {stopped.detail}"


def _in_kernel(nb, answer_cells: list[int], check_cell: int, stopped: Stopped | None,
               origin: dict[int, int]) -> tuple[str, str]:
    """The result of one exercise as its cells show it in the executed notebook.

    The check decides, as in nbgrader: an answer cell that raised after defining what the check reads (a
    stub's ``raise NotImplementedError()`` left below the answer, say) does not fail a check that passed;
    it is noted. When the check did not pass, an error in the answer's cells is the likelier reason.
    """
    answer_error = next((err for i in answer_cells if (err := _error(nb.cells[i]))), None)
    check = nb.cells[check_cell]
    if check.get("execution_count") is None:
        return ("error", _explain(answer_error)) if answer_error else _not_run(stopped, origin)
    if err := _error(check):
        if answer_error:
            return "error", _explain(answer_error)
        if err.startswith("NotAnswered"):  # attn_helpers/checks/_answer.py: the answer cell defines no answer
            return "error", f"not answered: {err.removeprefix('NotAnswered:').strip()}"
        if err.startswith("CheckFailed"):
            return "failed", err.removeprefix("CheckFailed:").strip()
        return "error", _explain(err)
    if "✓" not in _stdout(check):
        return "error", "the check cell printed no '✓ … correct' line"
    if BOOK_SOLUTION in _stdout(check):  # attn_helpers/checks/_answer.py: the answer cell was left as made
        return "error", ("not answered: a learners' edition (make lab, Colab) handed in with this exercise's answer "
                         "cell untouched, so the check ran on the book's folded solution")
    return "passed", f"(an answer cell also raised {answer_error})" if answer_error else ""


_PACKAGE_COPY: Path | None = None


def prepare_checks(package_root: Path, import_now: bool) -> None:
    """Copy attn_helpers for the re-checks in this (the grader's) process, before any submission runs.

    With bwrap no kernel can write the copy (nor see it, under /tmp); without bwrap a kernel could, so
    the checks are imported from it at once, before the first kernel starts.
    """
    global _PACKAGE_COPY
    if _PACKAGE_COPY is None:
        _PACKAGE_COPY = Path(tempfile.mkdtemp(prefix="grade-package-"))
        atexit.register(shutil.rmtree, _PACKAGE_COPY, True)
        make_workdir(_PACKAGE_COPY, package_root)
        sys.path.insert(0, str(_PACKAGE_COPY / "book"))
    if import_now:  # attn_helpers' own import is light: plotting, pandas and the checks load when used
        import attn_helpers.checks  # noqa: F401


def _import_private_copy(package_root: Path) -> None:
    prepare_checks(package_root, import_now=True)


def _recheck(book: Book, labels: list[str], answers: Path, base: Path, timeout: float,
             hide: list[Path]) -> dict[str, tuple[str, str]]:
    """Re-check the saved answers of ``labels`` outside the student's kernel.

    Answers without functions are plain data, loaded without running any code (answers.py), so they are
    re-checked here, in the grader's own process. Answers with functions run the student's code, so they
    are re-checked in a fresh sandboxed process, with a fresh copy of attn_helpers.
    """
    from .recheck import recheck

    results: dict[str, tuple[str, str]] = {}
    checks = {ex.label: ex.check_source for ex in book.exercises}
    with_code = [label for label in labels if has_function(answers / f"{label}.pt")]
    for label in labels:
        if label not in with_code:
            _import_private_copy(book.package_root)
            results[label] = recheck(book.check_import, label, checks[label], answers / f"{label}.pt")
    if not with_code:
        return results
    work, private = base / "recheck", base / "recheck-private"
    work.mkdir()
    private.mkdir()
    cwd = make_workdir(work, book.package_root)
    (work / "answers").mkdir()
    exercises = []
    for label in with_code:
        saved = answers / f"{label}.pt"
        shutil.copy(saved, work / "answers" / saved.name)
        exercises.append({"label": label, "check_source": checks[label], "file": str(work / "answers" / saved.name)})
    spec = work / "spec.json"
    spec.write_text(json.dumps({"check_import": book.check_import, "exercises": exercises}))
    for script in ("recheck.py", "answers.py"):  # next to the spec, where the sandbox surely sees them
        shutil.copy(RECHECK.with_name(script), work / script)
    argv = wrap([sys.executable, str(work / "recheck.py"), str(spec)], work, cwd, private, hide)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout * len(exercises) + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    for line in out.splitlines():
        if line.startswith(MARK):
            try:
                got = json.loads(line.removeprefix(MARK))
                if got["label"] in with_code:
                    results.setdefault(got["label"], (got["result"], got["detail"]))
            except (ValueError, KeyError, TypeError):
                continue
    for label in with_code:
        if label not in results:
            last = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
            results[label] = ("unverified", f"the re-check in a fresh process did not finish: {last}")
    return results


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
    base = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        work, private = base / "work", base / "private"
        work.mkdir()
        private.mkdir()
        (work / "answers").mkdir()
        (private / "answers").mkdir()
        asm = assemble(sub, book, work / "answers")
        rows = [Row(student, label, "missing", "this exercise is not in the submission (deleted, or its "
                                               "label was changed)") for label in asm.missing]
        if asm.other_chapter:
            rows.insert(0, Row(student, WHOLE, "error",
                               f"this is chapter {asm.other_chapter}'s notebook (its exercises are "
                               f"ex-ch{asm.other_chapter}-…); the assignment is chapter {book.chapter}"))
        if not asm.check_cells:
            if not asm.other_chapter:
                rows.insert(0, Row(student, WHOLE, "error", f"none of the chapter's exercises were found "
                                                            f"(its chapter: {submission_chapter(sub) or 'unknown'})"))
            return rows
        cwd = make_workdir(work, book.package_root)
        nb = asm.nb
        save_cells = {i: label for label, i in asm.save_cells.items()}

        def copy_out(cell_index: int) -> None:  # take the answers out of the sandbox as soon as they are saved
            if cell_index in save_cells:
                saved = work / "answers" / f"{save_cells[cell_index]}.pt"
                if saved.is_file() and not saved.is_symlink():
                    shutil.copy(saved, private / "answers" / saved.name)

        stopped = execute(nb, work, cwd, private, timeout, notebook_timeout, hide, copy_out)
        if stopped is not None and stopped.kind == "never started":  # the grader's set-up, not the submission
            log = " | ".join(stopped.log) or "(the kernel's log is empty)"
            print(f"error: the kernel for {student} never started ({stopped.detail}); the last lines of its log:\n"
                  + "\n".join(f"    {line}" for line in stopped.log), file=sys.stderr)
            rows.insert(0, Row(student, WHOLE, "error", f"the kernel never started, so nothing was graded: a problem "
                                                        f"of the grader's set-up, not of the submission; the last "
                                                        f"lines of the kernel's log: {log}"))
        results = {label: _in_kernel(nb, asm.answer_cells[label], asm.check_cells[label], stopped, asm.origin)
                   for label in asm.check_cells}
        for label, i in asm.save_cells.items():  # a save cell that failed: say why in the re-check
            if results[label][0] == "passed" and (err := _error(nb.cells[i])):
                results[label] = ("unverified", f"the grader could not save the answers: {err}")
        passed = [label for label, (result, _) in results.items() if result == "passed"]
        if passed:
            for label, (result, detail) in _recheck(book, passed, private / "answers", base, timeout, hide).items():
                if result in ("failed", "error"):
                    detail = f"the check passed in the student's kernel but not on its saved answers: {detail}"
                elif result == "unverified":
                    detail = f"the check passed in the student's kernel; {detail}"
                elif result == "passed":
                    detail = results[label][1]  # what the kernel noted, if anything
                results[label] = (result, detail)
        for label in asm.recovered:  # worth a look: the notebook went through something that drops metadata
            result, detail = results[label]
            results[label] = (result, "; ".join(filter(None, [detail, "found by its heading: the notebook lost "
                                                                       "its cell metadata"])))
        order = [e.label for e in book.exercises]
        rows += [Row(student, label, *results[label], prediction_text(asm.predictions[label])
                     if label in asm.predictions else "") for label in order if label in results]
        rows.sort(key=lambda r: (r.exercise != WHOLE, order.index(r.exercise) if r.exercise in order else -1))
        graded = {i for label in asm.check_cells for i in [*asm.answer_cells[label], asm.check_cells[label]]}
        graded |= set(asm.save_cells.values())
        others = [(i, err) for i, cell in enumerate(nb.cells) if i not in graded and (err := _error(cell))]
        if others:  # a broken teaching cell can explain failing exercises further down
            i, err = others[0]
            more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
            rows.append(Row(student, OTHER, "error", f"cell {asm.origin.get(i, i)}: {_explain(err)}{more}"))
        return rows
    finally:
        shutil.rmtree(base, ignore_errors=True)


__all__ = ["grade_notebook", "prepare_checks", "SAVE_TAG"]
