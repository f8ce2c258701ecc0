"""Attention as PyTorch modules with learned projections: one head (chapter 4), many heads (chapter 5).

``SelfAttentionHead`` maps the input to queries, keys and values with three ``nn.Linear`` layers
and calls ``attn_helpers.attention``. ``MultiHeadAttention`` does the same for h heads at once
with one fused projection per role, splits the columns into heads with ``view`` and ``transpose``
(the layout of the ``in_proj_weight`` of ``nn.MultiheadAttention``), and mixes the heads with ``W_o``.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import attention
from .validate import as_float_tensor


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def _check_features(x: torch.Tensor, name: str, d_model: int) -> None:
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has {x.shape[-1]} features (shape {tuple(x.shape)}) but the module was built "
            f"with d_model={d_model}: the last dimension must be d_model. Build the module with "
            f"d_model={x.shape[-1]}, or check that you did not pass a transposed tensor."
        )


def _check_mask(mask: torch.Tensor | None, scores_shape: tuple[int, ...]) -> None:
    """The mask must broadcast to the scores without making them bigger (which would add a batch)."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    fits = mask.dim() <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape), strict=False)
    )
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention weights' shape "
            f"{tuple(scores_shape)}. Use a (t_q, t_k) = {tuple(scores_shape[-2:])} mask for every "
            f"sequence, or give it size-1 dimensions where it is shared, e.g. mask[:, None] for one "
            f"(t_q, t_k) mask per sequence of a batch."
        )


class SelfAttentionHead(nn.Module):
    """One attention head with learned projections (chapter 4).

    ``W_q``, ``W_k`` map ``d_model`` features to ``d_k``; ``W_v`` maps them to ``d_v``
    (default ``d_k``). ``forward(x, mask)`` takes ``x`` of shape ``(..., t, d_model)`` and
    returns ``(out, weights)`` of shapes ``(..., t, d_v)`` and ``(..., t, t)``; the scores are
    scaled by ``1/sqrt(d_k)``. ``mask`` is as in ``attn_helpers.attention``.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False):
        super().__init__()
        self.d_model = _positive_int(d_model, "d_model")
        self.d_k = _positive_int(d_k, "d_k")
        self.d_v = self.d_k if d_v is None else _positive_int(d_v, "d_v")
        self.W_q = nn.Linear(d_model, self.d_k, bias=bias)
        self.W_k = nn.Linear(d_model, self.d_k, bias=bias)
        self.W_v = nn.Linear(d_model, self.d_v, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        as_float_tensor(x, "x", min_dim=2)
        _check_features(x, "x", self.d_model)
        t = x.shape[-2]
        _check_mask(mask, (*x.shape[:-2], t, t))
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
        self.d_model = _positive_int(d_model, "d_model")
        self.num_heads = _positive_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ValueError(
                f"num_heads={num_heads} does not divide d_model={d_model}: each head gets "
                f"d_k = d_model / num_heads features, which must be a whole number. Pick num_heads "
                f"from the divisors of {d_model}, e.g. "
                f"{[h for h in range(1, d_model + 1) if d_model % h == 0][:6]}."
            )
        self.d_k = d_model // num_heads
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
        for name, x in (("query", query), ("key", key), ("value", value)):
            as_float_tensor(x, name)
            if x.dim() not in (2, 3):
                raise ValueError(
                    f"{name} must have shape (t, d_model) or (b, t, d_model), got {tuple(x.shape)}. "
                    f"Add a batch dimension with x.unsqueeze(0), or flatten extra leading dimensions."
                )
            _check_features(x, name, self.d_model)
        if not query.dim() == key.dim() == value.dim():
            raise ValueError(
                f"query, key and value must all be batched (3-D) or all unbatched (2-D); got shapes "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}."
            )
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(
                f"query, key and value hold different numbers of sequences (batch sizes "
                f"{query.shape[0]}, {key.shape[0]}, {value.shape[0]}); they must be equal."
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key has {key.shape[1]} tokens but value has {value.shape[1]}: every key needs "
                f"exactly one value."
            )
        b, t_q, t_k = query.shape[0], query.shape[1], key.shape[1]
        if mask is not None:
            if unbatched and isinstance(mask, torch.Tensor) and mask.dim() == 4:
                raise ValueError(
                    f"a 4-D mask {tuple(mask.shape)} needs batched (b, t, d_model) input; "
                    f"for a single sequence use a (t_q, t_k) or (h, t_q, t_k) mask."
                )
            if (not unbatched and isinstance(mask, torch.Tensor) and mask.dim() == 3
                    and mask.shape[0] != 1):
                raise ValueError(
                    f"a 3-D mask {tuple(mask.shape)} is ambiguous for batched input: the weights "
                    f"have shape (b, h, t_q, t_k). Write mask[:, None] for one mask per sequence "
                    f"(b, 1, t_q, t_k) or mask[None] for one per head (1, h, t_q, t_k)."
                )
            _check_mask(mask, (b, self.num_heads, t_q, t_k))
        q = self._split(self.W_q(query))  # (b, h, t_q, d_k)
        k = self._split(self.W_k(key))  # (b, h, t_k, d_k)
        v = self._split(self.W_v(value))  # (b, h, t_k, d_k)
        heads, weights = attention(q, k, v, mask)  # (b, h, t_q, d_k), (b, h, t_q, t_k)
        merged = heads.transpose(1, 2).contiguous().view(b, t_q, self.d_model)  # (b, t_q, h·d_k)
        out = self.W_o(merged)  # (b, t_q, d_model)
        if unbatched:
            return out[0], weights[0]
        return out, weights

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_k={self.d_k}"
