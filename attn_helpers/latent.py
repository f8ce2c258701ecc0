"""Multi-head latent attention (MLA, DeepSeek-V2): cache one small latent per token, not h keys and values (chapter 12).

Each token is compressed to a latent ``c = W_dkv x`` of ``d_c`` numbers; head i's key and value are
``W_uk[i] c`` and ``W_uv[i] c``. Only ``c`` is cached, with a small key ``k_rope`` of ``d_rope``
numbers that carries the position (RoPE) and is shared by all heads. With ``absorb=True`` the per-head
keys and values are never built: ``q·(W_uk c) = (W_ukᵀ q)·c``, so each query is mapped into the latent
space once, and ``W_uv`` is folded into the output projection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from . import validate
from .attention import attention
from .inference import grouped_query_attention
from .masks import causal_mask
from .position import rope

__all__ = ["LatentCache", "LatentAttention"]


@dataclass(frozen=True)
class LatentCache:
    """What MLA caches for one layer (chapter 12): ``c`` ``(b, t, d_c)`` and the rotated ``k_rope``
    ``(b, t, d_rope)``."""

    c: torch.Tensor
    k_rope: torch.Tensor

    def __len__(self) -> int:
        return self.c.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached latents and RoPE keys."""
        return self.c.nbytes + self.k_rope.nbytes

    def extend(self, c_new: torch.Tensor, k_rope_new: torch.Tensor) -> LatentCache:
        """A cache with ``c_new`` ``(b, t_new, d_c)`` and ``k_rope_new`` ``(b, t_new, d_rope)`` appended."""
        new = (c_new.shape[0], c_new.shape[2], k_rope_new.shape[2], c_new.dtype)
        if new != (self.c.shape[0], self.c.shape[2], self.k_rope.shape[2], self.c.dtype):
            raise ValueError(f"new latents {tuple(c_new.shape)} ({c_new.dtype}) do not fit a cache of "
                             f"{tuple(self.c.shape)} ({self.c.dtype}): the batch, d_c, d_rope and dtype must match. "
                             f"Pass the cache this layer returned for the same sequences.")
        return LatentCache(torch.cat([self.c, c_new], dim=1), torch.cat([self.k_rope, k_rope_new], dim=1))


class LatentAttention(nn.Module):
    """Causal multi-head latent attention with a decoupled RoPE key, and a cache (chapter 12).

    ``h = num_heads`` heads of ``d_k = d_model // h`` content features plus ``d_rope`` position features.
    ``forward(x, cache=None, absorb=True)`` takes the new tokens ``x`` ``(b, t_new, d_model)``, at
    positions ``len(cache) …``; returns ``(out (b, t_new, d_model), cache)``. ``absorb=False`` computes
    the same thing the long way, building every head's keys and values from the cached latents.
    """

    def __init__(self, d_model: int, num_heads: int, d_c: int, d_rope: int):
        super().__init__()
        self.d_model = validate.integer(d_model, "d_model", minimum=1)
        self.num_heads = validate.integer(num_heads, "num_heads", minimum=1)
        self.d_c = validate.integer(d_c, "d_c", minimum=1)
        self.d_rope = validate.even_int(d_rope, "d_rope")  # RoPE turns pairs of features
        self.d_k = validate.head_width(self.d_model, self.num_heads)
        h, d_k = self.num_heads, self.d_k
        self.W_q = nn.Linear(d_model, h * d_k, bias=False)  # content queries
        self.W_qr = nn.Linear(d_model, h * d_rope, bias=False)  # RoPE queries, one per head
        self.W_dkv = nn.Linear(d_model, d_c, bias=False)  # down to the latent c
        self.W_uk = nn.Linear(d_c, h * d_k, bias=False)  # up from c to every head's keys
        self.W_uv = nn.Linear(d_c, h * d_k, bias=False)  # up from c to every head's values
        self.W_kr = nn.Linear(d_model, d_rope, bias=False)  # the RoPE key, shared by the heads
        self.W_o = nn.Linear(h * d_k, d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: LatentCache | None = None, absorb: bool = True
                ) -> tuple[torch.Tensor, LatentCache]:
        """``(out (b, t_new, d_model), cache)`` for new tokens ``x`` ``(b, t_new, d_model)`` after ``cache``."""
        validate.head_inputs(self, x, None)
        absorb = validate.flag(absorb, "absorb")
        if x.dim() != 3:
            raise ValueError(f"x must have shape (b, t_new, d_model), got {tuple(x.shape)}: add a batch with x[None].")
        b, t_new, _ = x.shape
        h, d_k, d_c, d_r = self.num_heads, self.d_k, self.d_c, self.d_rope
        start = 0 if cache is None else len(cache)
        positions = torch.arange(start, start + t_new)  # the new tokens come after the cached ones
        c = self.W_dkv(x)  # (b, t_new, d_c)
        k_rope = rope(self.W_kr(x), positions)  # (b, t_new, d_r): rotated once, cached rotated
        cache = LatentCache(c, k_rope) if cache is None else cache.extend(c, k_rope)  # (b, t, ·)
        q = self.W_q(x).view(b, t_new, h, d_k).transpose(1, 2)  # (b, h, t_new, d_k)
        q_rope = rope(self.W_qr(x).view(b, t_new, h, d_r).transpose(1, 2), positions)  # (b, h, t_new, d_r)
        mask, scale = causal_mask(t_new, len(cache)), 1 / math.sqrt(d_k + d_r)
        if absorb:
            W_uk = self.W_uk.weight.view(h, d_k, d_c)  # (h, d_k, d_c): head i's key is W_uk[i] c
            q_latent = q @ W_uk  # (b, h, t_new, d_c): W_uk[i]ᵀ q, the query seen from the latent
            keys = torch.cat([cache.c, cache.k_rope], dim=-1)[:, None]  # (b, 1, t, d_c + d_r), shared by the heads
            # grouped_query_attention scales by 1/√(d_c + d_r); these scores need 1/√(d_k + d_r), as the long way's
            queries = torch.cat([q_latent, q_rope], dim=-1) * (scale * math.sqrt(d_c + d_r))  # (b, h, t_new, d_c + d_r)
            o_latent, _ = grouped_query_attention(queries, keys, cache.c[:, None], mask)  # (b, h, t_new, d_c): MQA
            W_uv = self.W_uv.weight.view(h, d_k, d_c)  # (h, d_k, d_c)
            W_o = self.W_o.weight.view(self.d_model, h, d_k).permute(1, 2, 0)  # (h, d_k, d_model)
            out = (o_latent @ (W_uv.transpose(1, 2) @ W_o)).sum(dim=1)  # (b, h, t_new, d_model) summed over heads
            return out, cache
        t = len(cache)
        k = self.W_uk(cache.c).view(b, t, h, d_k).transpose(1, 2)  # (b, h, t, d_k): every head's keys
        v = self.W_uv(cache.c).view(b, t, h, d_k).transpose(1, 2)  # (b, h, t, d_k): every head's values
        k = torch.cat([k, cache.k_rope[:, None].expand(b, h, t, d_r)], dim=-1)  # (b, h, t, d_k + d_r)
        heads, _ = attention(torch.cat([q, q_rope], dim=-1), k, v, mask, scale)  # (b, h, t_new, d_k)
        return self.W_o(heads.transpose(1, 2).reshape(b, t_new, h * d_k)), cache

    def cache_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """Bytes the cache grows by per token, in this layer: (d_c + d_rope) numbers."""
        return (self.d_c + self.d_rope) * torch.finfo(dtype).bits // 8

    def extra_repr(self) -> str:
        """The sizes, as ``print(layer)`` shows them."""
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_c={self.d_c}, d_rope={self.d_rope}"
