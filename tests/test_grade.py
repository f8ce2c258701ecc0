"""The grading command: one correct and one wrong submission give the expected table and CSV."""

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from exercise_cells import find_exercises  # noqa: E402
from make_student import make_student  # noqa: E402

CHAPTER_1 = ROOT / "chapters" / "01_weighted_average.ipynb"
BATCH_ANSWER = """a, b = check.batch_sentences()
Xb = torch.stack([a, b])
Wb = torch.softmax(Xb @ Xb.transpose(1, 2), dim=-1)
Yb = Wb @ Xb"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a folder with alice (the chapter itself) and bob (a student edition: one wrong, one stub, one right)."""
    folder = tmp_path_factory.mktemp("submissions")
    shutil.copy(CHAPTER_1, folder / "alice.ipynb")
    bob = nbformat.read(make_student(CHAPTER_1, tmp_path_factory.mktemp("student")), as_version=4)
    answers = {e.label: e.solution_cells[0] for e in find_exercises(bob)}
    # forgot the softmax: the weights are the raw scores q·k
    bob.cells[answers["ex-ch01-predict"]].source = "w_doubled = torch.stack([2 * q @ k1, 2 * q @ k2])"
    # ex-ch01-function keeps its stub
    bob.cells[answers["ex-ch01-batch"]].source = BATCH_ANSWER
    nbformat.write(bob, folder / "bob.ipynb")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    with open(folder / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return done.stdout, rows


def test_csv_has_one_row_per_student_and_exercise(graded):
    _, rows = graded
    results = {(r["student"], r["exercise"]): (r["result"], r["detail"]) for r in rows}
    assert list(rows[0]) == ["student", "exercise", "result", "detail"]
    assert results == {
        ("alice", "ex-ch01-predict"): ("passed", ""),
        ("alice", "ex-ch01-function"): ("passed", ""),
        ("alice", "ex-ch01-batch"): ("passed", ""),
        ("bob", "ex-ch01-predict"): (
            "failed", "w_doubled is not right yet. Hint: these are the raw scores q·k; "
                      "pass them through a softmax to get weights."),
        ("bob", "ex-ch01-function"): ("error", "NotImplementedError (not answered: the stub is still there)"),
        ("bob", "ex-ch01-batch"): ("passed", ""),
    }


def test_table_lists_results_and_a_summary_per_student(graded):
    table, _ = graded
    lines = table.splitlines()
    assert lines[0].split() == ["student", "exercise", "result", "detail"]
    assert any(line.split()[:3] == ["bob", "ex-ch01-predict", "failed"] and "Hint: these are the raw scores" in line
               for line in lines)
    assert any(line.split()[:4] == ["bob", "ex-ch01-function", "error", "NotImplementedError"] for line in lines)
    assert "alice: 3 passed, 0 failed, 0 error (of 3 exercises)" in lines
    assert "bob: 1 passed, 1 failed, 1 error (of 3 exercises)" in lines


def test_broken_notebooks_and_teaching_cells_are_reported(tmp_path):
    import grade

    (tmp_path / "carol.ipynb").write_text("not a notebook")
    nb = nbformat.read(CHAPTER_1, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("1 / 0"))
    nbformat.write(nb, tmp_path / "dave.ipynb")
    rows = {(r.student, r.exercise): (r.result, r.detail) for r in grade.grade_folder(tmp_path)}
    assert rows[("carol", "(notebook)")][0] == "error"
    assert "cannot read the notebook" in rows[("carol", "(notebook)")][1]
    assert rows[("dave", "(other cells)")] == ("error", "cell 2: ZeroDivisionError: division by zero")
    assert rows[("dave", "ex-ch01-batch")] == ("passed", "")


def test_grade_rejects_a_missing_folder(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(tmp_path / "nope")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "is not a folder" in done.stderr


def exercise_cells(label, answer, check_call):
    return [nbformat.v4.new_markdown_cell(f"```{{exercise}} {label} (easy)\n:label: {label}\n\nDo it.\n```"),
            nbformat.v4.new_code_cell(answer, metadata={"tags": ["solution"]}),
            nbformat.v4.new_code_cell(check_call)]


def test_timeouts_silent_checks_and_check_failures(tmp_path):
    import grade

    setup = nbformat.v4.new_code_cell(
        "class CheckFailed(AssertionError): pass\n"
        "class check:\n"
        "    def ok(): print('✓ x: correct')\n"
        "    def silent(): pass\n"
        "    def wrong(): raise CheckFailed('x is wrong. Hint: transposed.')\n"
        "    def data(): return 4")
    # a learner who replaced a stub by an untagged cell that itself calls check.<fn>: the tag finds the check
    moved = exercise_cells("ex-moved", "x = check.data()", "check.ok()")
    moved[1].metadata = {}
    moved[2].metadata["tags"] = ["exercise-check"]
    nb = nbformat.v4.new_notebook(cells=[
        setup,
        *exercise_cells("ex-loop", "while True: pass", "check.ok()"),
        *exercise_cells("ex-silent", "x = 1", "check.silent()"),
        *exercise_cells("ex-wrong", "x = 2", "check.wrong()"),
        *exercise_cells("ex-right", "x = 3", "check.ok()"),
        *moved,
    ])
    nbformat.write(nb, tmp_path / "erin.ipynb")
    rows = {r.exercise: (r.result, r.detail) for r in grade.grade_folder(tmp_path, timeout=3)}
    assert rows == {
        "ex-loop": ("error", "TimeoutError: a cell ran longer than 3 s and was interrupted"),
        "ex-silent": ("error", "the check cell printed no '✓ … correct' line (was it changed?)"),
        "ex-wrong": ("failed", "x is wrong. Hint: transposed."),
        "ex-right": ("passed", ""),
        "ex-moved": ("passed", ""),
    }
