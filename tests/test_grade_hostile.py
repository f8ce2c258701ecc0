"""`make grade` on a folder of honest and hostile submissions of a small synthetic chapter (issue 10).

Each submission is executed for real in its own sandboxed kernel (a few seconds of CPU each: ipykernel,
torch and attn_helpers), so the folder is kept small, several attacks share a notebook, and three
grading runs go at once (the main folder with two jobs, and two hanging notebooks with short limits).
"""

import copy
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from grading_fixtures import (
    CHECKS,
    LABELS,
    OTHER_RIGHT,
    RIGHT,
    WRONG,
    chapter,
    student_edition,
    tree_digest,
    with_first_answer_prefix,
    without_metadata,
    write,
)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.heavy  # grades whole folders in subprocesses, with real kernels: scheduled first (conftest.py)

from grading.sandbox import BWRAP  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def needs_bwrap():
    if not BWRAP:  # in CI (.ci/run installs it) a missing sandbox is a failure, elsewhere a skip
        stop = pytest.fail if os.environ.get("CI") else pytest.skip
        stop("the sandbox needs bubblewrap: apt-get install bubblewrap")

PATCH = """for _name in ("doubled_query_weights", "self_attention_function", "sequence_first_attention"):
    setattr(check, _name, lambda *a, **k: print("✓ correct"))"""
APPEND = """import importlib
import attn_helpers.checks as checks_package
with open(checks_package.__file__, "a") as f:  # found through __file__
    f.write("\\n\\ndef check_tensor(*args, **kwargs):\\n    print('✓ correct')\\n")
importlib.reload(checks_package)
importlib.reload(check)"""
PROC = """import glob
found = []
for p in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        if {mark!r}.encode() in open(p, "rb").read():
            found.append(p)
    except OSError:
        pass
for target in [{victim!r}, {planted!r}]:
    try:
        with open(target, "w") as f:
            f.write("overwritten by a classmate")
    except OSError as exc:
        print("blocked:", exc)
if found:  # the answer below goes wrong when the real folder was found
    q = torch.zeros(2)"""
# The loops sleep rather than spin (`while True: pass` is stopped the same way) to leave the CPU to the others.
HANG = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
CELL_TIMEOUT, NOTEBOOK_TIMEOUT = 3, 10
# Answers with a function are re-checked in a sandboxed process of their own (~2 s each): only the
# submissions that test that layer pass their function exercise in the kernel; the others get it wrong.
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def forged(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The instructor's outputs and execution counts copied into the check cells."""
    nb = copy.deepcopy(nb)
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code" and c.source in CHECKS.values()):
        cell.execution_count = 10 + n
        cell.outputs = [nbformat.v4.new_output("stream", text="✓ correct\n")]
    return nb


def grade(folder: Path, csv_path: Path, timeout: float, notebook_timeout: float, jobs: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder), "--chapter-path", str(folder.parent / "book"
                                                                                                / "01_synthetic.ipynb"),
         "--csv", str(csv_path), "--timeout", str(timeout), "--notebook-timeout", str(notebook_timeout),
         "--jobs", str(jobs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    (base / "book").mkdir()
    write(chapter(), base / "book" / "01_synthetic.ipynb")
    folder = base / "submissions-f7q2"  # the name the /proc attack looks for
    folder.mkdir()
    victim = write(chapter(), folder / "alice.ipynb")
    # a student edition that lost its cell metadata (labels, tags): found by its headings
    write(without_metadata(student_edition(OTHER_RIGHT)), folder / "bob.ipynb")
    # graded first: monkeypatches the checks in memory and appends a pass-everything function to its
    # attn_helpers/checks/__init__.py; the students graded after it must not notice
    write(with_first_answer_prefix(chapter(WRONG), APPEND + "\n" + PATCH), folder / "a_cheat_patch.ipynb")
    edits = chapter(WRONG, checks={
        "ex-ch01-predict": 'print("✓ w_doubled: correct")',
        "ex-ch01-function": 'try:\n    check.self_attention_function(self_attention)\nexcept Exception:\n'
                            '    print("✓ W: correct")',
        "ex-ch01-batch": CHECKS["ex-ch01-batch"]})
    del edits.cells[12]  # the text of the (failed) exercise ex-ch01-batch deleted
    write(edits, folder / "cheat_edits.ipynb")
    write(forged(with_first_answer_prefix(chapter(WRONG), "import os\nos._exit(0)")), folder / "cheat_forge.ipynb")
    write(chapter(labels=["ex-ch02-predict", "ex-ch02-function", "ex-ch02-batch"]), folder / "chapter02.ipynb")
    # right answers, but first it looks for the folder in /proc and overwrites a classmate's notebook
    attack = PROC.format(mark=folder.name, victim=str(victim), planted=str(folder / "planted.txt"))
    write(with_first_answer_prefix(chapter({**RIGHT, "ex-ch01-function": STUB}), attack), folder / "vandal.ipynb")
    (folder / "eve.py").write_text("w_doubled = None\n")
    (folder / "broken.ipynb").write_text("{ this is not json")
    hangs = {}
    for name, cell_timeout, notebook_timeout, nb in [
            ("hang_first", CELL_TIMEOUT, 60, chapter()),
            ("hang_late", 60, NOTEBOOK_TIMEOUT, chapter({**RIGHT, "ex-ch01-predict": HANG}))]:
        (base / name).mkdir()
        if name == "hang_first":  # a teaching cell before the set-up hangs
            nb.cells.insert(1, nbformat.v4.new_code_cell(HANG))
        else:  # the set-up cell deleted (it imports torch: seconds of CPU), the first answer hangs
            del nb.cells[1]
        write(nb, base / name / f"{name}.ipynb")
        hangs[name] = (time.monotonic(), grade(base / name, base / f"{name}.csv", cell_timeout, notebook_timeout))
    before = {"checkout": tree_digest(ROOT / "attn_helpers"), "victim": victim.read_bytes(), "git": git_status()}
    main = grade(folder, base / "grades.csv", 60, 120, jobs=2)
    elapsed = {}
    while len(elapsed) < len(hangs):  # when each hanging run ends
        for name, (start, proc) in hangs.items():
            if name not in elapsed and proc.poll() is not None:
                elapsed[name] = time.monotonic() - start
                assert proc.returncode == 0, proc.stderr.read()
        assert time.monotonic() - min(s for s, _ in hangs.values()) < 300, "a hanging notebook was never stopped"
        time.sleep(0.2)
    out, err = main.communicate(timeout=300)
    assert main.returncode == 0, err
    rows = {}
    for csv_path in [base / "grades.csv", base / "hang_first.csv", base / "hang_late.csv"]:
        with open(csv_path, newline="", encoding="utf-8") as f:
            rows.update({(r["student"], r["exercise"]): (r["result"], r["detail"]) for r in csv.DictReader(f)})
    return {"rows": rows, "table": out, "folder": folder, "victim": victim, "before": before, "elapsed": elapsed}


def git_status() -> str:
    """`git status` of the checkout's package and data (other tests may write elsewhere meanwhile)."""
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "attn_helpers", "data"],
                          cwd=ROOT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else "(not a git checkout)"


def results(graded, student):
    return {ex: graded["rows"].get((student, ex), ("(no row)", ""))[0] for ex in LABELS}


def test_correct_submissions_all_pass(graded):
    for student in ("alice", "bob"):
        assert results(graded, student) == dict.fromkeys(LABELS, "passed"), student
    assert "alice: 3 passed (of 3 exercises)" in graded["table"]
    for label in LABELS:  # the instructor learns that bob's exercises were found by their headings
        assert "found by its heading" in graded["rows"][("bob", label)][1]
        assert graded["rows"][("alice", label)][1] == ""


@pytest.mark.parametrize("student", ["a_cheat_patch", "cheat_edits", "cheat_forge", "chapter02"])
def test_no_cheat_passes_everything(graded, student):
    assert list(results(graded, student).values()) != ["passed"] * 3, graded["table"]


def test_patched_checks_are_caught_by_the_re_check(graded):
    for label in LABELS:  # the function too, in its own sandboxed process
        result, detail = graded["rows"][("a_cheat_patch", label)]
        assert result == "failed" and "passed in the student's kernel but not on its saved answers" in detail, label


def test_edited_check_cells_are_replaced_and_a_deleted_exercise_is_missing(graded):
    rows = graded["rows"]
    assert rows[("cheat_edits", "ex-ch01-predict")][0] == "failed"  # the check printed the pass mark
    result, detail = rows[("cheat_edits", "ex-ch01-function")]     # try/except around the check
    assert result == "failed" and "softmax over the wrong dimension" in detail
    assert rows[("cheat_edits", "ex-ch01-batch")][0] == "missing"


def test_forged_outputs_count_for_nothing(graded):
    for label in LABELS:
        result, detail = graded["rows"][("cheat_forge", label)]
        assert result == "error" and "the kernel died" in detail


def test_other_chapter_is_named(graded):
    assert results(graded, "chapter02") == dict.fromkeys(LABELS, "missing")
    result, detail = graded["rows"][("chapter02", "(notebook)")]
    assert result == "error" and "chapter 02" in detail and "assignment is chapter 01" in detail


def test_victim_and_checkout_are_untouched(graded):
    assert graded["victim"].read_bytes() == graded["before"]["victim"]
    assert tree_digest(ROOT / "attn_helpers") == graded["before"]["checkout"]
    assert git_status() == graded["before"]["git"]
    assert not (graded["folder"] / "planted.txt").exists()
    assert sorted(p.name for p in graded["folder"].iterdir()) == sorted(
        ["alice.ipynb", "bob.ipynb", "a_cheat_patch.ipynb", "cheat_edits.ipynb", "cheat_forge.ipynb",
         "chapter02.ipynb", "vandal.ipynb", "eve.py", "broken.ipynb"])


def test_proc_does_not_reveal_the_submissions_folder(graded):
    # vandal's answer goes wrong if any process in its sandbox named the folder
    assert results(graded, "vandal")["ex-ch01-predict"] == "passed"
    assert results(graded, "vandal")["ex-ch01-batch"] == "passed"


def test_hangs_end_within_the_limits_and_are_reported(graded):
    first = {label: graded["rows"][("hang_first", label)] for label in LABELS}
    assert all(r == "timeout" and f"ran longer than {CELL_TIMEOUT} s" in d for r, d in first.values()), first
    late = {label: graded["rows"][("hang_late", label)] for label in LABELS}
    assert all(r == "timeout" and f"the notebook ran longer than {NOTEBOOK_TIMEOUT} s" in d
               for r, d in late.values()), late
    assert graded["elapsed"]["hang_late"] < NOTEBOOK_TIMEOUT + 30  # + the grader's own start and clean-up


def test_every_file_gets_a_row(graded):
    rows = graded["rows"]
    assert rows[("eve.py", "(notebook)")][0] == "error" and "not a notebook (.py)" in rows[("eve.py", "(notebook)")][1]
    assert rows[("broken", "(notebook)")][0] == "error" and "cannot read" in rows[("broken", "(notebook)")][1]


def test_a_learners_edition_whose_answer_cells_define_other_names_is_not_passed(tmp_path):
    """Chapter 1's learners' edition handed in with answer cells that leave the folded solution's names in
    place (a typo, another function name, `pass`): graded for real, no exercise passes, and each row says
    which name the answer cell does not define (issue 40), as not answered: an error, as an untouched answer
    cell is (issue 47)."""
    from book_editions.learners import learner_edition
    from grade import grade_folder

    chapter_1 = ROOT / "chapters" / "01_weighted_average.ipynb"
    nb = learner_edition(chapter_1)
    answers = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# Your answer to Exercise")]
    assert len(answers) == 3
    for cell, wrong in zip(answers, ["w_double = ah.softmax(torch.tensor([8.0, 4.0]))  # a typo",
                                     "def self_attn(X):\n    W = torch.softmax(X @ X.T, dim=-1)\n    return W @ X, W",
                                     "pass"], strict=True):
        cell.source = wrong
    folder = tmp_path / "submissions"
    folder.mkdir()
    write(nb, folder / "carol.ipynb")
    rows = {row.exercise: row for row in grade_folder(folder, chapter_path=chapter_1)}
    names = {"ex-ch01-predict": "w_doubled", "ex-ch01-function": "self_attention", "ex-ch01-batch": "Wb"}
    for label, name in names.items():
        assert rows[label].result == "error" and rows[label].detail.startswith("not answered: ") \
            and f"does not define {name}" in rows[label].detail, rows[label]


def test_a_learners_edition_with_answers_in_cells_of_the_learners_own_is_graded_on_them(tmp_path):
    """Chapter 1's learners' edition handed in with right answers written in cells the learner inserted above
    the untouched answer cells of 1.1 and 1.2 (a wrong one for 1.3): graded on them, as in JupyterLab (issue 47)."""
    from book_editions.learners import learner_edition
    from grade import grade_folder
    from grading_fixtures import OTHER_RIGHT
    from grading_fixtures import WRONG as WRONG_ANSWERS

    chapter_1 = ROOT / "chapters" / "01_weighted_average.ipynb"
    nb = learner_edition(chapter_1)
    answers = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("# Your answer")]
    mine = [OTHER_RIGHT["ex-ch01-predict"], OTHER_RIGHT["ex-ch01-function"], WRONG_ANSWERS["ex-ch01-batch"]]
    for i, answer in reversed(list(zip(answers, mine, strict=True))):
        nb.cells.insert(i, nbformat.v4.new_code_cell(answer))
    folder = tmp_path / "submissions"
    folder.mkdir()
    write(nb, folder / "dana.ipynb")
    rows = {row.exercise: row for row in grade_folder(folder, chapter_path=chapter_1)}
    assert (rows["ex-ch01-predict"].result, rows["ex-ch01-function"].result) == ("passed", "passed"), rows
    assert rows["ex-ch01-batch"].result == "failed" and "Hint" in rows["ex-ch01-batch"].detail, rows
