"""Self-checks for the exercises: accept the right answer, name the likely mistake in a wrong one.

Each chapter has a module here (``checks.ch01`` …) whose functions build the expected answer
and the tensors that the usual mistakes would produce, then call :func:`check_tensor`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class CheckFailed(AssertionError):
    """A learner's answer is wrong; the message says how, with a hint."""


def _close(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-4))


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
    if not torch.is_floating_point(answer):
        raise CheckFailed(f"{name} has dtype {answer.dtype}; attention works with floats (use .float()).")
    for hint, wrong in (mistakes or {}).items():
        if _close(answer, wrong, atol) and not _close(wrong, expected, atol):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if answer.shape != expected.shape:
        raise CheckFailed(
            f"{name} has shape {tuple(answer.shape)}, expected {tuple(expected.shape)}. "
            f"Hint: check which dimensions you multiply, stack or transpose."
        )
    if not _close(answer, expected, atol):
        gap = (answer.double() - expected.double()).abs()
        where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        raise CheckFailed(
            f"{name} has the right shape but wrong values (largest difference {float(gap.max()):.4g} "
            f"at index {where}). Hint: recompute it step by step and compare with the chapter's cells."
        )
    print(f"✓ {name}: correct")


def check_value(answer: object, expected: float, name: str, mistakes: Mapping[str, float] | None = None,
                atol: float = 1e-4) -> None:
    """:func:`check_tensor` for a single number (a Python float or a one-element tensor)."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = float(answer)
    if not isinstance(answer, (int, float)):
        raise CheckFailed(f"{name} should be a number, got {type(answer).__name__}.")
    check_tensor(
        torch.tensor(float(answer)), torch.tensor(float(expected)), name,
        {h: torch.tensor(float(v)) for h, v in (mistakes or {}).items()}, atol,
    )
