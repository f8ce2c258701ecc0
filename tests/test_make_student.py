"""Student editions: solutions become nbgrader stubs, gates go, checks stay, and each edition runs to its first stub."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from exercise_cells import find_exercises, is_gate, is_solution  # noqa: E402
from make_student import STUB, make_student  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
CHAPTER_1 = ROOT / "chapters" / "01_weighted_average.ipynb"


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return {chapter.name: make_student(chapter, out) for chapter in CHAPTERS}


def test_chapter_1_edition_replaces_solutions_and_keeps_the_rest(editions):
    book = nbformat.read(CHAPTER_1, as_version=4)
    student = nbformat.read(editions[CHAPTER_1.name], as_version=4)
    stubs = [c for c in student.cells if is_solution(c)]
    assert len(stubs) == sum(is_solution(c) for c in book.cells) == 3
    assert all(c.source == "# YOUR CODE HERE\nraise NotImplementedError()" == STUB for c in stubs)
    assert all(c.outputs == [] and c.execution_count is None for c in stubs)
    assert not any(is_gate(c) for c in student.cells)
    text = "\n".join(c.source for c in student.cells)
    assert "w_doubled = ah.softmax" not in text and "The scores double to 8 and 4" not in text
    # exercise texts and check cells stay; the checks' "✓ correct" outputs do not
    book_ex, student_ex = find_exercises(book), find_exercises(student)
    assert [e.label for e in student_ex] == [e.label for e in book_ex] == \
        ["ex-ch01-predict", "ex-ch01-function", "ex-ch01-batch"]
    for b, s in zip(book_ex, student_ex, strict=True):
        assert student.cells[s.cell].source == book.cells[b.cell].source
        assert student.cells[s.check_cell].source == book.cells[b.check_cell].source
        assert student.cells[s.check_cell].outputs == []
    # the teaching part is unchanged, outputs included
    first = book_ex[0].cell
    assert [c.source for c in student.cells[:first]] == [c.source for c in book.cells[:first]]
    assert [c.get("outputs") for c in student.cells[:first]] == [c.get("outputs") for c in book.cells[:first]]
    nbformat.validate(student)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_edition_runs_up_to_its_first_stub(chapter, editions):
    nb = nbformat.read(editions[chapter.name], as_version=4)
    first_stub = next(i for i, c in enumerate(nb.cells) if is_solution(c))
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(editions[chapter.name].parent)}})
    with pytest.raises(CellExecutionError) as info:
        client.execute()
    assert info.value.ename == "NotImplementedError"
    failed = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
              and any(o.output_type == "error" for o in c.outputs)]
    assert failed == [first_stub]
    assert all(c.execution_count is not None for c in nb.cells[:first_stub]
               if c.cell_type == "code" and "skip-execution" not in c.metadata.get("tags", []))


def test_command_line_writes_every_chapter_and_rejects_bad_input(tmp_path):
    script = str(ROOT / "scripts" / "make_student.py")
    done = subprocess.run([sys.executable, script, str(CHAPTER_1), "--out", str(tmp_path)],
                          capture_output=True, text=True, check=True)
    assert (tmp_path / CHAPTER_1.name).is_file()
    assert "3 solution cells replaced by stubs" in done.stdout
    bad = subprocess.run([sys.executable, script, str(tmp_path / "missing.ipynb")], capture_output=True, text=True)
    assert bad.returncode == 2 and "is not a notebook file" in bad.stderr
