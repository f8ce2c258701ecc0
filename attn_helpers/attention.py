"""Softmax and scaled dot-product attention, written out so every step can be read (chapters 1, 2 and 7),
and the same attention once more with plain Python loops over numbers (chapter 7), to compare with it."""

from __future__ import annotations

import math

import torch

from . import validate

__all__ = ["softmax", "attention", "loop_attention", "safe_softmax", "apply_mask"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim`` (chapters 1-2).

    Subtracts the maximum of each slice before ``exp``, so large scores cannot overflow.
    Entries equal to ``-inf`` (masked positions) get weight 0; a slice that is entirely
    ``-inf`` has nothing to attend to and gets all zeros instead of NaN.
    Takes and returns a tensor of any shape (a 0-d tensor is one slice of one score).
    """
    dim = _softmax_dim(x, dim)  # a clear error for a bad input or dim
    if x.numel() == 0:
        return x.clone()
    return safe_softmax(x, dim)


def _softmax_dim(x: object, dim: object) -> int:
    """The checks of :func:`softmax`: ``x`` a float tensor, ``dim`` one of its dimensions; returns ``dim`` as an int."""
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x):
        validate.as_float_tensor(x, "x")  # raises the TypeError that says what x must be
    n = max(x.dim(), 1)  # a 0-d tensor has one dimension to softmax over, as in torch.softmax
    return validate.integer(dim, "dim", minimum=-n, maximum=n - 1, why="a dimension of x, -1 for the last")


def safe_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim``, all-zero weights for an all ``-inf`` slice (chapter 2).

    The math of :func:`softmax` without its input checks, shared by :func:`attention` (masks: chapter 7).
    Shape in = shape out; NaN or ``+inf`` in ``x`` raises a ``ValueError``.
    """
    row_max = x.amax(dim=dim, keepdim=True)  # (..., 1, ...): NaN and +inf show up here
    if not bool((row_max < math.inf).all()):  # False for NaN as well as for +inf
        raise ValueError(
            "softmax input contains NaN or +inf; only -inf (a masked position) is allowed. "
            "Check the scores for an overflow before calling softmax."
        )
    row_max = row_max.nan_to_num(neginf=0.0)  # a fully masked slice: exp(-inf - 0) = 0
    exps = torch.exp(x - row_max)  # same shape as x, each entry in [0, 1]
    # Each sum is at least 1 (the maximum contributes exp(0)), except for a fully masked slice, whose
    # sum is 0: dividing that one by 1 instead keeps its weights all zero rather than 0/0 = NaN.
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(1.0)


def apply_mask(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``scores`` ``(..., t_q, t_k)`` with ``mask`` applied: -inf where a bool mask is False, or an additive mask
    added (chapter 7). ``mask`` broadcasts to the scores' shape, as :func:`attention` checks."""
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, -math.inf)
    return scores + mask.to(scores.dtype)


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
    ``mask`` broadcasts to ``(..., t_q, t_k)`` (without adding batch dimensions the inputs do not
    have) and is either boolean with **True = may attend** (the convention of
    ``torch.nn.functional.scaled_dot_product_attention``) or an additive float mask (0 to keep,
    ``-inf`` to block). A query whose keys are all blocked gets all-zero weights and an all-zero
    output, never NaN.
    """
    scale = validate.attention_args(q, k, v, mask, scale)  # a clear error for any bad input
    scores = q @ k.transpose(-2, -1) * scale  # (..., t_q, t_k)
    if mask is not None:
        scores = apply_mask(scores, mask)  # (..., t_q, t_k), -inf where a key is blocked
    weights = safe_softmax(scores, dim=-1)  # (..., t_q, t_k), each row sums to 1 (0 if all blocked)
    return weights @ v, weights  # (..., t_q, d_v), (..., t_q, t_k)


def loop_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with plain Python loops over floats (chapter 7).

    q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``; returns ``(out (t_q, d_v), weights (t_q, t_k))``
    like :func:`attention`. Every multiplication is one Python operation, so its running time shows
    the t² · d growth without any fast library in between.
    """
    scale = validate.one_sequence_args(q, k, v, scale, "loop_attention")  # 1/sqrt(d_k) unless given
    Q, K, V = q.tolist(), k.tolist(), v.tolist()
    outputs, weights = [], []
    for q_row in Q:  # one query at a time
        scores = [scale * sum(a * b for a, b in zip(q_row, k_row, strict=True)) for k_row in K]  # t_k numbers
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        w = [e / total for e in exps]  # this query's row of weights
        weights.append(w)
        outputs.append([sum(w[j] * V[j][c] for j in range(len(V))) for c in range(len(V[0]))])  # d_v numbers
    return torch.tensor(outputs, dtype=q.dtype), torch.tensor(weights, dtype=q.dtype)
