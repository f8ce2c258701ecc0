"""Self-checks for chapter 6's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ..attention import attention
from ..cost import TensorMemoryTracker
from . import CheckFailed, check_tensor

# Exercise ex-ch06-predict: the shapes of the query, key and value tensors.
PREDICT_Q, PREDICT_K, PREDICT_V = (2, 1, 5, 8), (4, 7, 8), (4, 7, 6)


def broadcast_shape(answer: object) -> None:
    """Exercise ex-ch06-predict: the output shape of attention(Q, K, V) for the shapes above."""
    expected = (2, 4, 5, 6)
    if isinstance(answer, torch.Tensor):
        raise CheckFailed("out_shape should be the shape (a tuple or torch.Size), not the output tensor: use .shape.")
    try:
        shape = tuple(int(n) for n in answer)  # type: ignore[union-attr]
    except TypeError:
        raise CheckFailed(f"out_shape should be a tuple of ints such as (1, 2, 3), got {answer!r}.") from None
    mistakes = {
        (2, 4, 5, 8): "the last dimension of the output comes from the values (d_v = 6), not from the queries.",
        (2, 4, 7, 6): "there is one output row per query, so the second-to-last size is t_q = 5, not t_k = 7.",
        (2, 1, 5, 6): "a size-1 leading dimension stretches to match the other tensor: 1 against 4 gives 4.",
        (4, 2, 5, 6): "broadcasting lines the leading dimensions up from the right: (2, 1) against (4,) gives (2, 4).",
        (2, 4, 5, 7): "the output has one column per value feature (d_v = 6); t_k = 7 is the size of the weights' last axis.",
    }
    if shape in mistakes:
        raise CheckFailed(f"out_shape {shape} is not right yet. Hint: {mistakes[shape]}")
    if shape != expected:
        raise CheckFailed(
            f"out_shape {shape} is not right. Hint: leading dimensions broadcast right-aligned, then "
            f"(t_q, d_k) @ (d_k, t_k) @ (t_k, d_v) gives (t_q, d_v)."
        )
    print(f"✓ out_shape {shape}: correct")


def projection_matrices() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch06-load: W_q, W_k, W_v, W_o, each (6, 6), as ``nn.Linear`` stores weights (out, in)."""
    gen = torch.Generator().manual_seed(606)
    return tuple(torch.randn(6, 6, generator=gen) / 3 for _ in range(4))


def _load_input() -> torch.Tensor:
    gen = torch.Generator().manual_seed(607)
    return torch.randn(2, 5, 6, generator=gen)  # (b, t, d)


def loaded_mha(mha: object) -> None:
    """Exercise ex-ch06-load: an ``nn.MultiheadAttention(6, 2, bias=False, batch_first=True)`` holding the matrices."""
    if not isinstance(mha, nn.MultiheadAttention):
        raise CheckFailed(f"mha_loaded should be a torch.nn.MultiheadAttention, got {type(mha).__name__}.")
    if mha.embed_dim != 6 or mha.num_heads != 2:
        raise CheckFailed(
            f"mha_loaded has embed_dim={mha.embed_dim}, num_heads={mha.num_heads}; build it with "
            f"nn.MultiheadAttention(6, 2, bias=False, batch_first=True)."
        )
    if mha.in_proj_bias is not None:
        raise CheckFailed("mha_loaded has biases, which the matrices do not provide: pass bias=False.")
    if not mha.batch_first:
        raise CheckFailed("mha_loaded expects (t, b, d) input: pass batch_first=True so it takes (b, t, d).")
    W_q, W_k, W_v, W_o = projection_matrices()
    expected = torch.cat([W_q, W_k, W_v])  # (3d, d)
    check_tensor(mha.in_proj_weight.detach(), expected, "in_proj_weight", {
        "each block is transposed: nn.MultiheadAttention stores weights as (out, in) like nn.Linear, "
        "so copy W_q itself, not W_q.T.": torch.cat([W_q.T, W_k.T, W_v.T]),
        "the blocks are in the wrong order: queries come first, then keys, then values.": torch.cat([W_k, W_q, W_v]),
        "the blocks are in the wrong order: keys go in rows d:2d and values in rows 2d:3d.": torch.cat([W_q, W_v, W_k]),
    })
    check_tensor(mha.out_proj.weight.detach(), W_o, "out_proj.weight", {
        "out_proj.weight is transposed: copy W_o itself, not W_o.T.": W_o.T,
    })
    x = _load_input()
    with torch.no_grad():
        out, _ = mha(x, x, x)
    q, k, v = (x @ W.T for W in (W_q, W_k, W_v))  # (b, t, d)
    heads = [attention(q[..., i:i + 3], k[..., i:i + 3], v[..., i:i + 3])[0] for i in (0, 3)]
    check_tensor(out, torch.cat(heads, dim=-1) @ W_o.T, "the module's output")


def _blockwise_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(608)
    q = torch.randn(10, 8, generator=gen) * 2
    k = torch.randn(10, 8, generator=gen) * 2
    v = torch.randn(10, 4, generator=gen)
    return q, k, v


def _blockwise_without_rescale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int) -> torch.Tensor:
    """The usual mistake: earlier blocks are never rescaled when the running maximum grows."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    total = torch.zeros(q.shape[0], 1)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m)
        total = total + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v[start:start + block]
    return acc / total


def _unnormalised_factor(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    s = q @ k.T / math.sqrt(q.shape[-1])  # (t_q, t_k)
    return torch.exp(torch.logsumexp(s, -1, keepdim=True) - s.amax(-1, keepdim=True))  # Σ exp(s - max)


def blockwise_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch06-blockwise: ``fn(q, k, v, block)`` equals attention's output without a t_q × t_k tensor."""
    q, k, v = _blockwise_data()
    expected = attention(q, k, v)[0]  # (10, 4)
    for block in (4, 10):
        with torch.no_grad(), TensorMemoryTracker() as tracker:
            answer = fn(q.clone(), k.clone(), v.clone(), block)
        if isinstance(answer, tuple):
            raise CheckFailed("blockwise_attention should return only the output tensor (t_q, d_v), not a tuple.")
        check_tensor(answer, expected, f"output with block={block}", {
            "the scores are not scaled: multiply q kᵀ by 1/√d_k, as attention does.": attention(q, k, v, scale=1.0)[0],
            "when the running maximum grows, rescale the running sum and the running output by "
            "exp(old max − new max) before adding the new block.": _blockwise_without_rescale(q, k, v, block),
            "divide the accumulated output by the running sum at the end.":
                expected * _unnormalised_factor(q, k),
        })
        if block < q.shape[0] and tracker.largest >= 4 * q.shape[0] * k.shape[0]:
            raise CheckFailed(
                "the result is right, but the function builds a full t_q × t_k tensor. Hint: compute the "
                "scores of one block of keys at a time, q @ k[start:start + block].T."
            )
