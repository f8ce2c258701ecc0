"""The grader, without kernels: assembling from the book's copy, chapter inference, saving and loading answers.

The hostile folder (kernels in sandboxes) is in tests/test_grade_hostile.py.
"""

import pickle
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from grading_fixtures import CHECKS, LABELS, RIGHT, WRONG, chapter, code, md, student_edition, without_metadata, write

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from grading import answers, sandbox  # noqa: E402
from grading.assemble import (  # noqa: E402
    BookError,
    assemble,
    find_chapter,
    infer_chapter,
    read_book,
)
from grading.report import Row, format_table  # noqa: E402


@pytest.fixture
def book(tmp_path):
    return read_book(write(chapter(), tmp_path / "01_synthetic.ipynb"))


def test_book_gives_labels_checks_and_the_names_they_read(book):
    assert book.chapter == "01"
    assert [e.label for e in book.exercises] == LABELS
    assert [e.names for e in book.exercises] == [["w_doubled"], ["self_attention"], ["Wb", "Ys"]]
    assert book.check_import == "from attn_helpers.checks import ch01 as check"


def test_a_magic_in_the_import_cell_is_read_as_python(tmp_path):
    nb = chapter()  # the book's import cells end with %config InlineBackend.figure_formats = ["retina"]
    nb.cells[1].source += '\n%config InlineBackend.figure_formats = ["retina"]'
    assert read_book(write(nb, tmp_path / "01_magic.ipynb")).check_import == \
        "from attn_helpers.checks import ch01 as check"


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name)
def test_every_chapter_of_the_book_can_be_graded_from(path, tmp_path):
    """The grader reads each real chapter, and a submission of the chapter itself has every exercise."""
    book = read_book(path)
    number = path.name[:2]
    assert book.chapter == number
    assert book.check_import == f"from attn_helpers.checks import ch{number} as check"
    assembled = assemble(nbformat.read(path, as_version=4), book, tmp_path)
    assert assembled.missing == [] and assembled.other_chapter is None
    assert list(assembled.check_cells) == [e.label for e in book.exercises]


def test_find_chapter_and_a_chapter_without_exercises(tmp_path):
    assert find_chapter(ROOT / "chapters", "1").name.startswith("01_")
    with pytest.raises(BookError, match="expected one notebook 42_"):
        find_chapter(ROOT / "chapters", "42")
    empty = write(nbformat.v4.new_notebook(cells=[code("x = 1")]), tmp_path / "01_empty.ipynb")
    with pytest.raises(BookError, match="has no exercises"):
        read_book(empty)


def test_assembly_restores_the_books_check_cells_and_clears_outputs(book, tmp_path):
    sub = chapter(WRONG, checks={
        "ex-ch01-predict": 'print("✓ w_doubled: correct")',                       # edited to print the pass mark
        "ex-ch01-function": "try:\n    check.self_attention_function(self_attention)\nexcept Exception:\n    pass",
        "ex-ch01-batch": CHECKS["ex-ch01-batch"]})
    for cell in sub.cells:
        if cell.cell_type == "code":
            cell.execution_count = 7
            cell.outputs = [nbformat.v4.new_output("stream", text="✓ forged: correct\n")]
            cell.metadata.setdefault("tags", []).append("skip-execution")
    asm = assemble(sub, book, tmp_path)
    assert asm.missing == [] and asm.other_chapter is None
    for label in LABELS:
        check = asm.nb.cells[asm.check_cells[label]]
        assert check.source == CHECKS[label]
        save = asm.nb.cells[asm.save_cells[label]]
        assert save.source.startswith("def save_answers") and repr(label) in save.source
        assert asm.save_cells[label] == asm.check_cells[label] + 1
    for cell in asm.nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
            assert "skip-execution" not in cell.metadata.get("tags", [])
    # the edited print stays, as an answer cell that runs before the book's check
    predict = asm.check_cells["ex-ch01-predict"]
    assert 'print("✓ w_doubled: correct")' in [asm.nb.cells[i].source for i in asm.answer_cells["ex-ch01-predict"]]
    assert max(asm.answer_cells["ex-ch01-predict"]) < predict


def test_missing_and_other_chapter(book, tmp_path):
    sub = chapter()
    del sub.cells[12]  # the directive of ex-ch01-batch (cells: title, set-up, then 5 per exercise)
    asm = assemble(sub, book, tmp_path)
    assert asm.missing == ["ex-ch01-batch"] and asm.other_chapter is None
    other = chapter(labels=["ex-ch02-predict", "ex-ch02-function"])
    asm = assemble(other, book, tmp_path)
    assert asm.missing == LABELS and asm.other_chapter == "02" and asm.check_cells == {}
    assert infer_chapter([other, chapter(), chapter()]) == "01"
    assert infer_chapter([nbformat.v4.new_notebook()]) is None


def kept_sources(asm) -> list[str]:
    """The sources of the submission's cells that the assembled notebook kept (all but the replaced checks)."""
    return [asm.nb.cells[i].source for i in sorted(asm.origin)]


def test_a_student_edition_that_lost_its_metadata_is_found_by_its_headings(book, tmp_path):
    edition = student_edition()
    assert assemble(edition, book, tmp_path).recovered == []  # with its metadata, nothing to recover
    lost = without_metadata(edition)
    asm = assemble(lost, book, tmp_path)
    assert asm.missing == [] and asm.recovered == LABELS
    assert [asm.nb.cells[asm.check_cells[label]].source for label in LABELS] == list(CHECKS.values())
    # every check cell replaced in place, no other cell: the answer that calls check.sequence_first_batch() runs
    assert kept_sources(asm) == [c.source for c in lost.cells if c.source not in CHECKS.values()]
    batch = asm.answer_cells["ex-ch01-batch"]
    assert [asm.nb.cells[i].source for i in batch] == [RIGHT["ex-ch01-batch"]]
    assert lost.cells[2].metadata == {}  # the submission itself is left as it was


def test_without_metadata_or_check_cell_the_answer_is_kept_and_the_check_added(book, tmp_path):
    lost = without_metadata(student_edition())
    lost.cells = [c for c in lost.cells if c.source != CHECKS["ex-ch01-batch"]]  # the last check deleted
    asm = assemble(lost, book, tmp_path)
    assert asm.missing == [] and kept_sources(asm) == [c.source for c in lost.cells if c.source not in CHECKS.values()]
    check = asm.check_cells["ex-ch01-batch"]
    assert asm.nb.cells[check].source == CHECKS["ex-ch01-batch"]
    assert asm.nb.cells[check - 1].source == RIGHT["ex-ch01-batch"] and asm.answer_cells["ex-ch01-batch"] == [check - 1]


def test_headings_are_matched_by_their_label_line_or_else_their_number(book, tmp_path):
    lost = without_metadata(student_edition())
    lost.cells[2].source = lost.cells[2].source.replace("*Label: `ex-ch01-predict`*", "")  # the number decides
    lost.cells[5].source = lost.cells[5].source.replace("Exercise 1.2", "Exercise 1.7")    # the label line decides
    lost.cells.append(md("### Exercise 1.4 (easy): not in the book"))
    lost.cells.append(md("### Exercise 1.3 (hard): the same number again"))
    asm = assemble(lost, book, tmp_path)
    assert asm.missing == [] and asm.recovered == LABELS
    lost.cells[2].source = lost.cells[2].source.replace("Exercise 1.1", "Exercise 2.1")  # no label, not this chapter's
    asm = assemble(lost, book, tmp_path)
    assert asm.missing == ["ex-ch01-predict"] and asm.recovered == LABELS[1:]
    mixed = student_edition()
    mixed.cells[2].metadata = {}  # one heading lost its metadata, the others kept theirs
    asm = assemble(mixed, book, tmp_path)
    assert asm.missing == [] and asm.recovered == ["ex-ch01-predict"]
    other = without_metadata(student_edition(labels=["ex-ch02-predict", "ex-ch02-function", "ex-ch02-batch"]))
    asm = assemble(other, book, tmp_path)  # another chapter's edition is named as such
    assert asm.missing == LABELS and asm.other_chapter == "02" and asm.recovered == []
    # a folder of such editions picks its chapter from the labels their headings show
    assert infer_chapter([other, other, without_metadata(student_edition())]) == "02"


def save_in(namespace: dict, names: list[str], path: Path) -> None:
    """Run the grader's save cell in ``namespace`` as the kernel would."""
    exec(answers.save_cell_source("ex-x", names, path), namespace)


def test_answers_round_trip_tensors_numbers_functions_and_modules(tmp_path):
    import numpy as np

    import attn_helpers as ah

    ns: dict = {}
    exec("import torch\nimport attn_helpers as ah\nscale = 2.0\n"
         "def helper(x):\n    return torch.softmax(x * scale, dim=-1)\n"
         "def fn(x, k=3):\n    return helper(x) if k else fn(x, 0)\n", ns)
    ns.update(t=torch.arange(3.0), n=np.float32(6.0), arr=np.ones((2, 2)), pair=(1, [2.0, "x"]),
              head=ah.SelfAttentionHead(d_model=4, d_k=2, d_v=3), sm=torch.softmax)
    names = ["t", "n", "arr", "pair", "head", "sm", "fn", "nowhere"]
    save_in(ns, names, tmp_path / "a.pt")
    got = answers.load_answers(tmp_path / "a.pt")
    assert torch.equal(got["t"], ns["t"]) and type(got["n"]) is np.float32 and got["n"] == 6.0
    assert isinstance(got["arr"], np.ndarray) and got["pair"] == (1, [2.0, "x"]) and got["sm"] is torch.softmax
    assert isinstance(got["head"], ah.SelfAttentionHead)
    assert torch.equal(got["head"].W_q.weight, ns["head"].W_q.weight)
    x = torch.randn(2, 3)
    assert torch.allclose(got["fn"](x), ns["fn"](x))
    assert got["fn"].__globals__ is not ns and "nowhere" not in got
    assert answers.has_function(tmp_path / "a.pt") and not answers.has_function(tmp_path / "missing.pt")


def test_notebook_classes_cannot_be_loaded(tmp_path):
    ns: dict = {"__name__": "__main__"}
    exec("import torch\nclass Mine(torch.nn.Module):\n    pass\nm = Mine()", ns)
    save_in(ns, ["m"], tmp_path / "m.pt")  # (in a kernel it saves, and torch.load refuses __main__.Mine)
    with pytest.raises((pickle.UnpicklingError, answers.Unsupported)):
        answers.load_answers(tmp_path / "m.pt")


def test_closures_are_unsupported_and_forged_files_do_not_run(tmp_path):
    ns: dict = {}
    exec("def outer():\n    y = 1\n    def inner(x):\n        return x + y\n    return inner\nf = outer()", ns)
    save_in(ns, ["f"], tmp_path / "f.pt")
    with pytest.raises(answers.Unsupported, match="closure"):
        answers.load_answers(tmp_path / "f.pt")

    class Payload:  # a pickle that runs a command when loaded
        def __reduce__(self):
            return (subprocess.call, (["touch", str(tmp_path / "pwned")],))

    exec("import functools\ndef logged(fn):\n    @functools.wraps(fn)\n    def inner(x):\n        return fn(x)\n"
         "    return inner\n@logged\ndef g(x):\n    return x\nh = functools.partial(f, 1)", ns)
    for name in ("g", "h"):  # a decorated function, a partial: named, not blamed on a class
        save_in(ns, [name], tmp_path / f"{name}.pt")
        with pytest.raises(answers.Unsupported, match="is wrapped \\(by a decorator or functools.partial\\)"):
            answers.load_answers(tmp_path / f"{name}.pt")

    torch.save({"label": "ex-x", "answers": {"w": Payload()}, "namespace": {}}, tmp_path / "forged.pt")
    with pytest.raises(pickle.UnpicklingError):
        answers.load_answers(tmp_path / "forged.pt")
    assert not (tmp_path / "pwned").exists()


def test_torch_grad_mode_decorators_are_saved_without_them(tmp_path):
    ns: dict = {}
    exec("import torch\n@torch.no_grad()\ndef f(x):\n    return x * 2\n"
         "@torch.inference_mode()\ndef g(x):\n    return f(x) + 1", ns)
    save_in(ns, ["f", "g"], tmp_path / "fg.pt")
    loaded = answers.load_answers(tmp_path / "fg.pt", modules_only=False)
    assert loaded["g"](torch.ones(2)).tolist() == [3.0, 3.0]  # the same values, without the grad mode


def _executed(answer_outputs: list, check_outputs: list, check_ran: bool = True) -> nbformat.NotebookNode:
    answer, check_cell = code("w = 1"), code("check.it(w)")
    answer.outputs, check_cell.outputs = answer_outputs, check_outputs
    check_cell.execution_count = 2 if check_ran else None
    return nbformat.v4.new_notebook(cells=[answer, check_cell])


def _out(kind: str, text: str = "", ename: str = "", evalue: str = "") -> nbformat.NotebookNode:
    if kind == "error":
        return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])
    return nbformat.v4.new_output("stream", name="stdout", text=text)


@pytest.mark.parametrize("answer, check, expected", [
    ([], [_out("stream", "✓ w: correct\n")], ("passed", "")),
    # the stub's raise left below a right answer: the check passed, as nbgrader would count it
    ([_out("error", ename="NotImplementedError")], [_out("stream", "✓ w: correct\n")],
     ("passed", "(an answer cell also raised NotImplementedError)")),
    # the stub untouched: the check then fails for want of the answer, and the stub is the reason
    ([_out("error", ename="NotImplementedError")], [_out("error", ename="NameError", evalue="name 'w' is not defined")],
     ("error", "NotImplementedError (not answered: the stub is still there)")),
    # a student edition's stub, whose message tells the learner what to do: the table keeps to the point
    ([_out("error", ename="NotImplementedError", evalue="Exercise 1.2 (ex-ch01-w) is not answered yet: replace the "
           "two lines of this cell with your code, run it, then run the check cell below it.")],
     [_out("error", ename="NameError", evalue="name 'w' is not defined")],
     ("error", "NotImplementedError (not answered: the stub is still there)")),
    ([], [_out("error", ename="CheckFailed", evalue="w is not right yet.\nHint: two lines")],
     ("failed", "w is not right yet.")),
])
def test_the_check_decides_an_exercises_result(answer, check, expected):
    from grading.notebook import _in_kernel

    assert _in_kernel(_executed(answer, check), [0], 1, None, {}) == expected


def test_without_bwrap_the_kernel_still_gets_an_emptied_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", None)
    argv = sandbox.wrap(["python", "-c", "pass"], tmp_path, tmp_path, tmp_path)
    assert argv[:2] == ["env", "-i"] and f"PYTHONPATH={tmp_path / 'book'}" in argv
    assert not any(a.startswith("SUBMISSIONS=") for a in argv)


def test_bwrap_options_stay_off_its_visible_command_line(tmp_path):
    if not sandbox.BWRAP:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    secret = tmp_path / "submissions-secret"
    secret.mkdir()
    argv = sandbox.wrap(["python", "-c", "pass"], tmp_path / "w", tmp_path / "w", tmp_path, hide=[secret])
    script, bwrap_argv = argv[2], argv[3:]
    assert str(secret) not in " ".join(bwrap_argv) and str(secret) not in script
    args_file = next(tmp_path.glob("bwrap-args-*"))
    assert str(secret).encode() + b"\0" in args_file.read_bytes()


def test_table_counts_every_result():
    rows = [Row("a", "ex-1", "passed"), Row("a", "ex-2", "timeout", "x"), Row("a", "ex-3", "missing"),
            Row("b.py", "(notebook)", "error", "not a notebook")]
    table = format_table(rows)
    assert "a: 1 passed, 1 timeout, 1 missing (of 3 exercises)" in table
    assert "b.py: not graded" in table


def test_grade_rejects_a_missing_folder(tmp_path, capsys):
    import grade

    assert grade.main([str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_grade_says_which_chapter_to_pick(tmp_path, capsys):
    import grade

    write(nbformat.v4.new_notebook(cells=[code("x = 1")]), tmp_path / "a.ipynb")
    assert grade.main([str(tmp_path)]) == 2
    assert "CHAPTER=NN" in capsys.readouterr().err


def test_right_answers_pass_the_real_checks_in_process(capsys):
    """The synthetic chapter's answers are what chapter 1's checks accept (or reject)."""
    from attn_helpers.checks import CheckFailed
    from attn_helpers.checks import ch01 as check

    ns = {}
    exec(chapter().cells[1].source, ns)
    for label in LABELS:
        exec(RIGHT[label], ns)
        exec(CHECKS[label], ns)
    assert capsys.readouterr().out.count("✓") >= 3
    for label in LABELS:
        exec(WRONG[label], ns)
        with pytest.raises(CheckFailed):
            exec(CHECKS[label], {**ns, "check": check})
