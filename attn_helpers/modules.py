"""Attention as PyTorch modules with learned projections: one head (chapter 4), many heads (chapter 5).

It holds the two ``nn.Module`` classes the later chapters build on, ``SelfAttentionHead`` and
``MultiHeadAttention`` (both also at the top level, ``ah.SelfAttentionHead``).

``SelfAttentionHead`` maps the input to queries, keys and values with three ``nn.Linear`` layers
and calls ``attn_helpers.attention``. ``MultiHeadAttention`` does the same for h heads at once
with one fused projection per role, splits the columns into heads with ``view`` and ``transpose``
(the layout of the ``in_proj_weight`` of ``nn.MultiheadAttention``), and mixes the heads with ``W_o``.
"""

from __future__ import annotations

import torch
from torch import nn

from . import validate
from .attention import attention

__all__ = ["SelfAttentionHead", "MultiHeadAttention"]


class SelfAttentionHead(nn.Module):
    """One attention head with learned projections (chapter 4).

    ``W_q``, ``W_k`` map ``d_model`` features to ``d_k``; ``W_v`` maps them to ``d_v``
    (default ``d_k``). ``forward(x, mask)`` takes ``x`` of shape ``(..., t, d_model)`` and
    returns ``(out, weights)`` of shapes ``(..., t, d_v)`` and ``(..., t, t)``; the scores are
    scaled by ``1/sqrt(d_k)``. ``mask`` is as in ``attn_helpers.attention``.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False):
        super().__init__()
        self.d_model = validate.integer(d_model, "d_model", minimum=1)
        self.d_k = validate.integer(d_k, "d_k", minimum=1)
        self.d_v = self.d_k if d_v is None else validate.integer(d_v, "d_v", minimum=1)
        self.W_q = nn.Linear(d_model, self.d_k, bias=bias)
        self.W_k = nn.Linear(d_model, self.d_k, bias=bias)
        self.W_v = nn.Linear(d_model, self.d_v, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        validate.head_inputs(self, x, mask)  # a clear error for any bad input
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # (..., t, d_k), (..., t, d_k), (..., t, d_v)
        return attention(q, k, v, mask)  # (..., t, d_v), (..., t, t)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}"


class MultiHeadAttention(nn.Module):
    """h attention heads computed together, with one fused projection per role (chapter 5).

    ``d_k = d_model // num_heads``; head ``i`` uses rows ``i*d_k:(i+1)*d_k`` of ``W_q``, ``W_k``
    and ``W_v``'s weights, as ``nn.MultiheadAttention`` lays out ``in_proj_weight``. ``W_o``
    mixes the concatenated heads. ``forward(query, key=None, value=None, mask=None)`` takes
    ``(t, d_model)`` or ``(b, t, d_model)`` tensors (``key`` defaults to ``query`` and ``value``
    to ``key``) and returns ``out`` ``(b, t_q, d_model)`` and ``weights`` ``(b, h, t_q, t_k)``
    (without the ``b`` for 2-D input). ``mask`` (bool, True = may attend, or additive float)
    must broadcast to the weights' shape.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = False):
        super().__init__()
        self.d_model = validate.integer(d_model, "d_model", minimum=1)
        self.num_heads = validate.integer(num_heads, "num_heads", minimum=1)
        self.d_k = validate.head_width(self.d_model, self.num_heads)
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.d_k).transpose(1, 2)  # (b, h, t, d_k)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key = query if key is None else key
        value = key if value is None else value
        _multi_head_inputs(self, query, key, value, mask)  # a clear error for any bad input
        unbatched = query.dim() == 2
        if unbatched:  # (t, d_model) -> (1, t, d_model)
            query, key, value = query[None], key[None], value[None]
        b, t_q, _ = query.shape
        q = self._split(self.W_q(query))  # (b, h, t_q, d_k)
        k = self._split(self.W_k(key))  # (b, h, t_k, d_k)
        v = self._split(self.W_v(value))  # (b, h, t_k, d_k)
        heads, weights = attention(q, k, v, mask)  # (b, h, t_q, d_k), (b, h, t_q, t_k)
        merged = heads.transpose(1, 2).contiguous().view(b, t_q, self.d_model)  # (b, t_q, h·d_k)
        out = self.W_o(merged)  # (b, t_q, d_model)
        return (out[0], weights[0]) if unbatched else (out, weights)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_k={self.d_k}"


def _multi_head_inputs(mha: MultiHeadAttention, query: object, key: object, value: object, mask: object) -> None:
    """The checks of ``MultiHeadAttention.forward``: ``(t, d_model)`` or ``(b, t, d_model)`` inputs, one mask."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        validate.as_float_tensor(x, name)
        if x.dim() not in (2, 3):
            raise ValueError(
                f"{name} must have shape (t, d_model) or (b, t, d_model), got {tuple(x.shape)}. "
                f"Add a batch dimension with x.unsqueeze(0), or flatten extra leading dimensions."
            )
        validate.module_input(x, name, mha.d_model, mha.W_q.weight.dtype)
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
    validate.key_value_tokens(key, value, "key", "value")
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
    validate.module_mask(mask, (b_q, mha.num_heads, query.shape[-2], key.shape[-2]))
