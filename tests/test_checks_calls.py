"""How a check reports a learner's function that raises, and how a failed check shows in Jupyter (issues 29, 30).

Every call a check makes of a learner's function goes through ``checks.call``: an error becomes a CheckFailed
that names the input the function was given, the error, the learner's own line, and, on inputs of other sizes
than the exercise's, the likely cause. In IPython, a CheckFailed shows as its message and hint, never the check's
code (``_render_traceback_``); tests/test_checks_in_kernel.py sees it in a real kernel.
"""

import ast
import linecache
import math
from pathlib import Path

import pytest
import torch

from attn_helpers import checks
from attn_helpers.checks import CheckFailed, call, ch01, ch03, ch04, ch05, check_tensor, on_other_sizes

CHECKS = Path(checks.__file__).parent


def notebook(source: str, **names) -> dict:
    """The namespace of a notebook whose cell ``source`` ran, with its lines where linecache finds them (as
    IPython keeps a cell's), so that a check can quote the learner's line."""
    filename = f"<cell {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "torch": torch, "math": math, **names}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def rendered(failed: CheckFailed) -> str:
    return "\n".join(failed._render_traceback_())


# ---------------------------------------------------------------- what IPython shows

def test_a_failed_check_renders_as_its_message_and_hint_only():
    failed = CheckFailed("W is not right yet. Hint: softmax over the wrong dimension: use dim=-1.")
    lines = failed._render_traceback_()
    assert "CheckFailed" in lines[0] and "W is not right yet." in lines[0] and "Hint" not in lines[0]
    assert "Hint" in lines[-1] and "softmax over the wrong dimension" in rendered(failed)
    assert "Traceback" not in rendered(failed) and "File " not in rendered(failed)
    long = CheckFailed("a " * 200 + "Hint: " + "b " * 200)
    assert all(len(line) < 130 for line in long._render_traceback_())  # wrapped: no line runs off a phone


# ---------------------------------------------------------------- the one wrapper

def test_call_names_the_input_the_error_and_the_learners_line():
    ns = notebook("def f(x, h):\n    d = x.shape[-1]\n    return x.view(2, h, d)  # written for 6 rows\n")
    assert call(ns["f"], torch.zeros(6, 3), 3, name="f").shape == (2, 3, 3)
    with pytest.raises(CheckFailed) as failed:
        call(ns["f"], torch.zeros(4, 3), 3, name="f")
    message = str(failed.value)
    assert message.startswith("f raised RuntimeError on a (4, 3) tensor, 3. The error says: shape '[2, 3, 3]' is "
                              "invalid")  # the inputs end in a number: not run into the error's text (issue 40)
    assert type(failed.value).__name__ == "CheckFailed"  # what the grader reads as the exercise's failure
    assert failed.value.where.endswith("line 3: return x.view(2, h, d)  # written for 6 rows")
    assert "return x.view(2, h, d)" in rendered(failed.value)
    with pytest.raises(CheckFailed,
                       match="g raised KeyError on the exercise's x. The error says: 'k'. Hint: say so") as failed:
        call(lambda x: {}["k"], 1, name="g", given="the exercise's x", hint=lambda error: "say so")
    assert failed.value.raised.error.args == ("k",)


def test_every_call_of_a_learners_function_goes_through_call():
    """No check calls a function it was given (a parameter typed Callable) other than through checks.call."""
    for module in sorted(CHECKS.glob("ch*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            given = {a.arg for a in node.args.args
                     if a.annotation is not None and "Callable" in ast.unparse(a.annotation)}
            direct = [ast.unparse(c) for c in ast.walk(node)
                      if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in given]
            assert not direct, f"{module.name}: {node.name} calls {direct} directly: use checks.call"


# ---------------------------------------------------------------- on other sizes: one hint, the likely cause

def test_on_other_sizes_prints_one_hint():
    with pytest.raises(CheckFailed) as failed:  # a mistake the check could not name: the sizes hint
        with on_other_sizes("f", "other inputs", "take every size from x."):
            check_tensor(torch.zeros(2), torch.ones(2), "y on other inputs")
    message = str(failed.value)
    assert message.count("Hint:") == 1 and message.endswith("It was right on the exercise's inputs. Hint: take every "
                                                             "size from x.")
    with pytest.raises(CheckFailed) as failed:  # a mistake the check names: its own hint, once
        with on_other_sizes("f", "other inputs", "take every size from x."):
            check_tensor(torch.zeros(2), torch.ones(2), "y", {"you forgot the ones.": torch.zeros(2)})
    assert str(failed.value).count("Hint:") == 1 and str(failed.value).endswith("Hint: you forgot the ones.")


def test_head_function_with_the_exercises_scale_gets_one_hint():
    from test_checks_ch04 import head_by_hand

    with pytest.raises(CheckFailed) as failed:
        ch04.head_function(lambda head, x: head_by_hand(head, x, scale=2.0))  # right for d_k = 4 only
    assert str(failed.value).count("Hint:") == 1 and "read d_k from the head you are given" in str(failed.value)


def test_split_with_a_global_d_k_names_it():
    ns = notebook("d_k = 4\n\ndef split_heads(x, h):\n    b, t, _ = x.shape\n"
                  "    return x.view(b, t, h, d_k).transpose(1, 2)\n\n"
                  "def merge_heads(x):\n    b, h, t, d = x.shape\n    return x.transpose(1, 2).reshape(b, t, h * d)\n")
    with pytest.raises(CheckFailed, match=r"split_heads raised RuntimeError on the same x with h = 4, though it worked "
                                          r"on the exercise's inputs. The error says: .* split_heads reads d_k "
                                          r"from the notebook rather than from its arguments.*Hint: take d_k from "
                                          r"x and h") as failed:
        ch05.split_and_merge(ns["split_heads"], ns["merge_heads"])
    assert str(failed.value).count("Hint:") == 1
    assert "return x.view(b, t, h, d_k).transpose(1, 2)" in failed.value.where


def test_merge_with_the_notebooks_sizes_names_them():
    """Chapter 5 defines b, t, h, d_k = 2, 6, 3, 4 before the exercise: a merge_heads that reads them is right on
    the check's first input (the chapter's sizes) and fails on the other sizes with the cause named."""
    ns = notebook("b, t, h, d_k = 2, 6, 3, 4\n\ndef split_heads(x, h):\n"
                  "    return x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2)\n\n"
                  "def merge_heads(x):\n    return x.transpose(1, 2).reshape(b, t, h * d_k)\n")
    with pytest.raises(CheckFailed, match=r"merge_heads raised RuntimeError on a \(3, 4, 10\) tensor with h = 5, "
                                          r"though it worked on the exercise's inputs.*merge_heads reads b, d_k, h "
                                          r"and t from the notebook.*Hint: take b, t and h·d_k from the tensor's "
                                          r"shape") \
            as failed:
        ch05.split_and_merge(ns["split_heads"], ns["merge_heads"])
    assert str(failed.value).count("Hint:") == 1
    assert "reshape(b, t, h * d_k)" in failed.value.where


def test_look_back_with_t_from_the_chapters_tensor_names_it():
    """The chapter's weights w_one and w_two have t = 8 (not the 7 of an earlier check): a look_back that takes t
    from them is right on the check's first input and fails on the other sizes with the cause named."""
    ns = notebook("def look_back(w):\n    t = w_two.shape[-1]  # the chapter's weights, not w\n"
                  "    i = torch.arange(t, dtype=torch.float32)\n"
                  "    return (w * (i[:, None] - i[None, :])).sum(-1)[:, :, 2:].mean(dim=(0, 2))\n",
                  w_two=torch.softmax(torch.randn(200, 2, 8, 8), dim=-1))
    with pytest.raises(CheckFailed, match=r"look_back raised RuntimeError on weights of shape \(2, 3, 9, 9\), though "
                                          r"it worked on the exercise's inputs.*look_back reads w_two from the "
                                          r"notebook.*Hint: take t from the weights you are given") as failed:
        ch05.look_back_distance(ns["look_back"])
    assert "(w * (i[:, None] - i[None, :]))" in failed.value.where


def test_recall_with_a_hard_coded_index_is_named(recall_head):
    ns = notebook("def question_scores(B, x):\n    return x[6] @ B @ x.T  # the question of x_new, 7 tokens\n")
    with pytest.raises(CheckFailed, match=r"question_scores raised IndexError on another map B \(19, 19\) and a "
                                          r"sequence x of 6 tokens.*written in it as a number. Hint: .*x\[-1\]"):
        ch04.recall_scores(ns["question_scores"], recall_head)


def test_self_attention_that_raises_is_named_with_its_input():
    ns = notebook("def self_attention(X):\n    W = torch.softmax(X @ X, dim=-1)\n    return W @ X, W\n")
    with pytest.raises(CheckFailed, match=r"self_attention raised RuntimeError on a \(5, 3\) tensor. The error says: "
                                          r"mat1 and mat2 shapes cannot be multiplied") as failed:
        ch01.self_attention_function(ns["self_attention"])
    assert failed.value.where.endswith("line 2: W = torch.softmax(X @ X, dim=-1)")
    assert "expected" not in rendered(failed.value)


def test_contextual_vector_that_raises_is_named_with_its_input(glove):
    ns = notebook("def contextual_vector(sentence, word):\n    X = glove.embed(sentence)\n"
                  "    i = sentence.split().index(word)\n    return torch.softmax(X @ X.T / 50 ** 0.5, -1)[i] @ X\n",
                  glove=glove)
    with pytest.raises(CheckFailed, match=r"contextual_vector raised ValueError on 'I must go back to my ship and to "
                                          r"my crew', 'i'. The error says: 'i' is not in list. Hint: split the "
                                          r"sentence with ah.tokenize") as failed:
        ch03.contextual_function(ns["contextual_vector"])
    assert "i = sentence.split().index(word)" in failed.value.where
