"""Softmax and scaled dot-product attention, written out so every step can be read (chapters 1, 2 and 7)."""

from __future__ import annotations

import itertools
import math

import torch

from .validate import as_float_tensor


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of ``x`` along ``dim`` (chapter 2).

    Subtracts the maximum of each slice before ``exp``, so large scores cannot overflow.
    Entries equal to ``-inf`` (masked positions) get weight 0; a slice that is entirely
    ``-inf`` has nothing to attend to and gets all zeros instead of NaN.
    Takes and returns a tensor of any shape.
    """
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x):
        as_float_tensor(x, "softmax input")  # raises the explanatory TypeError
    if torch.isnan(x).any() or (x == math.inf).any():
        raise ValueError(
            "softmax input contains NaN or +inf; only -inf (a masked position) is allowed. "
            "Check the scores for an overflow before calling softmax."
        )
    if not -x.dim() <= dim < max(x.dim(), 1):
        raise ValueError(f"dim={dim} is out of range for an input of shape {tuple(x.shape)}.")
    row_max = x.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    exps = torch.exp(x - row_max)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total == 0, torch.ones_like(total), total)


def broadcastable(*shapes: tuple[int, ...]) -> bool:
    """True if the shapes broadcast together, as in ``torch.broadcast_shapes`` (without its slow first import)."""
    for sizes in itertools.zip_longest(*(reversed(s) for s in shapes), fillvalue=1):
        if len(set(sizes) - {1}) > 1:
            return False
    return True


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"queries, keys and values need shape (..., t, d); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}. For a single vector use q.unsqueeze(0)."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries have d_k={q.shape[-1]} features but keys have {k.shape[-1]}: "
            f"the dot product q·k needs the same last dimension (q {tuple(q.shape)}, k {tuple(k.shape)})."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys describe {k.shape[-2]} tokens but values describe {v.shape[-2]}: "
            f"every key needs exactly one value (k {tuple(k.shape)}, v {tuple(v.shape)})."
        )
    if not broadcastable(q.shape[:-2], k.shape[:-2], v.shape[:-2]):
        raise ValueError(
            f"the leading (batch) dimensions {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])} and "
            f"{tuple(v.shape[:-2])} of queries, keys and values do not broadcast together."
        )


def _mask_to_additive(mask: torch.Tensor, scores_shape: torch.Size) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    if not broadcastable(mask.shape, scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (..., t_q, t_k); the last two dimensions must be "
            f"(t_q, t_k) = {tuple(scores_shape[-2:])} or 1."
        )
    if mask.dtype == torch.bool:
        zero = torch.zeros((), dtype=torch.float32)
        return torch.where(mask, zero, torch.tensor(-math.inf))
    if torch.is_floating_point(mask):
        if torch.isnan(mask).any() or (mask == math.inf).any():
            raise ValueError("an additive float mask may hold finite numbers and -inf, not NaN or +inf.")
        return mask
    raise TypeError(
        f"mask has dtype {mask.dtype}; use a bool mask (True = may attend) or an additive float "
        f"mask (0 = may attend, -inf = blocked). For a 0/1 integer mask write mask.bool()."
    )


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
    ``(..., t_q, d_v)`` and ``(..., t_q, t_k)``.

    ``scale`` defaults to ``1/sqrt(d_k)``; pass ``scale=1.0`` for the raw dot products.
    ``mask`` broadcasts to ``(..., t_q, t_k)`` and is either boolean with **True = may attend**
    (the convention of ``torch.nn.functional.scaled_dot_product_attention``) or an additive
    float mask (0 to keep, ``-inf`` to block). A query whose keys are all blocked gets
    all-zero weights and an all-zero output, never NaN.
    """
    for name, t in (("queries", q), ("keys", k), ("values", v)):
        as_float_tensor(t, name, min_dim=2)
    _check_shapes(q, k, v)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    elif not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}.")
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., t_q, t_k)
    if mask is not None:
        scores = scores + _mask_to_additive(mask, scores.shape).to(scores.dtype)
    weights = softmax(scores, dim=-1)  # (..., t_q, t_k), rows sum to 1 (or 0 if fully masked)
    return weights @ v, weights
