"""Self-checks for the exercises (every chapter): accept the right answer, name the likely mistake in a wrong one.

Each chapter has a module here (``checks.ch01`` …) whose functions build the expected answer
and the tensors that the usual mistakes would produce, then call :func:`check_tensor`.
Exercises done "by hand" ask for a function, which the check runs under :class:`Watch`: it records
the PyTorch operators and the book's functions (or methods, such as a module's ``forward``) it calls,
however they are reached, so a check can spot a forbidden shortcut (``_watch.py``, and ``_reach.py`` for
what a function reads from the notebook).

Every call of a learner's function goes through :func:`call`, which turns an error raised in it into a
:class:`CheckFailed` that names the input it was given. In Jupyter (IPython, so also Notebook 7, VS Code and
Colab) a :class:`CheckFailed` shows as its message and hint only, never the check's code, which computes
the expected answer (``_failure.py``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

from ._answer import NotAnswered, correct, no_answer_yet
from ._answer import watch_answers as _watch_answers
from ._failure import CheckFailed, Raised, call, describe, listed, on_other_sizes
from ._reach import reached_functions, tensors_from_outside
from ._watch import Op, Watch

__all__ = [
    "CheckFailed",
    "NotAnswered",
    "correct",
    "no_answer_yet",
    "Raised",
    "call",
    "describe",
    "listed",
    "check_tensor",
    "tensors_close",
    "on_cpu",
    "as_number",
    "check_value",
    "Op",
    "Watch",
    "book_attention",
    "torch_attention",
    "run_by_hand",
    "on_other_sizes",
    "reached_functions",
    "tensors_from_outside",
]


def tensors_close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float = 1e-4) -> bool:
    """``|a - b| <= atol + rtol * |b|`` everywhere, in float64 (the one comparison every check makes)."""
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol))


def on_cpu(answer: object, name: str) -> None:
    """Raise :class:`CheckFailed` if ``answer`` is a tensor on another device than the CPU (a GPU), where the
    check's own tensors are not: comparing them would fail inside PyTorch."""
    if isinstance(answer, torch.Tensor) and answer.device.type != "cpu":
        raise CheckFailed(f"{name} is on the {answer.device} device, and the check compares on the CPU. "
                          f"Hint: compute it on the CPU, or move it there: {name}.cpu().")


def check_tensor(
    answer: object,
    expected: torch.Tensor,
    name: str,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    atol: float = 1e-4,
) -> None:
    """Print one "correct" line if ``answer`` matches ``expected``; otherwise raise :class:`CheckFailed`.

    ``mistakes`` maps a hint to the tensor that mistake produces; when the answer equals one
    of them, the hint is the message. Otherwise the message says what differs (type, shape,
    values).
    """
    if isinstance(answer, torch.Tensor) and answer.requires_grad:
        answer = answer.detach()
    if not isinstance(answer, torch.Tensor):
        raise CheckFailed(f"{name} should be a torch.Tensor, got {type(answer).__name__}.")
    if answer.layout != torch.strided:
        raise CheckFailed(f"{name} is a {answer.layout} tensor; pass a dense one: {name}.to_dense().")
    on_cpu(answer, name)
    if not torch.is_floating_point(answer):
        raise CheckFailed(f"{name} has dtype {answer.dtype}; attention works with floats (use .float()).")
    for hint, wrong in (mistakes or {}).items():
        if tensors_close(answer, wrong, atol) and not tensors_close(wrong, expected, atol):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if answer.shape != expected.shape:
        raise CheckFailed(
            f"{name} has shape {tuple(answer.shape)}, expected {tuple(expected.shape)}. "
            f"Hint: check which dimensions you multiply, stack or transpose."
        )
    if not tensors_close(answer, expected, atol):
        gap = (answer.double() - expected.double()).abs()
        where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        if answer.dtype in (torch.float16, torch.bfloat16):
            raise CheckFailed(
                f"{name} is {answer.dtype}, whose rounding (largest difference {float(gap.max()):.4g}) is coarser "
                f"than the check's tolerance. Hint: compute in float32, the book's precision."
            )
        raise CheckFailed(
            f"{name} has the right shape but wrong values (largest difference {float(gap.max()):.4g} "
            f"at index {where}). Hint: recompute it step by step and compare with the chapter's cells."
        )
    correct(name)


def as_number(answer: object, name: str) -> float:
    """``answer`` as a float if it is one real number: a Python or NumPy int or float, a 0-d or
    one-element array or tensor. Bools, strings, complex numbers and longer arrays raise :class:`CheckFailed`."""
    if isinstance(answer, (torch.Tensor, np.ndarray)):
        size = answer.numel() if isinstance(answer, torch.Tensor) else answer.size
        if size != 1:
            raise CheckFailed(
                f"{name} should be a single number, got a {type(answer).__name__} of shape "
                f"{tuple(answer.shape)}. Hint: index the one value you mean, or use .item()."
            )
        answer = answer.item()
    if isinstance(answer, (bool, np.bool_)):
        raise CheckFailed(f"{name} should be a number, got the bool {answer}: store the number itself.")
    if not isinstance(answer, numbers.Real):
        raise CheckFailed(f"{name} should be a number (an int or a float), got {type(answer).__name__}.")
    value = float(answer)
    if not math.isfinite(value):
        raise CheckFailed(f"{name} is {value}, not a finite number. Hint: look for a division by zero or an overflow.")
    return value


def check_value(answer: object, expected: float, name: str, mistakes: Mapping[str, float] | None = None,
                atol: float = 1e-4, rtol: float = 1e-4) -> None:
    """:func:`check_tensor` for a single number (see :func:`as_number` for what counts as one).

    The answer is right when ``|answer - expected| <= atol + rtol * |expected|``; pass ``rtol=0``
    for counts that must be exact.
    """
    value = as_number(answer, name)

    def close(a: float, b: float) -> bool:
        return tensors_close(torch.tensor(a), torch.tensor(b), atol, rtol)

    for hint, wrong in (mistakes or {}).items():
        if close(value, wrong) and not close(wrong, expected):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if not close(value, expected):
        raise CheckFailed(
            f"{name} = {value:.6g} is not right. Hint: recompute it step by step and compare with the chapter's cells."
        )
    correct(name)


_watch_answers()  # in a learners' edition, an answer cell that leaves the folded solution's name fails (_answer.py)


# ------------------------------------------------------------------ spotting shortcuts


def book_attention() -> dict[Callable, str]:
    """The book's functions that compute attention, or its running softmax (chapter 9), for the caller,
    named as a learner reaches them: for :class:`Watch` in exercises that ask for attention by hand."""
    from .. import merge
    from ..attention import attention, loop_attention

    return {attention: "ah.attention", loop_attention: "ah.loop_attention",
            merge.partial_attention: "ah.merge.partial_attention", merge.merge_partials: "ah.merge.merge_partials",
            merge.finish_partial: "ah.merge.finish_partial"}


def torch_attention() -> dict[Callable, str]:
    """PyTorch's multi-head attention, as Python functions :class:`Watch` sees however they are reached
    (``used_fused_attention`` sees their torch functions and operators, which code can hide from it)."""
    return {nn.functional.multi_head_attention_forward: "F.multi_head_attention_forward",
            nn.MultiheadAttention.forward: "nn.MultiheadAttention"}


def run_by_hand(fn: Callable, args: tuple, forbidden: Mapping[Callable, str], name: str, hint: str,
                owner: str | None = None, *, kwargs: Mapping[str, object] | None = None,
                pair: tuple[str, str] = ("out", "weights"),
                shortcuts: Mapping[str, tuple[str, ...]] | None = None) -> object:
    """``fn(*args, **kwargs)`` through :func:`call`, under :class:`Watch`, for an exercise done by hand.

    Raises :class:`CheckFailed` if ``fn`` (named ``name``) reached one of ``forbidden`` or PyTorch's fused
    attention, or ran an operator whose name contains one of a ``shortcuts`` entry's fragments (the key says
    what it is: "a log-sum-exp (torch.logsumexp …), which does the shift for you"); ``hint`` says what to
    do instead. With ``owner``, the result must be a pair such as ``(out, weights)`` (``pair``), as
    ``owner`` returns.
    """
    with Watch(forbidden) as watch:
        result = call(fn, *args, name=name, **(kwargs or {}))
    if watch.called:
        raise CheckFailed(f"{name} calls {listed(sorted(watch.called))} (directly or through another helper), "
                          f"which does the work for you: the exercise asks you not to. Hint: {hint}")
    if watch.used_fused_attention():
        raise CheckFailed(f"{name} calls PyTorch's fused attention (F.scaled_dot_product_attention or "
                          f"nn.MultiheadAttention), which computes the attention for you. Hint: {hint}")
    for what, fragments in (shortcuts or {}).items():
        if watch.used(*fragments):
            raise CheckFailed(f"{name} calls {what}. Hint: {hint}")
    if owner is not None and not (isinstance(result, (tuple, list)) and len(result) == 2):
        first, second = pair
        raise CheckFailed(f"{name} should return a pair ({first}, {second}), as {owner} does: "
                          f"return {first}, {second}.")
    return result
