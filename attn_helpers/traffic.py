"""The memory-traffic model of FlashAttention: a slow memory of any size, a fast one of ``M`` numbers (chapter 10).

:class:`Traffic` counts the numbers the tiled loops of ``ah.flash`` load from slow memory and store back, and,
given ``M``, refuses a step that would hold more than ``M`` numbers in fast memory at once. It counts numbers,
not bytes, and ignores the arithmetic (Dao et al., 2022, Theorem 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from . import validate

__all__ = [
    "Traffic", "standard_attention", "fitted_standard_attention", "fast_memory", "paper_blocks", "fitted_blocks",
]


@dataclass
class Traffic:
    """Numbers moved between a slow memory and a fast memory of ``M`` numbers (``None``: no limit) (chapter 10).

    ``reads`` counts numbers loaded from slow memory, ``writes`` numbers stored back; ``total`` both.
    """

    reads: int = 0
    writes: int = 0
    M: int | None = None

    def __post_init__(self) -> None:
        if self.M is not None:
            validate.integer(self.M, "M", minimum=1)

    @property
    def total(self) -> int:
        """Numbers moved both ways: ``reads + writes``."""
        return self.reads + self.writes

    def read(self, *tensors: torch.Tensor) -> None:
        """Count the numbers of ``tensors`` as loaded from slow memory."""
        self.reads += sum(x.numel() for x in tensors)

    def write(self, *tensors: torch.Tensor) -> None:
        """Count the numbers of ``tensors`` as stored back to slow memory."""
        self.writes += sum(x.numel() for x in tensors)

    def hold(self, *tensors: torch.Tensor) -> None:
        """Raise ``ValueError`` if ``tensors``, all in fast memory at once, hold more than ``M`` numbers."""
        held = sum(x.numel() for x in tensors)
        if self.M is not None and held > self.M:
            raise ValueError(f"one step of the loop holds {held:,} numbers in fast memory, more than M = {self.M:,}: "
                             "use smaller blocks (ah.traffic.fitted_blocks(M, d) gives blocks that fit).")

    def state(self, tile: Any, s: torch.Tensor, alpha: torch.Tensor, m: torch.Tensor, ell: torch.Tensor,
              acc: torch.Tensor) -> None:
        """What one ``tile`` (an ``ah.flash.Tile``, which this module cannot import: ah.flash imports it) of
        ``ah.flash.flash_forward`` leaves in fast memory: the tile's scores ``s``
        ``(..., B_r, B_c)``, the factor ``alpha = exp(m_old - m)`` that rescaled its rows, and their ``m``, ``ell``
        (ℓ) ``(..., B_r, 1)`` and ``acc`` ``(..., B_r, d_v)`` after the tile. Counts nothing; a subclass may keep
        them (chapter 10's explorer replays the walk from them)."""


def standard_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, traffic: Traffic) -> torch.Tensor:
    """Attention in three steps through slow memory, counting what moves (chapter 10; Dao et al., 2022, Algorithm 0).

    ``S = Q Kᵀ · scale`` (read Q and K, write S), ``P = softmax(S)`` (read S, write P), ``O = P V``
    (read P and V, write O): ``4·t·d + 4·t²`` numbers for ``t_q = t_k = t`` and ``d_k = d_v = d``. Each step reads
    its inputs once, so this is a lower bound: with a small fast memory, the products must be cut into blocks and
    read some inputs more than once (:func:`fitted_standard_attention`).
    """
    scale = validate.attention_args(q, k, v, None, None)
    if traffic.M is not None:  # its steps are not cut to fit any M: a limit would go unchecked
        raise ValueError(f"standard_attention counts the lower bound, with no fast memory to fit, but the counter has "
                         f"M = {traffic.M:,}: pass ah.traffic.Traffic(), or use fitted_standard_attention for M.")
    traffic.read(q, k)
    s = (q @ k.transpose(-2, -1)) * scale  # (..., t_q, t_k)
    traffic.write(s)
    traffic.read(s)
    p = torch.softmax(s, dim=-1)  # (..., t_q, t_k)
    traffic.write(p)
    traffic.read(p, v)
    o = p @ v  # (..., t_q, d_v)
    traffic.write(o)
    return o


def fitted_standard_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, traffic: Traffic) -> torch.Tensor:
    """Standard attention's three steps, each cut to fit a fast memory of ``traffic.M`` numbers (chapter 10).

    ``S = Q Kᵀ · scale`` holds a block of ``B`` rows of ``Q`` while the rows of ``K`` stream past one at a time;
    ``O = P V`` holds a block of ``B`` rows of the output while the columns of ``P`` and the rows of ``V`` stream
    past; the softmax holds one row of ``S``. ``B = (M - d) // (d + 1)``, ``d = max(d_k, d_v)``, the largest block
    beside one streamed row. What moves, for ``t_q = t_k = t`` and ``d_k = d_v = d``: ``4·t·d + 4·t²`` (the lower
    bound of :func:`standard_attention`) plus ``2·t·d·(⌈t/B⌉ - 1)`` for the rows of ``K`` and ``V`` read again by
    every block after the first.
    """
    scale = validate.attention_args(q, k, v, None, None)
    if traffic.M is None:
        raise ValueError("fitted_standard_attention needs a fast memory to fit: pass ah.traffic.Traffic(M=...).")
    d = max(q.shape[-1], v.shape[-1])
    block = (traffic.M - d) // (d + 1)  # rows of Q (or O) held beside one row of K (or V) and a column of S (or P)
    if block < 1 or traffic.M < k.shape[-2]:
        raise ValueError(f"a fast memory of M = {traffic.M:,} numbers cannot hold a row of {k.shape[-2]} scores or "
                         f"one query beside a key of width {d}: take a larger M.")
    s_blocks = []
    for r in range(0, q.shape[-2], block):  # S = Q Kᵀ · scale, a block of queries at a time
        q_i = q[..., r:r + block, :]  # (..., B, d_k): loaded once
        traffic.read(q_i, k)  # every row of K streams past the block
        s_i = (q_i @ k.transpose(-2, -1)) * scale  # (..., B, t_k)
        traffic.hold(q_i, k[..., :1, :], s_i[..., :1])  # the block, one key and the column of scores it gives
        traffic.write(s_i)
        s_blocks.append(s_i)
    s = torch.cat(s_blocks, dim=-2)  # (..., t_q, t_k), in slow memory
    traffic.read(s)
    traffic.hold(s[..., :1, :])  # one row of scores at a time
    p = torch.softmax(s, dim=-1)  # (..., t_q, t_k)
    traffic.write(p)
    o_blocks = []
    for r in range(0, q.shape[-2], block):  # O = P V, a block of outputs at a time
        p_i = p[..., r:r + block, :]  # (..., B, t_k): streams past, a column at a time
        traffic.read(p_i, v)  # and every row of V with it
        o_i = p_i @ v  # (..., B, d_v): held until finished
        traffic.hold(o_i, p_i[..., :1], v[..., :1, :])
        traffic.write(o_i)
        o_blocks.append(o_i)
    return torch.cat(o_blocks, dim=-2)  # (..., t_q, d_v)


def fast_memory(block_q: int, block_k: int, d_k: int, d_v: int) -> int:
    """Numbers one step of ``ah.flash.flash_forward`` holds in fast memory (chapter 10): ``Q_i``, ``K_j``, ``V_j``,
    the tile of scores, the accumulator and ``m``, ``ℓ``: ``B_r·d_k + B_c·(d_k + d_v) + B_r·B_c + B_r·d_v + 2·B_r``."""
    for n, name in ((block_q, "block_q"), (block_k, "block_k"), (d_k, "d_k"), (d_v, "d_v")):
        validate.integer(n, name, minimum=1)
    return block_q * d_k + block_k * (d_k + d_v) + block_q * block_k + block_q * d_v + 2 * block_q


def paper_blocks(M: int, d: int) -> tuple[int, int]:
    """The block sizes of Dao et al. (2022) for a fast memory of ``M`` numbers and width ``d``: ``(block_q, block_k)``
    (chapter 10).

    The paper takes ``B_c = ⌈M/4d⌉`` for the blocks of its outer loop (keys, in its Algorithm 1): four blocks of
    ``d``-wide rows (``K_j``, ``V_j``, ``Q_i``, ``O_i``) then fill ``M``; and ``B_r = min(⌈M/4d⌉, d)`` for the inner
    one, so that a tile of scores holds at most ``M/4`` numbers. ``ah.flash``'s loops run over queries outside, so the
    roles swap: ``block_q = ⌈M/4d⌉`` and ``block_k = min(⌈M/4d⌉, d)``. Together they need up to about ``1.26·M``
    numbers (:func:`fast_memory`): ``O(M)``, not at most ``M``.
    """
    validate.integer(M, "M", minimum=1)
    validate.integer(d, "d", minimum=1)
    outer = math.ceil(M / (4 * d))
    return outer, min(outer, d)


def fitted_blocks(M: int, d: int) -> tuple[int, int]:
    """:func:`paper_blocks`, with ``block_k`` cut down until one step fits in ``M`` numbers (chapter 10).

    The traffic of ``ah.flash.flash_forward`` depends on the outer block ``block_q`` alone (each block of queries
    reads all of ``K`` and ``V`` once), so the outer block keeps the paper's ``⌈M/4d⌉`` and the inner one gives way:
    ``block_k`` is ``min(⌈M/4d⌉, d)`` or the largest block of keys for which :func:`fast_memory` is at most ``M``,
    whichever is smaller. Only where not even one key fits beside ``⌈M/4d⌉`` queries is ``block_q`` cut too.
    """
    outer, inner = paper_blocks(M, d)
    block_q = min(outer, (M - 2 * d) // (2 * d + 3))  # fast_memory(B_r, 1, d, d) <= M: room for at least one key
    if block_q < 1:
        raise ValueError(f"a fast memory of M = {M:,} numbers cannot hold even one query beside one key and value "
                         f"of width d = {d}: take M of at least {fast_memory(1, 1, d, d):,}.")
    largest = (M - block_q * (2 * d + 2)) // (block_q + 2 * d)  # fast_memory(B_r, B_c, d, d) <= M, solved for B_c
    return block_q, min(inner, largest)
