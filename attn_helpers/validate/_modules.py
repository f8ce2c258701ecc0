"""Checks of the inputs of the attention modules, their head counts, RoPE and token ids (chapters 4, 5, 9 and 11)."""

from __future__ import annotations

from typing import Any

import torch

from ._numbers import even_int, whole_number
from ._tensors import as_float_tensor


def _module_input(x: object, name: str, d_model: int, dtype: torch.dtype, *, min_dim: int = 1) -> None:
    """Input ``x`` ``(..., d_model)`` of a module whose weights have ``dtype`` (chapters 4-5)."""
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


def _module_mask(mask: object, weights_shape: tuple[int, ...]) -> None:
    """A module's mask must broadcast to its weights ``weights_shape`` without making them bigger (adding a batch)."""
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

    With ``num_kv_heads`` (grouped-query attention, chapter 9) it must divide ``num_heads`` too, so that
    every key/value head serves the same number of query heads. The sizes are positive ints, checked before.
    """
    if d_model % num_heads:
        raise ValueError(
            f"num_heads={num_heads} does not divide d_model={d_model}: each head gets "
            f"d_k = d_model / num_heads features, which must be a whole number. Pick num_heads "
            f"from the divisors of {d_model}, e.g. {_divisors(d_model)[:6]}."
        )
    if num_kv_heads is not None and num_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}: every key/value head "
            f"serves the same number of query heads. Pick num_kv_heads from the divisors of {num_heads}, "
            f"e.g. {_divisors(num_heads)[:6]}."
        )
    return d_model // num_heads


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, smallest first."""
    return [h for h in range(1, n + 1) if n % h == 0]


def head_inputs(head: Any, x: object, mask: object) -> None:
    """The checks of ``SelfAttentionHead.forward``: ``x`` ``(..., t, d_model)``, mask for ``(..., t, t)``."""
    _module_input(x, "x", head.d_model, head.W_q.weight.dtype, min_dim=2)
    t = x.shape[-2]
    _module_mask(mask, (*x.shape[:-2], t, t))


def multi_head_inputs(mha: Any, query: object, key: object, value: object, mask: object) -> None:
    """The checks of ``MultiHeadAttention.forward``: ``(t, d_model)`` or ``(b, t, d_model)`` inputs, one mask."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        as_float_tensor(x, name)
        if x.dim() not in (2, 3):
            raise ValueError(
                f"{name} must have shape (t, d_model) or (b, t, d_model), got {tuple(x.shape)}. "
                f"Add a batch dimension with x.unsqueeze(0), or flatten extra leading dimensions."
            )
        _module_input(x, name, mha.d_model, mha.W_q.weight.dtype)
    if not query.dim() == key.dim() == value.dim():
        raise ValueError(
            f"query, key and value must all be batched (3-D) or all unbatched (2-D); got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}."
        )
    unbatched = query.dim() == 2
    b_q, b_k, b_v = (1, 1, 1) if unbatched else (query.shape[0], key.shape[0], value.shape[0])
    if not b_q == b_k == b_v:
        raise ValueError(
            f"query, key and value hold different numbers of sequences (batch sizes "
            f"{b_q}, {b_k}, {b_v}); they must be equal."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key has {key.shape[-2]} tokens but value has {value.shape[-2]}: every key needs "
            f"exactly one value."
        )
    if mask is None:
        return
    if isinstance(mask, torch.Tensor) and unbatched and mask.dim() == 4:
        raise ValueError(
            f"a 4-D mask {tuple(mask.shape)} needs batched (b, t, d_model) input; "
            f"for a single sequence use a (t_q, t_k) or (h, t_q, t_k) mask."
        )
    if isinstance(mask, torch.Tensor) and not unbatched and mask.dim() == 3 and mask.shape[0] != 1:
        raise ValueError(
            f"a 3-D mask {tuple(mask.shape)} is ambiguous for batched input: the weights "
            f"have shape (b, h, t_q, t_k). Write mask[:, None] for one mask per sequence "
            f"(b, 1, t_q, t_k) or mask[None] for one per head (1, h, t_q, t_k)."
        )
    _module_mask(mask, (b_q, mha.num_heads, query.shape[-2], key.shape[-2]))


def rope_inputs(x: object, positions: object, theta: object) -> tuple[int, int]:
    """The checks of RoPE with given frequencies: ``x`` ``(..., t, d)``, positions ``(t,)`` or None, theta ``(d/2,)``.

    Returns ``(t, d)`` (chapter 11).
    """
    as_float_tensor(x, "x", min_dim=2)
    t, d = x.shape[-2], even_int(x.shape[-1], "the last dimension of x")
    if not isinstance(theta, torch.Tensor) or theta.shape != (d // 2,) or not torch.is_floating_point(theta):
        raise ValueError(f"theta must be a float tensor of d/2 = {d // 2} frequencies, one per pair of "
                         f"features, got {getattr(theta, 'shape', theta)!r}.")
    if positions is not None:
        p = torch.as_tensor(positions)
        if p.dtype == torch.bool or torch.is_complex(p) or p.shape != (t,):
            raise ValueError(f"positions must hold t = {t} numbers, one per row of x, got shape {tuple(p.shape)}. "
                             f"For 0, 1, …, t-1 leave it out.")
    return t, d


def token_ids(tokens: object, vocab_size: int) -> tuple[int, int]:
    """Check a ``(b, t)`` tensor of token ids (``torch.long``) in ``0 … vocab_size - 1``; returns ``(b, t)``
    (chapters 8, 9 and 11)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long or tokens.dim() != 2 or tokens.numel() == 0:
        raise ValueError(f"tokens must be a non-empty (b, t) tensor of integer ids (torch.long), got "
                         f"{getattr(tokens, 'shape', type(tokens).__name__)} {getattr(tokens, 'dtype', '')}.")
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(f"token ids must lie in 0 … {vocab_size - 1} (the model's vocab_size is {vocab_size}), "
                         f"got ids "
                         f"{int(tokens.min())} … {int(tokens.max())}.")
    return tokens.shape[0], tokens.shape[1]


def ring_write(cache: Any, k_new: object, v_new: object, n: object) -> int:
    """The checks of ``RingCache.write``: one token's key and value ``(b, g, 1, d_k)`` in the cache's dtype, and n the
    next token (the one after the newest cached). Returns n (chapter 11)."""
    wanted = (*cache.k.shape[:2], 1, cache.k.shape[3])
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        as_float_tensor(x, name)
        if x.shape != wanted:
            raise ValueError(f"write one token at a time: keys and values of shape (b, g, 1, d_k) = {wanted}, got "
                             f"{tuple(k_new.shape)} and {tuple(v_new.shape)}.")
        if x.dtype != cache.k.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} and the cache holds {cache.k.dtype}: convert with "
                            f"{name}.to({cache.k.dtype}), or make the cache with "
                            f"RingCache.empty(..., dtype={x.dtype}).")
    following = int(cache.positions.max()) + 1  # 0 for an empty cache
    if whole_number(n) != following:
        held = "it is empty" if following == 0 else f"it holds tokens up to {following - 1}"
        raise ValueError(f"n must be the position of the next token, {following} ({held}), got {n!r}: a ring buffer "
                         f"takes the tokens in order, and one written out of order lands in the slot of a token "
                         f"still inside the window. Write token {following} first.")
    return following
