"""Softmax and scaled dot-product attention, written out so every step can be read (chapters 1, 2 and 7)."""

from __future__ import annotations

import math

import torch

from . import validate

__all__ = ["softmax", "attention"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim`` (chapter 2).

    Subtracts the maximum of each slice before ``exp``, so large scores cannot overflow.
    Entries equal to ``-inf`` (masked positions) get weight 0; a slice that is entirely
    ``-inf`` has nothing to attend to and gets all zeros instead of NaN.
    Takes and returns a tensor of any shape (a 0-d tensor is one slice of one score).
    """
    dim = _check_softmax_input(x, dim)
    if x.numel() == 0:
        return x.clone()
    return _stable_softmax(x, dim)


def _stable_softmax(x: torch.Tensor, dim: int, overwrite: bool = False) -> torch.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim``. With ``overwrite``, ``x`` may be reused for the result.

    Where autograd does not record (no ``requires_grad``, or inside ``torch.no_grad()``), the steps
    run in place on one new tensor: the same numbers, without a new t × t tensor for each step.
    """
    row_max = x.amax(dim=dim, keepdim=True)  # (..., 1, ...): NaN and +inf show up here
    if not bool((row_max < math.inf).all()):  # False for NaN as well as for +inf
        raise ValueError(
            "softmax input contains NaN or +inf; only -inf (a masked position) is allowed. "
            "Check the scores for an overflow before calling softmax."
        )
    row_max = row_max.nan_to_num(neginf=0.0)  # a fully masked slice: exp(-inf - 0) = 0
    # Each sum is at least 1 (the maximum contributes exp(0)), except for a fully masked slice, whose
    # sum is 0: dividing that one by 1 instead keeps its weights all zero rather than 0/0 = NaN.
    if torch.is_grad_enabled() and x.requires_grad:  # autograd records every step: no in-place ops
        exps = torch.exp(x - row_max)
        return exps / exps.sum(dim=dim, keepdim=True).clamp_min(1.0)
    exps = (x.sub_(row_max) if overwrite else x - row_max).exp_()
    return exps.div_(exps.sum(dim=dim, keepdim=True).clamp_min_(1.0))


def _check_softmax_input(x: torch.Tensor, dim: int) -> int:
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x):
        validate.as_float_tensor(x, "softmax input")  # raises the explanatory TypeError
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"dim must be an integer such as -1 (the last dimension), got {dim!r}.")
    if not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
        raise ValueError(f"dim={dim} is out of range for an input of shape {tuple(x.shape)}.")
    return int(dim)


def _masked(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``scores`` with ``mask`` applied: -inf where a bool mask is False, or the additive mask added."""
    in_place = not scores.requires_grad and validate.broadcast_shape(mask.shape, scores.shape) == scores.shape
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, -math.inf) if in_place else torch.where(mask, scores, -math.inf)
    mask = mask.to(scores.dtype)
    return scores.add_(mask) if in_place else scores + mask


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention: ``softmax(q kᵀ · scale + mask) v`` (chapter 1; mask in chapter 7).

    Shapes: q ``(..., t_q, d_k)``, k ``(..., t_k, d_k)``, v ``(..., t_k, d_v)``; leading
    dimensions broadcast as in ``torch.matmul``, so a single sequence (2-D), a batch (3-D)
    and heads (4-D) all work. Returns ``(output, weights)`` with shapes
    ``(..., t_q, d_v)`` and ``(..., t_q, t_k)``. ``scale`` is a positive number or a 0-d tensor
    (taken as its value), never a bool.

    ``scale`` defaults to ``1/sqrt(d_k)``; pass ``scale=1.0`` for the raw dot products.
    ``mask`` broadcasts to ``(..., t_q, t_k)`` and is either boolean with **True = may attend**
    (the convention of ``torch.nn.functional.scaled_dot_product_attention``) or an additive
    float mask (0 to keep, ``-inf`` to block). A query whose keys are all blocked gets
    all-zero weights and an all-zero output, never NaN.
    """
    scale = validate.attention_args(q, k, v, mask, scale)  # a clear error for any bad input
    scores = q @ k.transpose(-2, -1)  # (..., t_q, t_k)
    scores = scores * scale if scores.requires_grad else scores.mul_(scale)  # in place unless autograd records
    if mask is not None:
        scores = _masked(scores, mask)
    weights = _stable_softmax(scores, -1, overwrite=True)  # (..., t_q, t_k), rows sum to 1 (or 0)
    return weights @ v, weights  # (..., t_q, d_v), (..., t_q, t_k)
