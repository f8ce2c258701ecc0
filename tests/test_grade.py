"""The grader, without kernels: assembling from the book's copy, chapter inference, saving and loading answers.

The hostile folder (kernels in sandboxes) is in tests/test_grade_hostile.py.
"""

import copy
import json
import pickle
import subprocess
import sys
from pathlib import Path

import book_toc
import nbformat
import pytest
import torch
from book_editions.exercise_cells import PREDICTION_PROMPT
from grading_fixtures import CHECKS, LABELS, RIGHT, WRONG, chapter, code, md, student_edition, without_metadata, write

ROOT = Path(__file__).resolve().parent.parent

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


@pytest.mark.parametrize("path", book_toc.chapters(), ids=lambda p: p.name)
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
    assert find_chapter("1").name.startswith("01_") and find_chapter("ch12").name.startswith("12_")
    with pytest.raises(BookError, match="CHAPTER='42': the book has no chapter 42: .* lists chapters 1 to "):
        find_chapter("42")
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
           "lines of this cell with your code, run it, then run the check cell below it.")],
     [_out("error", ename="NameError", evalue="name 'w' is not defined")],
     ("error", "NotImplementedError (not answered: the stub is still there)")),
    ([], [_out("error", ename="CheckFailed", evalue="w is not right yet.\nHint: two lines")],
     ("failed", "w is not right yet.")),
])
def test_the_check_decides_an_exercises_result(answer, check, expected):
    from grading.notebook import _in_kernel
    from grading.outcome import Outcome, Result

    assert _in_kernel(_executed(answer, check), [0], 1, None, {}) == Outcome(Result(expected[0]), expected[1])


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


def _kernel_that_cannot_start(work, cwd, private, hide=()):
    """A kernelspec whose kernel fails as bwrap does when the interpreter's path is hidden from the sandbox."""
    spec = private / "kernels" / sandbox.KERNEL_NAME
    spec.mkdir(parents=True)
    fail = ("import sys; print('bwrap: execvp /tmp/checkout/.venv/bin/python: No such file or directory', "
            "file=sys.stderr); sys.exit(1)")
    (spec / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-c", fail], "display_name": "broken",
                                                  "language": "python"}))
    return spec.parent


def test_a_kernel_that_never_starts_is_told_apart_from_one_that_died(book, tmp_path, monkeypatch, capsys):
    from grading import execute as execute_module
    from grading.notebook import grade_notebook

    monkeypatch.setattr(execute_module, "write_kernelspec", _kernel_that_cannot_start)
    alice = write(with_prediction(student_edition(), "I expect 0.98 and 0.02."), tmp_path / "alice.ipynb")
    rows = grade_notebook(alice, "alice", book, timeout=30, notebook_timeout=60)
    # (the written prediction is in its row whatever the kernel did: it is read from the submission)
    assert [r.prediction for r in rows[1:]] == ["I expect 0.98 and 0.02.", "", ""]
    whole = [r for r in rows if r.exercise == "(notebook)"]
    assert len(whole) == 1 and whole[0].result == "error" and "the kernel never started" in whole[0].detail
    assert "bwrap: execvp /tmp/checkout/.venv/bin/python: No such file or directory" in whole[0].detail
    for row in rows[1:]:
        assert (row.result, row.detail) == ("error", "not run: the kernel never started (see the (notebook) row)")
        assert "died" not in row.detail
    err = capsys.readouterr().err
    assert "the kernel for alice never started" in err and "    bwrap: execvp /tmp/checkout" in err
    assert "Exception ignored in atexit" not in err


def test_the_sandbox_starts_a_kernel_from_an_environment_reached_by_a_symlink_under_tmp(tmp_path):
    """A checkout under /tmp whose .venv is a symlink: the kernel is started by the symlink's path, which the
    sandbox's private /tmp would hide; the sandbox brings the environment back at that path."""
    if not sandbox.BWRAP:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="checkout-", dir="/tmp") as checkout:
        venv = Path(checkout) / ".venv"
        venv.symlink_to(Path(sys.prefix).resolve())
        script = ("import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; import nbformat\n"
                  "from grading.execute import execute\nfrom grading.sandbox import make_workdir\n"
                  "base = Path(sys.argv[2]); (base / 'work').mkdir(); (base / 'private').mkdir()\n"
                  "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print(6 * 7)')])\n"
                  "print(execute(nb, base / 'work', make_workdir(base / 'work'), base / 'private', 30, 60))\n"
                  "print(nb.cells[0].outputs[0].text if nb.cells[0].outputs else 'no output')")
        done = subprocess.run([str(venv / "bin" / "python"), "-c", script, str(ROOT / "scripts"), str(tmp_path)],
                              capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["None", "42"], done.stdout + done.stderr


def with_prediction(nb, text: str, tagged: bool = True):
    """``nb`` (a student edition) with the prediction cell after its first exercise's heading, holding ``text``."""
    nb = copy.deepcopy(nb)
    heading = next(i for i, c in enumerate(nb.cells) if c.source.startswith("### Exercise 1.1"))
    nb.cells.insert(heading + 1, md(text))
    if tagged:
        nb.cells[heading + 1].metadata["tags"] = ["exercise-prediction"]
    return nb


def test_the_written_prediction_is_read_from_the_submission(book, tmp_path):
    from grading.report import NO_CELL, NOT_WRITTEN, prediction_text

    assert book.exercises[0].predict and not any(e.predict for e in book.exercises[1:])
    written = with_prediction(student_edition(), "The scores double to 8 and 4:\n\nabout 0.98 and 0.02.")
    asm = assemble(written, book, tmp_path)
    assert asm.predictions == {"ex-ch01-predict": "The scores double to 8 and 4:\n\nabout 0.98 and 0.02."}
    assert assemble(without_metadata(written), book, tmp_path).predictions == asm.predictions  # found by its place
    # as make student writes it: the prompt on the first line, the learner's text under it; the prompt is not theirs
    prompted = with_prediction(student_edition(), f"{PREDICTION_PROMPT}\n\nThe weight goes up.")
    assert assemble(prompted, book, tmp_path).predictions == {"ex-ch01-predict": "The weight goes up."}
    for untouched in ("", "YOUR ANSWER HERE", f"{PREDICTION_PROMPT}\n\n"):  # as nbgrader and make student hand it out
        asm = assemble(with_prediction(student_edition(), untouched), book, tmp_path)
        assert prediction_text(asm.predictions["ex-ch01-predict"]) == NOT_WRITTEN
    asm = assemble(chapter(), book, tmp_path)  # the book's own form has no prediction cell
    assert asm.predictions == {"ex-ch01-predict": None} and prediction_text(None) == NO_CELL


def test_predictions_go_to_the_csv_and_the_table_says_where(tmp_path):
    import csv

    from grading.report import write_csv

    rows = [Row("a", "ex-ch01-predict", "passed", "", "about 0.98,\nthen 0.02"),
            Row("a", "ex-ch01-function", "failed", "x"),
            Row("b", "ex-ch01-predict", "failed", "y", "(not written)")]
    write_csv(rows, tmp_path / "g.csv")
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert [r["prediction"] for r in got] == ["about 0.98,\nthen 0.02", "", "(not written)"]
    assert "1 written prediction to read and grade by hand: the 'prediction' column of the CSV" in format_table(rows)
    assert "prediction" not in format_table(rows[1:2])


@pytest.mark.parametrize("given", ["1", "01", "ch01", "CH1", "chapter 1", " ch01 "])
def test_a_chapter_may_be_named_as_nbgrader_names_it(given):
    from grading.assemble import chapter_number

    assert chapter_number(given) == "01"


@pytest.mark.parametrize("given", ["", "ch", "first", "01a", "1.5", "ch-01-x"])
def test_a_chapter_that_is_not_one_is_said_so(given):
    from grading.assemble import chapter_number

    with pytest.raises(BookError, match="is not a chapter: give its number, 1 or 01, or nbgrader's name for it, ch01"):
        chapter_number(given)


def test_grade_takes_chapter_ch01_and_refuses_a_name_without_a_traceback(tmp_path, capsys):
    import grade

    (tmp_path / "eve.py").write_text("w = None\n")  # a folder with no notebook: no kernel runs
    assert grade.main([str(tmp_path), "--chapter", "ch01", "--csv", str(tmp_path / "g.csv")]) == 0
    assert "not a notebook (.py)" in capsys.readouterr().out
    assert grade.main([str(tmp_path), "--chapter", "first", "--csv", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: CHAPTER='first' is not a chapter") and "Traceback" not in err
    assert grade.main([str(tmp_path), "--chapter", "ch42", "--csv", str(tmp_path / "g.csv")]) == 2
    assert "the book has no chapter 42" in capsys.readouterr().err
