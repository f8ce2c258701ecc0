"""Checks of the inputs of the attention modules, their head counts, RoPE and token ids (chapters 4, 5, 9 and 11)."""

from __future__ import annotations

from typing import Any

import torch

from ._tensors import as_float_tensor


def module_input(x: object, name: str, d_model: int, dtype: torch.dtype, *, min_dim: int = 1) -> None:
    """Check the input ``x`` ``(..., d_model)`` of a module whose weights have ``dtype`` (chapters 4 and 5)."""
    as_float_tensor(x, name, min_dim=min_dim)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has {x.shape[-1]} features (shape {tuple(x.shape)}) but the module was built "
            f"with d_model={d_model}: the last dimension must be d_model. Build the module with "
            f"d_model={x.shape[-1]}, or check that you did not pass a transposed tensor."
        )
    if x.dtype != dtype:
        fix = {torch.float32: ".float()", torch.float64: ".double()"}.get(dtype, f".to({dtype})")
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's weights are {dtype}. Convert the input with "
            f"{name}{fix}, or the module with module.to({x.dtype})."
        )


def module_mask(mask: object, weights_shape: tuple[int, ...]) -> None:
    """Check that a module's mask (or None) broadcasts to its weights ``weights_shape`` without making them bigger
    (adding a batch) (chapters 4 and 5)."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    fits = mask.dim() <= len(weights_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(weights_shape), strict=False)
    )
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention weights' shape "
            f"{tuple(weights_shape)}. Use a (t_q, t_k) = {tuple(weights_shape[-2:])} mask for every "
            f"sequence, or give it size-1 dimensions where it is shared, e.g. mask[:, None] for one "
            f"(t_q, t_k) mask per sequence of a batch."
        )


def head_width(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> int:
    """``d_k = d_model // num_heads`` after checking that ``num_heads`` divides ``d_model`` (chapters 5, 9, 11 and 12).

    With ``num_kv_heads`` (grouped-query attention, chapter 9) it must divide ``num_heads`` too
    (:func:`query_groups`). The sizes are positive ints, checked before.
    """
    _divides(num_heads, "num_heads", d_model, "d_model",
             "each head gets d_k = d_model / num_heads features, which must be a whole number")
    if num_kv_heads is not None:
        query_groups(num_heads, num_kv_heads)
    return d_model // num_heads


def query_groups(num_heads: int, num_kv_heads: int) -> int:
    """The query heads per key/value head, ``num_heads // num_kv_heads``, after checking that ``num_kv_heads``
    divides ``num_heads`` (grouped-query attention, chapter 9)."""
    _divides(num_kv_heads, "num_kv_heads", num_heads, "num_heads",
             "every key/value head serves the same number of query heads")
    return num_heads // num_kv_heads


def _divides(part: int, part_name: str, whole: int, whole_name: str, why: str) -> None:
    """The divisibility rule: ``part`` divides ``whole``, else a ``ValueError`` saying ``why`` and which to pick."""
    if whole % part:
        raise ValueError(
            f"{part_name}={part} does not divide {whole_name}={whole}: {why}. Pick {part_name} "
            f"from the divisors of {whole}, e.g. {_divisors(whole)[:6]}."
        )


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, smallest first."""
    return [h for h in range(1, n + 1) if n % h == 0]


def head_inputs(head: Any, x: object, mask: object) -> None:
    """The checks of ``SelfAttentionHead.forward``: ``x`` ``(..., t, d_model)``, mask for ``(..., t, t)``."""
    module_input(x, "x", head.d_model, head.W_q.weight.dtype, min_dim=2)
    t = x.shape[-2]
    module_mask(mask, (*x.shape[:-2], t, t))


def token_ids(tokens: object, vocab_size: int) -> tuple[int, int]:
    """Check a ``(b, t)`` tensor of token ids (``torch.long``) in ``0 … vocab_size - 1``; returns ``(b, t)``
    (chapters 8, 9 and 11)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long:
        raise TypeError(f"tokens must be a (b, t) tensor of integer ids (torch.long), got "
                        f"{getattr(tokens, 'dtype', type(tokens).__name__)}; convert ids with tokens.long().")
    if tokens.dim() != 2 or tokens.numel() == 0:
        raise ValueError(f"tokens must be a non-empty (b, t) tensor of integer ids (torch.long), got shape "
                         f"{tuple(tokens.shape)}; for one sequence add a batch dimension, tokens[None].")
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(f"token ids must lie in 0 … {vocab_size - 1} (the model's vocab_size is {vocab_size}), "
                         f"got ids {int(tokens.min())} … {int(tokens.max())}.")
    return tokens.shape[0], tokens.shape[1]
