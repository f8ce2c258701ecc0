"""A failed check in a real Jupyter kernel shows one short message, never the check's code (issue 29).

A small notebook runs in a fresh IPython kernel (nbclient, as JupyterLab, Notebook 7, VS Code and Colab run
one): a wrong answer, a learner's function that computes the wrong thing, and one that raises. Each error
output must hold the hint (or the learner's own error and line) and no line of attn_helpers/checks, no
"Traceback" of the check; and the grader must read each as the check's failure, with its message.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from attn_helpers.checks.protocol import SOLUTION_LINE as SOLVED

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.heavy  # starts a kernel that imports torch: scheduled first (conftest.py)

CELLS = [
    "import torch\nimport attn_helpers as ah\nfrom attn_helpers.checks import ch01 as check",
    "w_doubled = torch.tensor([8.0, 4.0])  # the raw scores\ncheck.doubled_query_weights(w_doubled)",
    "def self_attention(X):\n    W = torch.softmax(X @ X.T, dim=0)\n    return W @ X, W\n\n"
    "check.self_attention_function(self_attention)",
    "def self_attention(X):\n    W = torch.softmax(X @ X, dim=-1)  # X Xᵀ meant\n    return W @ X, W\n\n"
    "check.self_attention_function(self_attention)",
    # a learners' edition after Run All: the folded solution, the untouched answer cell, the check (make_editions.py)
    SOLVED.format(number="1.1") + "\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)",
    '# Your answer to Exercise 1.1: write your code here …\nah.checks.no_answer_yet("1.1")',
    "check.doubled_query_weights(w_doubled)",
    # the learner's own answer in its place (the line is gone), then the check again
    "w_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=-1)",
    "check.doubled_query_weights(w_doubled)",
    # the learner's answer written under the line instead of in its place: an answer all the same
    'ah.checks.no_answer_yet("1.1")\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=-1)',
    "check.doubled_query_weights(w_doubled)",
    # answer cells that do not define the name the check reads, under the folded solution (issue 40)
    SOLVED.format(number="1.1") + "\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)",
    "w_double = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)  # a typo",
    "check.doubled_query_weights(w_doubled)",
    "# the weights are a softmax of 8 and 4",
    "check.doubled_query_weights(w_doubled)",
    "pass",
    "check.doubled_query_weights(w_doubled)",
    SOLVED.format(number="1.2")
    + "\ndef self_attention(X):\n    W = torch.softmax(X @ X.T, dim=-1)\n    return W @ X, W",
    "def self_attn(X):\n    W = torch.softmax(X @ X.T, dim=-1)\n    return W @ X, W",
    "check.self_attention_function(self_attention)",
    "self_attention = self_attn",
    "check.self_attention_function(self_attention)",
    # a check that silences its inner checks (redirect_stdout), under an untouched answer cell (Exercise 7.4)
    "from attn_helpers.checks import ch07 as check7\n" + SOLVED.format(number="7.4") +
    "\ndef decoding_mask(t_q, t_k):\n    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)",
    '# Your answer to Exercise 7.4: write your code here …\nah.checks.no_answer_yet("7.4")',
    "check7.decoding_mask_function(decoding_mask)",
    # any check that does so: its own output redirected, then its one line
    'ah.checks.no_answer_yet("9.9")',
    'import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n    ah.checks.correct("inner")\n'
    'ah.checks.correct("outer")',
    # an answer cell that raises before its assignment: the name is still the folded solution's
    SOLVED.format(number="1.1") + "\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)",
    "w_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=3)  # raises",
    "check.doubled_query_weights(w_doubled)",
    # the learner's answer in a cell inserted above the untouched answer cell (issue 47): the learner's, judged
    SOLVED.format(number="1.1") + "\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)\nprint(w_doubled)",
    "w_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=-1)",
    '# Your answer to Exercise 1.1: write your code here …\nah.checks.no_answer_yet("1.1")',
    "check.doubled_query_weights(w_doubled)",
    # ... and a wrong one there: its hint, not the book's solution's pass
    "w_doubled = torch.tensor([8.0, 4.0])",
    '# Your answer to Exercise 1.1: write your code here …\nah.checks.no_answer_yet("1.1")',
    "check.doubled_query_weights(w_doubled)",
]
INSERTED = 31  # the folded solution, then a cell the learner inserted, the untouched answer cell, the check
NOT_DEFINED = {13: ("1.1", "w_doubled"), 15: ("1.1", "w_doubled"), 17: ("1.1", "w_doubled"),
               20: ("1.2", "self_attention"), 30: ("1.1", "w_doubled")}


def in_kernel(*args) -> tuple[str, str]:
    """The grader's reading of one exercise's executed cells (grading/notebook.py), as (result, detail)."""
    from grading.notebook import _in_kernel

    outcome = _in_kernel(*args)
    return outcome.result.value, outcome.detail


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return nb


def error_of(cell) -> dict:
    errors = [out for out in cell.outputs if out.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    return errors[0]


@pytest.mark.parametrize("index, shown", [
    (1, ["these are the raw scores q·k; pass them through a softmax to get weights."]),
    (2, ["softmax over the wrong dimension: each row (one query) must sum to 1, so use dim=-1."]),
    (3, ["self_attention raised RuntimeError on a (5, 3) tensor. The error says: mat1 and mat2 shapes cannot be "
         "multiplied",
         "Cell In[4], line 2: W = torch.softmax(X @ X, dim=-1)  # X Xᵀ meant"]),
], ids=["wrong-answer", "wrong-function", "function-raises"])
def test_a_failed_check_shows_one_message_and_none_of_the_checks_code(executed, index, shown):
    import re

    error = error_of(executed.cells[index])
    assert error.ename == "CheckFailed"
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))  # the colours aside
    flat = " ".join(text.split())  # the message is wrapped to short lines
    for part in shown:
        assert " ".join(part.split()) in flat, text
    assert text.startswith("CheckFailed: ") and len(error.traceback) <= 8, text
    for leak in ("Traceback", "attn_helpers", "checks/", "expected_W", "torch.softmax(scores", "File "):
        assert leak not in text, f"{leak!r} shown to the learner:\n{text}"


def test_the_grader_reads_each_failure_as_the_checks_message(executed):
    for index in (1, 2, 3):
        result, detail = in_kernel(executed, [], index, None, {})
        assert result == "failed" and detail == error_of(executed.cells[index]).evalue.split("\n")[0].strip(), detail
    assert "Hint: these are the raw scores" in in_kernel(executed, [], 1, None, {})[1]


def test_a_check_under_an_untouched_answer_cell_says_it_checked_the_books_solution(executed):
    """Run All in a learners' edition runs the folded solution, then the answer cell still as made: the check
    must not print a bare "✓ correct" for an answer the learner has not written; after the learner's own
    answer (the cell's line replaced), it reports as usual."""
    from attn_helpers.checks.protocol import waiting_note

    def printed(index):
        return "".join(o.get("text", "") for o in executed.cells[index].outputs if o.output_type == "stream")

    assert printed(6) == f"{waiting_note('1.1')}\n✓ w_doubled: correct (the book's solution)\n"
    assert "not answered yet" in waiting_note("1.1") and "folded solution" in waiting_note("1.1")
    assert printed(8) == printed(10) == "✓ w_doubled: correct\n"


def test_the_grader_reads_an_untouched_answer_cell_as_not_answered(executed):
    """A learners' edition handed in with an answer cell untouched: its check passed on the book's folded
    solution, which is no answer of the learner's."""
    result, detail = in_kernel(executed, [4, 5], 6, None, {})
    assert result == "error" and detail.startswith("not answered") and "learners' edition" in detail, detail
    assert in_kernel(executed, [7], 8, None, {}) == ("passed", "")


@pytest.mark.parametrize("index", sorted(NOT_DEFINED))
def test_an_answer_cell_that_does_not_define_the_name_is_never_told_correct(executed, index):
    """Under a learners' edition's folded solution, an answer cell with another name (a typo, another function
    name), only a comment or `pass` leaves the book's answer in place: the check says the answer cell does not
    define the name it reads (NotAnswered), and the grader reads it as not answered, an error, as it reads an
    untouched answer cell."""
    import re

    number, name = NOT_DEFINED[index]
    error = error_of(executed.cells[index])
    assert error.ename == "NotAnswered"
    flat = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback)).split())
    assert f"Your answer cell does not define {name}" in flat and f"Exercise {number}" in flat, flat
    assert "✓" not in "".join(o.get("text", "") for o in executed.cells[index].outputs if o.output_type == "stream")
    result, detail = in_kernel(executed, [index - 1], index, None, {})
    if any(o.output_type == "error" for o in executed.cells[index - 1].outputs):  # the answer's own error comes first
        assert result == "error" and detail.startswith("IndexError"), detail
    else:
        assert result == "error" and detail.startswith("not answered: ") and f"does not define {name}" in detail, detail


def test_an_answer_that_defines_the_name_passes_after_the_folded_solution(executed):
    assert in_kernel(executed, [21], 22, None, {}) == ("passed", "")


def test_the_not_answered_note_survives_a_check_that_silences_its_inner_checks(executed):
    """Exercise 7.4's check runs its inner checks with their output redirected (one line for all the sizes):
    the note that the answer cell is untouched is printed all the same, above its one line (issue 40)."""
    from attn_helpers.checks.protocol import waiting_note

    def printed(index):
        return "".join(o.get("text", "") for o in executed.cells[index].outputs if o.output_type == "stream")

    assert printed(25) == f"{waiting_note('7.4')}\n✓ decoding_mask: correct (the book's solution)\n"
    assert printed(27) == f"{waiting_note('9.9')}\n✓ outer: correct (the book's solution)\n"


def test_a_folded_solution_runs_without_output(executed):
    """Run cell by cell, a folded solution's cell is shown (JupyterLab unfolds its heading): it prints nothing,
    since its code runs under %%capture (attn_helpers/checks/_answer.py), and still binds its names."""
    assert executed.cells[INSERTED].outputs == [] and executed.cells[INSERTED].execution_count is not None
    assert "print(w_doubled)" in executed.cells[INSERTED].source


def test_an_answer_in_a_cell_the_learner_inserted_is_judged(executed):
    """A right answer in a cell inserted above the untouched answer cell passes as the learner's (no "the book's
    solution", no "not answered"), in the kernel and in the grader; a wrong one there gets its hint."""
    def printed(index):
        return "".join(o.get("text", "") for o in executed.cells[index].outputs if o.output_type == "stream")

    assert printed(INSERTED + 3) == "✓ w_doubled: correct\n"
    assert in_kernel(executed, [INSERTED, INSERTED + 1, INSERTED + 2], INSERTED + 3, None, {}) == ("passed", "")
    error = error_of(executed.cells[INSERTED + 6])
    assert error.ename == "CheckFailed" and "raw scores" in error.evalue, error.evalue
    result, detail = in_kernel(executed, [INSERTED + 4, INSERTED + 5], INSERTED + 6, None, {})
    assert result == "failed" and "Hint: these are the raw scores" in detail, detail


def run_in(kc, source: str, cell_id: str) -> list[dict]:
    """Run ``source`` as the cell ``cell_id``, with the cellId JupyterLab and Notebook 7 send; its outputs."""
    msg = kc.session.msg("execute_request", {"code": source, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
                         metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    outputs = []
    while True:
        reply = kc.get_iopub_msg(timeout=60)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind, content = reply["msg_type"], reply["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return outputs
        if kind in ("stream", "error", "execute_result", "display_data"):
            outputs.append({"output_type": kind, **content})


def test_a_check_judges_what_the_answer_cell_defines_now():
    """After a wrong try, the answer cell run again with the name misspelt, or only `pass`: the check says that
    the cell does not define the name any more (NotAnswered), never the earlier try's hint (issue 47); the
    right answer in that cell then passes."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        def run(source, cell_id):
            return run_in(kc, source, cell_id)

        def error(outputs):
            return next((o for o in outputs if o["output_type"] == "error"), None)

        run("import torch\nimport attn_helpers as ah\nfrom attn_helpers.checks import ch01 as check", "imports")
        run(SOLVED.format(number="1.1") + "\nw_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=0)", "solution")
        check = "check.doubled_query_weights(w_doubled)"
        run("w_doubled = torch.tensor([8.0, 4.0])", "answer")
        first = error(run(check, "check"))
        assert first["ename"] == "CheckFailed" and "raw scores" in first["evalue"], first
        for again in ("w_double = torch.tensor([8.0, 4.0]) / 12  # a typo", "pass", "# not sure yet"):
            assert error(run(again, "answer")) is None
            stale = error(run(check, "check"))
            assert stale is not None and stale["ename"] == "NotAnswered", (again, stale)
            assert "no longer defines w_doubled" in stale["evalue"] and "raw scores" not in stale["evalue"], stale
        # another cell that assigns the name makes it the answer again, as does the answer cell itself
        run("w_doubled = torch.tensor([8.0, 4.0])", "inserted")
        assert "raw scores" in error(run(check, "check"))["evalue"]
        run("pass", "inserted")
        run("w_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=-1)", "answer")
        passed = run(check, "check")
        assert error(passed) is None and passed[0]["text"] == "✓ w_doubled: correct\n", passed
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
