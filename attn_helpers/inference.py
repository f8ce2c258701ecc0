"""Attention at inference time: a KV cache, grouped-query attention and a tiny decoder (chapter 9).

A model that generates text computes one new token at a time. :class:`KVCache` keeps the keys
and values of the tokens already seen, so each step projects only the new token.
:func:`grouped_query_attention` lets ``h`` query heads share ``g`` key/value heads (``g = h``:
multi-head attention, ``g = 1``: multi-query attention), which shrinks that cache by ``h / g``.
:class:`TinyDecoder` stacks a few such layers so the chapter can decode with and without a cache,
count the FLOPs of each step with ``torch.utils.flop_counter`` and time it.

Positions: each layer rotates its queries and keys with chapter 8's RoPE
(:func:`attn_helpers.position.rope`) before the keys go into the cache. The new tokens' positions
are ``positions``, one integer per new token; left out, they are ``len(cache), len(cache) + 1, …``,
since a new token's position is the number of tokens before it. A cache that drops tokens (a
sliding window) no longer holds that number and must pass ``positions`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from . import validate
from .attention import attention
from .cost import flops_by_operator, time_call
from .masks import causal_mask
from .position import rope
from .training import torch_threads
from .validate import as_float_tensor, flag, head_width, integer, query_groups, sizes_list, token_ids

__all__ = [
    "KVCache",
    "grouped_query_attention",
    "GroupedQueryAttention",
    "TinyDecoder",
    "decode_flops",
    "decode_times",
]


@dataclass(frozen=True)
class KVCache:
    """The keys and values of the tokens seen so far, for one attention layer (chapter 9).

    ``k`` and ``v`` have shape ``(b, g, t, d_k)``: ``g`` key/value heads, ``t`` cached tokens.
    :meth:`extend` returns a new cache with more tokens appended along ``t``.
    """

    k: torch.Tensor
    v: torch.Tensor

    def __post_init__(self) -> None:
        for name, x in (("k", self.k), ("v", self.v)):
            as_float_tensor(x, f"the cached {name}")
            if x.dim() != 4:
                raise ValueError(f"the cached {name} must have shape (b, g, t, d_k), got {tuple(x.shape)}.")
        if self.k.shape[:3] != self.v.shape[:3]:
            raise ValueError(
                f"cached keys {tuple(self.k.shape)} and values {tuple(self.v.shape)} must agree on "
                f"(b, g, t): one value per key, per head."
            )

    def __len__(self) -> int:
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        return self.k.nbytes + self.v.nbytes

    def extend(self, k_new: torch.Tensor, v_new: torch.Tensor) -> KVCache:
        """A cache with ``k_new``, ``v_new`` ``(b, g, t_new, d_k)`` appended after the cached tokens."""
        if k_new.shape[:2] != self.k.shape[:2] or k_new.shape[3] != self.k.shape[3]:
            raise ValueError(
                f"new keys of shape {tuple(k_new.shape)} do not fit a cache of shape "
                f"{tuple(self.k.shape)}: (b, g, ·, d_k) must match."
            )
        return KVCache(torch.cat([self.k, k_new], dim=2), torch.cat([self.v, v_new], dim=2))


def grouped_query_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention in which ``h`` query heads share ``g`` key/value heads (chapter 9).

    q ``(b, h, t_q, d_k)``, k ``(b, g, t_k, d_k)``, v ``(b, g, t_k, d_v)`` with ``g`` dividing
    ``h``; query head ``i`` uses key/value head ``i // (h // g)``, as
    ``scaled_dot_product_attention(..., enable_gqa=True)`` does. The keys are never copied: the
    ``h/g`` query heads of a group are stacked as extra query rows, ``(b, g, h/g · t_q, d_k)``, and
    meet their group's keys ``(b, g, t_k, d_k)`` in one ordinary product.
    ``mask`` is as in :func:`attn_helpers.attention`, broadcasting to ``(t_q, t_k)``.
    Returns ``(out (b, h, t_q, d_v), weights (b, h, t_q, t_k))``.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
        if x.dim() != 4:
            raise ValueError(f"{name} must have shape (b, heads, t, d), got {tuple(x.shape)}.")
    b, h, t_q, d_k = q.shape  # attention() below checks dtypes and values
    g, t_k = k.shape[1], k.shape[2]
    if v.shape[1] != g:
        raise ValueError(f"keys have {g} heads and values {v.shape[1]}: keys and values need the same number g of "
                         f"heads, one value head per key head.")
    groups = query_groups(h, g)  # h/g query heads per key/value head
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor (t_q, t_k) = {(t_q, t_k)}, got {type(mask).__name__}.")
        if mask.dim() > 2:
            raise ValueError(f"mask must be a (t_q, t_k) = {(t_q, t_k)} tensor, got {getattr(mask, 'shape', mask)}.")
        mask = mask.expand(t_q, t_k).repeat(groups, 1)  # (h/g · t_q, t_k): the same mask for each stacked head
    stacked = q.reshape(b, g, groups * t_q, d_k)  # (b, g, h/g · t_q, d_k): a group's query heads, one under another
    out, weights = attention(stacked, k, v, mask)  # (b, g, h/g · t_q, d_v), (b, g, h/g · t_q, t_k)
    return out.reshape(b, h, t_q, -1), weights.reshape(b, h, t_q, t_k)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``num_heads`` query heads and ``num_kv_heads`` key/value heads (chapter 9).

    ``W_q`` maps ``d_model`` to ``h · d_k`` features, ``W_k`` and ``W_v`` to ``g · d_k``, ``W_o`` back
    to ``d_model``; with ``num_kv_heads == num_heads`` the parameters have the names and shapes of
    :class:`attn_helpers.MultiHeadAttention`, and with ``rope=False`` it computes the same function.
    ``forward(x, cache=None, positions=None)`` takes the new tokens ``x`` ``(b, t_new, d_model)``; with
    ``rope=True`` their queries and keys are rotated by their positions (``positions``, ``t_new``
    integers, by default ``len(cache) … len(cache) + t_new - 1``) before the keys are cached. The new
    tokens attend to the cached tokens and to each other under the bottom-right-aligned causal mask
    ``causal_mask(t_new, t_cache + t_new)``. Returns ``(out (b, t_new, d_model), cache)`` with the new
    tokens' (rotated) keys and values appended to the cache.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None, *, rope: bool = True):
        super().__init__()
        self.d_model = integer(d_model, "d_model", minimum=1)
        self.num_heads = integer(num_heads, "num_heads", minimum=1)
        self.num_kv_heads = num_heads if num_kv_heads is None else integer(num_kv_heads, "num_kv_heads", minimum=1)
        self.d_k = head_width(self.d_model, self.num_heads, self.num_kv_heads)
        if rope:
            validate.even_int(self.d_k, "d_k = d_model / num_heads", otherwise="pass rope=False for no positions")
        self.rope = flag(rope, "rope")
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=False)
        self.W_v = nn.Linear(d_model, self.num_kv_heads * self.d_k, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None,
                positions: torch.Tensor | Sequence[int] | None = None) -> tuple[torch.Tensor, KVCache]:
        as_float_tensor(x, "x")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (b, t, d_model={self.d_model}), got {tuple(x.shape)}.")
        b, t_new, _ = x.shape
        q = self.W_q(x).view(b, t_new, self.num_heads, self.d_k).transpose(1, 2)  # (b, h, t_new, d_k)
        k = self.W_k(x).view(b, t_new, self.num_kv_heads, self.d_k).transpose(1, 2)  # (b, g, t_new, d_k)
        v = self.W_v(x).view(b, t_new, self.num_kv_heads, self.d_k).transpose(1, 2)  # (b, g, t_new, d_k)
        if self.rope:
            if positions is None:
                start = 0 if cache is None else len(cache)  # the number of tokens before the new ones
                positions = torch.arange(start, start + t_new)  # (t_new,)
            q, k = rope(q, positions), rope(k, positions)  # rotated before caching: a key's angle never changes
        elif positions is not None:
            raise ValueError("positions were given to a layer built with rope=False, which has no positions to use.")
        cache = KVCache(k, v) if cache is None else cache.extend(k, v)  # (b, g, t, d_k) each
        mask = causal_mask(t_new, len(cache))  # (t_new, t): the new tokens are the last ones
        heads, _ = grouped_query_attention(q, cache.k, cache.v, mask)  # (b, h, t_new, d_k)
        return self.W_o(heads.transpose(1, 2).reshape(b, t_new, self.d_model)), cache

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, rope={self.rope}"


class TinyDecoder(nn.Module):
    """A token embedding, ``n_layers`` residual causal attention layers and a projection to logits (chapter 9).

    ``forward(tokens, caches=None, positions=None)`` takes token ids ``(b, t_new)`` and, optionally, one
    :class:`KVCache` per layer for the tokens before them; returns ``(logits (b, t_new, vocab), caches)``.
    Without caches the tokens are a whole sequence from its start. Positions enter through RoPE in every
    layer (``rope=True``): ``positions`` as in :class:`GroupedQueryAttention`, by default the cache's
    length onwards. No MLP: just enough model to show what caching does.
    """

    def __init__(self, vocab: int, d_model: int, num_heads: int, num_kv_heads: int | None = None,
                 n_layers: int = 2, *, rope: bool = True):
        super().__init__()
        self.vocab = integer(vocab, "vocab", minimum=1)
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(
            GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope=rope)
            for _ in range(integer(n_layers, "n_layers", minimum=1))
        )
        self.out = nn.Linear(d_model, vocab, bias=False)  # one score per token of the vocabulary

    def forward(self, tokens: torch.Tensor, caches: Sequence[KVCache] | None = None,
                positions: torch.Tensor | Sequence[int] | None = None) -> tuple[torch.Tensor, list[KVCache]]:
        token_ids(tokens, self.vocab)
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"pass one cache per layer: {len(self.layers)} layers, {len(caches)} caches.")
        x = self.embed(tokens)  # (b, t_new, d)
        new_caches = []
        for i, layer in enumerate(self.layers):
            out, cache = layer(x, None if caches is None else caches[i], positions)
            x = x + out  # residual
            new_caches.append(cache)
        return self.out(x), new_caches  # (b, t_new, vocab)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, use_cache: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding of ``n_new`` tokens after ``prompt`` ``(b, t)``.

        Returns ``(tokens (b, t + n_new), logits (b, n_new, vocab))``, the logits from which each new
        token was chosen. With ``use_cache=False`` every step recomputes the whole sequence.
        """
        integer(n_new, "n_new", minimum=1)
        tokens, steps = prompt, []
        logits, caches = self(prompt)
        for _ in range(n_new):
            last = logits[:, -1]  # (b, vocab)
            steps.append(last)
            tokens = torch.cat([tokens, last.argmax(-1, keepdim=True)], dim=1)
            if len(steps) == n_new:
                break
            if use_cache:
                logits, caches = self(tokens[:, -1:], caches)  # only the newest token
            else:
                logits, _ = self(tokens)  # the whole sequence again
        return tokens, torch.stack(steps, dim=1)

    def cache_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """Bytes the KV cache grows by per token: 2 · n_layers · g · d_k · bytes per number."""
        layer = self.layers[0]
        return 2 * len(self.layers) * layer.num_kv_heads * layer.d_k * torch.finfo(dtype).bits // 8


def _step_inputs(model: TinyDecoder, t: int, seed: int) -> tuple[torch.Tensor, list[KVCache]]:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(model.vocab, (1, t), generator=gen)
    with torch.no_grad():
        _, caches = model(tokens[:, :-1])  # the cache of the first t - 1 tokens
    return tokens, caches


def decode_flops(model: TinyDecoder, sizes: Sequence[int], seed: int = 0) -> pd.DataFrame:
    """FLOPs for token ``t``'s logits, with a cache of ``t - 1`` tokens and without, for t in ``sizes`` (chapter 9).

    Columns: ``cached`` and ``full`` (everything), ``cached_attention`` and ``full_attention`` (the
    products with keys and values, ``bmm``). Indexed by t. Deterministic (chapter 9).
    """
    rows = []
    for t in sizes_list(sizes, minimum=2, why="a cached step needs at least one earlier token"):
        tokens, caches = _step_inputs(model, t, seed)
        cached = flops_by_operator(model, tokens[:, -1:], caches)
        full = flops_by_operator(model, tokens)
        rows.append({"t": t, "cached": sum(cached.values()), "full": sum(full.values()),
                     "cached_attention": cached.get("bmm", 0), "full_attention": full.get("bmm", 0)})
    return pd.DataFrame(rows).set_index("t")


def decode_times(model: TinyDecoder, sizes: Sequence[int], threads: int = 1, seed: int = 0) -> pd.DataFrame:
    """Seconds to compute token ``t``'s logits with a cache (``cached``) and without (``full``) (chapter 9).

    Best of a few runs on ``threads`` threads, for each t in ``sizes``, read from
    :func:`attn_helpers.cost.default_clock`; the numbers vary from run to run.
    """
    rows = []
    with torch_threads(integer(threads, "threads", minimum=1)), torch.no_grad():
        for t in sizes_list(sizes):
            tokens, caches = _step_inputs(model, t, seed)
            rows.append({"t": t, "cached": time_call(model, tokens[:, -1:], caches, budget=0.1),
                         "full": time_call(model, tokens, budget=0.1)})
    return pd.DataFrame(rows).set_index("t")
