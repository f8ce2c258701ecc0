"""Attention over shards of keys, computed shard by shard and merged exactly (chapter 9).

Chapter 6's fused kernel keeps three running numbers per query while it walks through the keys:
the largest score ``m``, the sum ``l`` of ``exp(s - m)`` and the unnormalised output
``o = Σ exp(s - m) v``. :func:`partial_attention` computes that triple for one shard of keys,
:func:`merge_partials` combines the triples of several shards, and :func:`finish_partial` divides
``o`` by ``l``. Flash-decoding splits a long cache into shards this way; ring attention passes
the shards from device to device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import validate
from .attention import apply_mask

__all__ = ["partial_attention", "merge_partials", "finish_partial", "finite_or_zero"]


def partial_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention of ``q`` over one shard of keys, as ``(m, l, o)`` (chapter 9).

    q ``(..., t_q, d_k)``, k ``(..., t_s, d_k)``, v ``(..., t_s, d_v)``; ``mask`` (bool, True = may
    attend, or additive) broadcasts to ``(..., t_q, t_s)``. Returns ``m`` and ``l`` of shape
    ``(..., t_q, 1)`` and ``o`` ``(..., t_q, d_v)``. A query whose keys in this shard are all blocked
    gets ``m = -inf``, ``l = 0`` and ``o = 0``: it contributes nothing when merged.
    """
    scale = validate.attention_args(q, k, v, mask, scale)  # the checks of ah.attention
    s = (q @ k.transpose(-2, -1)) * scale  # (..., t_q, t_s)
    if mask is not None:
        s = apply_mask(s, mask)
    m = s.amax(dim=-1, keepdim=True)  # (..., t_q, 1), -inf where every key is blocked
    p = torch.exp(s - finite_or_zero(m))  # (..., t_q, t_s), exp(-inf) = 0 for blocked keys
    return m, p.sum(dim=-1, keepdim=True), p @ v


def finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    """``m`` (any shape) with ±inf replaced by 0, so that ``x - m`` is never ``-inf - (-inf) = NaN`` (chapter 9).

    ``m`` is a running maximum of scores, ``-inf`` where every key is blocked; shared by the tiled passes.
    """
    return torch.where(torch.isinf(m), torch.zeros_like(m), m)


def merge_partials(
    parts: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Merge the ``(m, l, o)`` triples of several shards into the triple of all their keys (chapter 9).

    Each triple is rescaled to the common maximum ``M = max_i m_i``: ``l = Σ l_i e^{m_i - M}``,
    ``o = Σ o_i e^{m_i - M}``. Exact, in any order; a shard with ``m_i = -inf`` adds nothing, and if
    every shard has ``m_i = -inf`` the result is ``(-inf, 0, 0)`` rather than NaN.
    """
    parts = list(parts)
    if any(not isinstance(p, tuple) for p in parts):
        raise TypeError("merge_partials takes a list of (m, l, o) triples from partial_attention, got "
                        f"{', '.join(sorted({type(p).__name__ for p in parts}))} in it.")
    if not parts or any(len(p) != 3 for p in parts):
        raise ValueError("merge_partials takes a non-empty list of (m, l, o) triples from partial_attention.")
    shapes = {(tuple(m.shape), tuple(ell.shape), tuple(o.shape[:-1])) for m, ell, o in parts}
    if len(shapes) != 1:
        raise ValueError(f"the triples come from different queries: shapes {sorted(shapes)} must all agree.")
    M = torch.stack([m for m, _, _ in parts]).amax(dim=0)  # (..., t_q, 1)
    l_total, o_total = torch.zeros_like(parts[0][1]), torch.zeros_like(parts[0][2])
    for m, ell, o in parts:
        factor = torch.exp(m - finite_or_zero(M))  # e^{m_i - M}; 0 for an all-blocked shard
        l_total = l_total + ell * factor
        o_total = o_total + o * factor
    return M, l_total, o_total


def finish_partial(part: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The attention output ``o / l`` of a (merged) triple, 0 for a query with no allowed key (chapter 9)."""
    _, ell, o = part
    return o / torch.where(ell == 0, torch.ones_like(ell), ell)
