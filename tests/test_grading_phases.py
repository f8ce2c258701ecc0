"""The grader's phases one by one (scripts/grading/notebook.py's PHASES), each on a Grading made by hand: what it
reads from the phases before it and what it leaves for those after. tests/test_grade.py and test_grade_hostile.py
grade whole submissions in real sandboxed kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from grading import notebook
from grading.assemble import read_book
from grading.execute import Stopped
from grading.notebook import Grading, after_recheck
from grading.outcome import Outcome, Result
from grading.recheck import SANDBOXED, read_reports, report_line
from grading_fixtures import CHECKS, LABELS, RIGHT, WRONG, chapter, code, student_edition, write

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def book(tmp_path):
    return read_book(write(chapter(), tmp_path / "01_synthetic.ipynb"))


def grading(book, tmp_path, submission=None) -> Grading:
    return Grading(submission if submission is not None else student_edition(), "alice", book, 30, 60, [],
                   tmp_path / "base")


def assembled(book, tmp_path, submission=None) -> Grading:
    g = grading(book, tmp_path, submission)
    notebook.assemble_submission(g)
    return g


def ran(g: Grading, outputs: dict[str, tuple[list, list]]) -> Grading:
    """``g`` as if its kernel had run: for each label, the (answer cell's, check cell's) outputs."""
    for label, (answer, check) in outputs.items():
        for i in g.asm.answer_cells[label]:
            g.asm.nb.cells[i].outputs = answer
        g.asm.nb.cells[g.asm.check_cells[label]].outputs = check
        g.asm.nb.cells[g.asm.check_cells[label]].execution_count = 1
    return g


def passed(name: str) -> list:
    return [nbformat.v4.new_output("stream", name="stdout", text=f"✓ {name}: correct\n")]


def raised(ename: str, evalue: str = "") -> list:
    return [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])]


def test_the_phases_are_the_grading_in_order():
    assert [p.__name__ for p in notebook.PHASES] == [
        "assemble_submission", "execute_sandboxed", "read_the_kernel", "check_the_saves", "recheck_the_passes",
        "note_the_recovered", "write_the_rows"]


def test_assemble_puts_the_books_checks_back_and_names_a_missing_exercise(book, tmp_path):
    sub = student_edition()
    first_check = next(i for i, c in enumerate(sub.cells) if c.source == CHECKS["ex-ch01-batch"])
    del sub.cells[first_check - 2:first_check + 1]  # the last exercise's heading, answer and check
    g = assembled(book, tmp_path, sub)
    assert not g.finished and list(g.asm.check_cells) == LABELS[:2]
    assert [(r.exercise, r.result) for r in g.rows] == [("ex-ch01-batch", "missing")]
    assert all((g.base / folder).is_dir() for folder in ("work/answers", "private/answers"))


def test_assemble_ends_the_grading_of_another_chapters_notebook(book, tmp_path):
    g = assembled(book, tmp_path, student_edition(labels=["ex-ch02-predict", "ex-ch02-function", "ex-ch02-batch"]))
    assert g.finished
    whole = g.rows[0]
    assert (whole.exercise, whole.result) == ("(notebook)", "error") and "chapter 02's notebook" in whole.detail


def test_assemble_ends_the_grading_of_a_notebook_without_exercises(book, tmp_path):
    g = assembled(book, tmp_path, nbformat.v4.new_notebook(cells=[code("x = 1")]))
    assert g.finished and "none of the chapter's exercises were found" in g.rows[0].detail


def test_execute_copies_each_saved_answer_out_and_names_a_kernel_that_never_started(book, tmp_path, monkeypatch,
                                                                                     capsys):
    g = assembled(book, tmp_path)
    save = g.asm.save_cells["ex-ch01-predict"]

    def kernel(nb, work, cwd, private, timeout, notebook_timeout, hide, after_cell):
        (work / "answers" / "ex-ch01-predict.pt").write_bytes(b"saved")
        after_cell(save)
        return Stopped("never started", None, "exit status 1", ["bwrap: no such file"])

    monkeypatch.setattr(notebook, "execute", kernel)
    notebook.execute_sandboxed(g)
    assert (g.private / "answers" / "ex-ch01-predict.pt").read_bytes() == b"saved"
    assert g.stopped.kind == "never started" and "the kernel never started" in g.rows[0].detail
    assert "bwrap: no such file" in g.rows[0].detail and "never started" in capsys.readouterr().err


def test_read_the_kernel_gives_each_exercise_its_outcome(book, tmp_path):
    g = ran(assembled(book, tmp_path), {
        "ex-ch01-predict": ([], passed("w_doubled")),
        "ex-ch01-function": ([], raised("CheckFailed", "W is not right yet.")),
        "ex-ch01-batch": ([], raised("NotAnswered", "Your answer cell does not define Ys")),
    })
    notebook.read_the_kernel(g)
    assert g.outcomes == {"ex-ch01-predict": Outcome(Result.PASSED),
                          "ex-ch01-function": Outcome(Result.FAILED, "W is not right yet."),
                          "ex-ch01-batch": Outcome(Result.ERROR, "not answered: Your answer cell does not define Ys")}


def test_read_the_kernel_does_not_pass_the_books_solution_or_a_check_that_printed_no_pass(book, tmp_path):
    g = ran(assembled(book, tmp_path), {
        "ex-ch01-predict": ([], [nbformat.v4.new_output("stream", name="stdout",
                                                        text="✓ w_doubled: correct (the book's solution)\n")]),
        "ex-ch01-function": ([], [nbformat.v4.new_output("stream", name="stdout", text="all good\n")]),
    })
    notebook.read_the_kernel(g)
    assert g.outcomes["ex-ch01-predict"].result == Result.ERROR
    assert "answer cell untouched" in g.outcomes["ex-ch01-predict"].detail
    assert g.outcomes["ex-ch01-function"] == Outcome(Result.ERROR, "the check cell printed no '✓ … correct' line")
    assert g.outcomes["ex-ch01-batch"] == Outcome(Result.ERROR, "the check cell did not run")


def test_a_save_cell_that_raised_leaves_a_pass_unverified(book, tmp_path):
    g = assembled(book, tmp_path)
    g.outcomes = {label: Outcome(Result.PASSED) for label in LABELS}
    g.outcomes["ex-ch01-batch"] = Outcome(Result.FAILED, "no")
    for label in ("ex-ch01-predict", "ex-ch01-batch"):
        g.asm.nb.cells[g.asm.save_cells[label]].outputs = raised("PicklingError", "cannot pickle")
    notebook.check_the_saves(g)
    why = "the grader could not save the answers: PicklingError: cannot pickle"
    assert g.outcomes["ex-ch01-predict"] == Outcome(Result.UNVERIFIED, why)
    assert g.outcomes["ex-ch01-function"] == Outcome(Result.PASSED)
    assert g.outcomes["ex-ch01-batch"] == Outcome(Result.FAILED, "no")  # only a pass needs its answers saved


@pytest.mark.parametrize("again, expected", [
    (Outcome(Result.PASSED), Outcome(Result.PASSED, "(an answer cell also raised X)")),
    (Outcome(Result.FAILED, "hint"),
     Outcome(Result.FAILED, "the check passed in the student's kernel but not on its saved answers: hint")),
    (Outcome(Result.ERROR, "E: e"),
     Outcome(Result.ERROR, "the check passed in the student's kernel but not on its saved answers: E: e")),
    (Outcome(Result.UNVERIFIED, "why"), Outcome(Result.UNVERIFIED, "the check passed in the student's kernel; why")),
])
def test_a_pass_stands_only_if_its_re_check_agrees(again, expected):
    assert after_recheck(Outcome(Result.PASSED, "(an answer cell also raised X)"), again) == expected


def test_the_re_check_takes_data_in_process_and_functions_to_the_sandbox(book, tmp_path, monkeypatch):
    g = assembled(book, tmp_path)
    g.outcomes = {"ex-ch01-predict": Outcome(Result.PASSED), "ex-ch01-function": Outcome(Result.PASSED),
                  "ex-ch01-batch": Outcome(Result.FAILED, "no")}
    here, sandboxed = [], []
    monkeypatch.setattr(notebook, "has_function", lambda path: path.stem == "ex-ch01-function")
    monkeypatch.setattr(notebook, "prepare_checks", lambda root, import_now: None)
    monkeypatch.setattr(notebook, "recheck", lambda imp, label, src, path: here.append(label) or Outcome(Result.PASSED))
    monkeypatch.setattr(notebook, "_recheck_sandboxed", lambda book, labels, *a: sandboxed.extend(labels) or {
        label: Outcome(Result.FAILED, "forged") for label in labels})
    notebook.recheck_the_passes(g)
    assert here == ["ex-ch01-predict"] and sandboxed == ["ex-ch01-function"]  # a failed exercise is not re-checked
    assert g.outcomes["ex-ch01-predict"] == Outcome(Result.PASSED)
    assert g.outcomes["ex-ch01-function"].result == Result.FAILED
    assert g.outcomes["ex-ch01-batch"] == Outcome(Result.FAILED, "no")


def test_the_recovered_exercises_are_noted(book, tmp_path):
    g = assembled(book, tmp_path)
    g.asm.recovered = ["ex-ch01-function"]
    g.outcomes = {"ex-ch01-predict": Outcome(Result.PASSED), "ex-ch01-function": Outcome(Result.FAILED, "hint")}
    notebook.note_the_recovered(g)
    assert g.outcomes["ex-ch01-function"] == Outcome(
        Result.FAILED, "hint; found by its heading: the notebook lost its cell metadata")
    assert g.outcomes["ex-ch01-predict"] == Outcome(Result.PASSED)


def test_the_rows_follow_the_book_and_name_a_broken_teaching_cell(book, tmp_path):
    g = assembled(book, tmp_path)
    g.rows = [notebook.Row("alice", "(notebook)", "error", "a note")]
    g.outcomes = {"ex-ch01-batch": Outcome(Result.FAILED, "hint"), "ex-ch01-predict": Outcome(Result.PASSED)}
    g.asm.nb.cells[1].outputs = raised("ModuleNotFoundError", "No module named 'x'")  # the set-up cell
    notebook.write_the_rows(g)
    assert [(r.exercise, r.result, r.detail) for r in g.rows] == [
        ("(notebook)", "error", "a note"), ("ex-ch01-predict", "passed", ""), ("ex-ch01-batch", "failed", "hint"),
        ("(other cells)", "error", f"cell {g.asm.origin.get(1, 1)}: ModuleNotFoundError: No module named 'x'")]


def test_the_re_checks_report_lines_are_read_back_first_one_per_label():
    out = "\n".join([report_line("a", Outcome(Result.PASSED)), "noise", 'RECHECK {"label": "b", "result": "bogus"}',
                     report_line("b", Outcome(Result.FAILED, "hint")), report_line("a", Outcome(Result.FAILED, "x")),
                     report_line("c", Outcome(Result.PASSED))])
    assert read_reports(out, ["a", "b"]) == {"a": Outcome(Result.PASSED), "b": Outcome(Result.FAILED, "hint")}


def test_the_re_check_runs_as_a_module_from_the_copied_modules_alone(tmp_path):
    """What the sandbox gets: SANDBOXED's modules as the package ``grading`` beside attn_helpers; a data answer
    saved as the kernel saves it, right and wrong, re-checked by ``python -m grading.recheck``."""
    package = tmp_path / "book" / "grading"
    package.mkdir(parents=True)
    for module in SANDBOXED:
        (package / module).write_bytes((ROOT / "scripts" / "grading" / module).read_bytes())
    from grading import answers

    exercises = []
    for name, source in [("right", RIGHT["ex-ch01-predict"]), ("wrong", WRONG["ex-ch01-predict"])]:
        namespace: dict = {}
        exec(chapter().cells[1].source + "\n" + source, namespace)
        exec(answers.save_cell_source(name, ["w_doubled"], tmp_path / f"{name}.pt"), namespace)
        exercises.append({"label": name, "check_source": CHECKS["ex-ch01-predict"],
                          "file": str(tmp_path / f"{name}.pt")})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"check_import": "from attn_helpers.checks import ch01 as check",
                                "exercises": exercises}))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'book'}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "grading.recheck", str(spec)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    got = read_reports(done.stdout, ["right", "wrong"])
    assert got["right"] == Outcome(Result.PASSED), done.stdout + done.stderr
    assert got["wrong"].result == Result.FAILED and "softmax" in got["wrong"].detail
