"""Sliding-window attention with a ring-buffer cache, and attention sinks (chapter 11).

Under a sliding window of width w, the token at position p sees only the w positions ``p - w + 1 … p``.
Decoding then needs only the last w keys and values: :class:`RingCache` keeps them in w slots, writing
token n into slot ``n mod w`` over the oldest one, so its memory stays the same however long the text.
With ``sinks`` > 0 the first tokens are kept as well, in slots of their own (StreamingLLM), and
:meth:`RingCache.cache_positions` numbers the slots within the cache, as StreamingLLM gives them to RoPE.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import validate
from .masks import causal_mask

__all__ = ["window_mask", "ring_slot", "RingCache"]


def window_mask(t_q: int, t_k: int | None = None, *, window: int, sinks: int = 0) -> torch.Tensor:
    """The banded causal mask, bool ``(t_q, t_k)``, **True = may attend** (chapter 11).

    The queries are the last ``t_q`` of ``t_k`` positions, as in ``ah.causal_mask``: query i sits at
    ``p = t_k - t_q + i`` and may attend key j when ``p - window < j <= p``, or when ``j < sinks``.
    """
    window = validate.integer(window, "window", minimum=1)
    sinks = validate.integer(sinks, "sinks", minimum=0)
    causal = causal_mask(t_q, t_k)  # (t_q, t_k), checks the sizes
    t_q, t_k = causal.shape
    distance = torch.arange(t_k - t_q, t_k)[:, None] - torch.arange(t_k)  # (t_q, t_k): p - j
    return causal & ((distance < window) | (torch.arange(t_k) < sinks))


def ring_slot(n: int, window: int, sinks: int = 0) -> int:
    """The slot token n is written to in a ring buffer of ``sinks + window`` slots (chapter 11).

    The first ``sinks`` tokens keep slots ``0 … sinks-1``; every later token overwrites the oldest
    of the other ``window`` slots: ``sinks + (n - sinks) mod window``.
    """
    n = validate.integer(n, "n", minimum=0)
    window = validate.integer(window, "window", minimum=1)
    sinks = validate.integer(sinks, "sinks", minimum=0)
    return n if n < sinks else sinks + (n - sinks) % window


@dataclass(frozen=True)
class RingCache:
    """The keys and values of the last ``window`` tokens (and of the first ``sinks``), for one layer (chapter 11).

    ``k`` and ``v`` have shape ``(b, g, sinks + window, d_k)``, whatever the number of tokens seen;
    ``positions`` ``(sinks + window,)`` says which token each slot holds (-1: empty). Keys are stored
    as they are given, so give them their positions (RoPE) *before* writing them. :meth:`write` returns
    a new cache; :meth:`allowed` says which slots a new query may attend.
    """

    k: torch.Tensor
    v: torch.Tensor
    positions: torch.Tensor
    window: int
    sinks: int = 0

    @classmethod
    def empty(cls, b: int, g: int, d_k: int, window: int, sinks: int = 0,
              dtype: torch.dtype = torch.float32) -> RingCache:
        """A cache with ``sinks + window`` empty slots of keys and values ``(b, g, ·, d_k)``."""
        slots = validate.integer(window, "window", minimum=1) + validate.integer(sinks, "sinks", minimum=0)
        zeros = torch.zeros(b, g, slots, d_k, dtype=dtype)  # (b, g, slots, d_k)
        return cls(zeros, zeros.clone(), torch.full((slots,), -1), window, sinks)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values: constant."""
        return self.k.nbytes + self.v.nbytes

    def write(self, k_new: torch.Tensor, v_new: torch.Tensor, n: int) -> RingCache:
        """A cache with token n's key and value ``(b, g, 1, d_k)`` in slot :func:`ring_slot` ``(n)``; the tokens
        come in order, n = 0, 1, 2, …"""
        n = _ring_write(self, k_new, v_new, n)
        slot = torch.tensor([ring_slot(n, self.window, self.sinks)])
        return RingCache(self.k.index_copy(2, slot, k_new), self.v.index_copy(2, slot, v_new),
                         self.positions.index_copy(0, slot, torch.tensor([n])), self.window, self.sinks)

    def allowed(self) -> torch.Tensor:
        """Which slots hold a token, bool ``(sinks + window,)``: the mask of a query that comes after them all."""
        return self.positions >= 0

    def cache_positions(self) -> torch.Tensor:
        """Each slot's position counted within the cache, ``(sinks + window,)`` (-1: empty), as StreamingLLM
        numbers them: the sinks ``0 … sinks-1``, then the window's tokens from the oldest to the newest. The
        newest token, the one whose query attends now, is at ``(number of filled slots) - 1``."""
        filled = self.allowed()
        older = filled[None, :] & (self.positions[None, :] < self.positions[:, None])  # (slots, slots)
        return torch.where(filled, older.sum(dim=1), -1)


def _ring_write(cache: RingCache, k_new: object, v_new: object, n: object) -> int:
    """The checks of :meth:`RingCache.write`: one token's key and value ``(b, g, 1, d_k)`` in the cache's dtype, and
    n the next token (the one after the newest cached). Returns n (chapter 11)."""
    wanted = (*cache.k.shape[:2], 1, cache.k.shape[3])
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        validate.as_float_tensor(x, name)
        if x.shape != wanted:
            raise ValueError(f"write one token at a time: keys and values of shape (b, g, 1, d_k) = {wanted}, got "
                             f"{tuple(k_new.shape)} and {tuple(v_new.shape)}.")
        if x.dtype != cache.k.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} and the cache holds {cache.k.dtype}: convert with "
                            f"{name}.to({cache.k.dtype}), or make the cache with "
                            f"RingCache.empty(..., dtype={x.dtype}).")
    following = int(cache.positions.max()) + 1  # 0 for an empty cache
    if validate.integer(n, "n", minimum=0) != following:
        held = "it is empty" if following == 0 else f"it holds tokens up to {following - 1}"
        raise ValueError(f"n must be the position of the next token, {following} ({held}), got {n!r}: a ring buffer "
                         f"takes the tokens in order, and one written out of order lands in the slot of a token "
                         f"still inside the window. Write token {following} first.")
    return following
