"""Padding and causal masks, and the three ways PyTorch spells a mask (chapter 7).

A mask says which keys each query may look at. PyTorch uses three conventions:

- ``"allowed"``: bool, **True = may attend**. Taken by :func:`attn_helpers.attention` and
  ``torch.nn.functional.scaled_dot_product_attention``.
- ``"blocked"``: bool, **True = blocked**. Taken by ``torch.nn.MultiheadAttention``'s
  ``attn_mask`` and ``key_padding_mask``.
- ``"additive"``: float, **0 = may attend, -inf = blocked**, added to the scores before the
  softmax. All three accept it.

:func:`convert_mask` turns any of them into any other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from . import validate

__all__ = ["MASK_CONVENTIONS", "padding_mask", "causal_mask", "convert_mask"]

MASK_CONVENTIONS = ("allowed", "blocked", "additive")


def padding_mask(lengths: Sequence[int] | torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Which positions of a padded batch hold real tokens (chapter 7).

    ``lengths[i]`` is the number of real tokens of sequence ``i``; the batch is padded at the
    end to ``max_len`` (default: the longest length). Returns a bool tensor ``(b, max_len)``,
    **True = a real token** (the "allowed" convention). To use it as a key mask for scores of
    shape ``(b, t_q, t_k)`` write ``mask[:, None, :]``; for ``(b, h, t_q, t_k)``, ``mask[:, None, None, :]``.
    """
    lengths = _lengths_list(lengths)  # a clear error for anything but whole numbers >= 0
    longest = max(lengths)
    max_len = longest if max_len is None else validate.integer(max_len, "max_len", minimum=1)
    if longest > max_len:
        raise ValueError(
            f"a sequence has {longest} tokens but max_len={max_len}; pad to at least the longest "
            f"length, or leave max_len out."
        )
    positions = torch.arange(max_len)  # (t,)
    return positions[None, :] < torch.tensor(lengths)[:, None]  # (b, t)


def _lengths_list(lengths: object) -> list[int]:
    """Sequence lengths (a list, tuple, 1-D integer tensor or array) as a non-empty list of ints >= 0 (chapter 7)."""
    if isinstance(lengths, torch.Tensor) or hasattr(lengths, "dtype"):
        kind = str(getattr(lengths, "dtype", ""))
        if "float" in kind or "bool" in kind or "complex" in kind:
            raise TypeError(f"lengths must be whole numbers, got a tensor of dtype {lengths.dtype}: pass a list of "
                            f"ints or an integer tensor, e.g. lengths.long().")
        if getattr(lengths, "ndim", None) != 1:
            raise ValueError(f"lengths must be a 1-D integer tensor or a list of ints, got a tensor of shape "
                             f"{tuple(lengths.shape)}: one length per sequence.")
        lengths = lengths.tolist()
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        raise TypeError(f"lengths must be a list of sequence lengths, got {lengths!r} ({type(lengths).__name__}).")
    if len(lengths) == 0:
        raise ValueError("lengths must be a non-empty list of sequence lengths, got an empty one.")
    return [validate.integer(n, "every length", minimum=0) for n in lengths]


def causal_mask(t_q: int, t_k: int | None = None) -> torch.Tensor:
    """The causal (look-back-only) mask, bool ``(t_q, t_k)``, **True = may attend** (chapters 6-7).

    With ``t_k = t_q`` (the default) query ``i`` may attend keys ``0 … i``: the lower triangle.
    When ``t_q < t_k`` the queries are taken to be the *last* ``t_q`` positions of the ``t_k``
    keys (as when new tokens attend to a cache of earlier ones), so the triangle is aligned at
    the bottom right: query ``i`` may attend keys ``0 … t_k - t_q + i``. (``scaled_dot_product_attention``'s
    ``is_causal=True`` aligns it at the top left instead.)
    """
    t_q = validate.integer(t_q, "t_q", minimum=1)
    t_k = t_q if t_k is None else validate.integer(t_k, "t_k", minimum=1)
    if t_q > t_k:
        raise ValueError(
            f"t_q={t_q} queries but only t_k={t_k} keys: with the queries at the end of the "
            f"sequence, the first {t_q - t_k} queries would have no key to attend. Use t_k >= t_q."
        )
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)


def _check_convention(name: object, role: str) -> str:
    if name not in MASK_CONVENTIONS:
        raise ValueError(f"{role} must be one of {MASK_CONVENTIONS}, got {name!r}.")
    return name  # type: ignore[return-value]


def _to_allowed(mask: torch.Tensor, source: str) -> torch.Tensor:
    if source == "additive":
        if not torch.is_floating_point(mask):
            raise TypeError(
                f"an additive mask holds floats (0 and -inf), got dtype {mask.dtype}. A bool mask is "
                f"'allowed' (True = may attend) or 'blocked' (True = blocked): say which."
            )
        blocked = mask == -math.inf
        if not (blocked | (mask == 0)).all():
            raise ValueError(
                "this additive mask holds values other than 0 and -inf (for example -1e9, or a "
                "bias), so it is not a yes/no mask and has no boolean equivalent. If -1e9 means "
                "'blocked', write mask.masked_fill(mask <= -1e9, float('-inf')) first."
            )
        return ~blocked
    if mask.dtype != torch.bool:
        raise TypeError(
            f"a {source!r} mask must have dtype torch.bool, got {mask.dtype}. For a float mask of "
            f"0 and -inf use source='additive'; for a 0/1 integer mask write mask.bool() first."
        )
    return mask if source == "allowed" else ~mask


def convert_mask(
    mask: torch.Tensor, source: str, target: str, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Rewrite ``mask`` from one convention to another, keeping its shape (chapters 6-7).

    ``source`` and ``target`` are each ``"allowed"`` (bool, True = may attend), ``"blocked"``
    (bool, True = blocked) or ``"additive"`` (float, 0 or -inf). An additive result has ``dtype``.
    Example: ``convert_mask(key_padding_mask, "blocked", "allowed")`` turns the mask
    ``nn.MultiheadAttention`` takes into the one :func:`attn_helpers.attention` takes.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    allowed = _to_allowed(mask, _check_convention(source, "source"))
    target = _check_convention(target, "target")
    if target == "allowed":
        return allowed.clone()
    if target == "blocked":
        return ~allowed
    if not dtype.is_floating_point:
        raise TypeError(f"an additive mask needs a floating-point dtype, got {dtype}.")
    zero = torch.zeros((), dtype=dtype)
    return torch.where(allowed, zero, torch.tensor(-math.inf, dtype=dtype))
