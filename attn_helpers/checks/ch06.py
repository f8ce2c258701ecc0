"""Self-checks for the exercises of chapter 6 (chapter 6; see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .. import validate
from ..attention import attention
from ..cost import TensorMemoryTracker
from . import CheckFailed, Watch, book_attention, call, check_tensor, correct, listed, on_other_sizes

__all__ = [
    "EXTREME_SCORES", "PREDICT_K", "PREDICT_Q", "PREDICT_V", "blockwise_function", "broadcast_shape",
    "loaded_mha", "projection_matrices",
]

# Exercise ex-ch06-predict: the shapes of the query, key and value tensors.
PREDICT_Q, PREDICT_K, PREDICT_V = (2, 1, 5, 8), (4, 7, 8), (4, 7, 6)


def broadcast_shape(answer: object) -> None:
    """Exercise ex-ch06-predict: the output shape of attention(Q, K, V) for the shapes above."""
    expected = (2, 4, 5, 6)
    if isinstance(answer, torch.Tensor) and answer.dim() == 1 and not torch.is_floating_point(answer):
        raise CheckFailed(f"out_shape should be a tuple such as (1, 2, 3), not a tensor of sizes: convert it with "
                          f"tuple(out_shape.tolist()), got {answer!r}.")
    if isinstance(answer, torch.Tensor):
        raise CheckFailed("out_shape should be the shape (a tuple or torch.Size), not the output tensor: use .shape.")
    try:
        shape = tuple(answer)  # type: ignore[arg-type]
    except TypeError:
        shape = None
    if isinstance(answer, (set, frozenset, dict)):
        raise CheckFailed(f"out_shape should be a tuple such as (1, 2, 3): a {type(answer).__name__} has no order "
                          f"(and a set no repeated sizes), got {answer!r}.")
    if isinstance(answer, str) or shape is None or any(validate.whole_number(n) is None for n in shape):
        raise CheckFailed(f"out_shape should be a tuple of ints such as (1, 2, 3), got {answer!r}.")
    shape = tuple(validate.whole_number(n) for n in shape)
    mistakes = {
        (2, 4, 5, 8): "the last dimension of the output comes from the values, not from the queries.",
        (2, 4, 7, 6): "there is one output row per query, not one per key.",
        (2, 1, 5, 6): "a size-1 leading dimension stretches to match the other tensor's size there.",
        (4, 2, 5, 6): "broadcasting lines the leading dimensions up from the right, not from the left.",
        (2, 4, 5, 7): "the output has one column per value feature; t_k is the size of the weights' last axis.",
    }
    if shape in mistakes:
        raise CheckFailed(f"out_shape {shape} is not right yet. Hint: {mistakes[shape]}")
    if shape != expected:
        raise CheckFailed(
            f"out_shape {shape} is not right. Hint: leading dimensions broadcast right-aligned, then "
            f"(t_q, d_k) @ (d_k, t_k) @ (t_k, d_v) gives (t_q, d_v)."
        )
    correct("out_shape")


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
            f"mha_loaded has embed_dim={mha.embed_dim}, num_heads={mha.num_heads}; build it as the exercise says: "
            f"width 6, 2 heads, no biases, batch first."
        )
    if mha.in_proj_bias is not None:
        raise CheckFailed("mha_loaded has biases, which the matrices do not provide: pass bias=False.")
    if not mha.batch_first:
        raise CheckFailed("mha_loaded expects (t, b, d) input: make it batch first, so that it takes (b, t, d).")
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
        x_in = x.to(mha.in_proj_weight.dtype)  # a module built in float64 is fine too
        out, _ = mha(x_in, x_in, x_in)
    q, k, v = (x @ W.T for W in (W_q, W_k, W_v))  # (b, t, d)
    heads = [attention(q[..., i:i + 3], k[..., i:i + 3], v[..., i:i + 3])[0] for i in (0, 3)]
    check_tensor(out, torch.cat(heads, dim=-1) @ W_o.T, "the module's output")


def _blockwise_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(608)
    q = torch.randn(6, 8, generator=gen) * 2  # (t_q, d_k); t_q, t_k, d_k, d_v all differ,
    k = torch.randn(10, 8, generator=gen) * 2  # (t_k, d_k)  so a tensor's shape tells what it holds
    v = torch.randn(10, 5, generator=gen)  # (t_k, d_v)
    return q, k, v


# Scores near ±1000 that are exact in float32 (q = 4 e_i and 1/√d_k = 1/4, so s[i, j] = k[j, i]):
# each row's maximum sits in a different block, far from the others, so exp overflows (inf) or
# underflows (0/0) unless each query keeps its own running maximum and rescales when it grows.
EXTREME_SCORES = torch.tensor([
    [1, 0, -1, 2, 300, 298, 299, 301, 1000, 999, 997, 998.5, 500],  # maximum in the third block
    [40, 38, 39, 40, -900, -950, -1000, -800, 10, 35, 39.5, 20, 38],  # maximum in the first block
    [-1000, -999, -998, -1001, -500, -400, -450, -300, -700, -600, -650, -350, -299],  # all far below 0
])  # (t_q, t_k) = (3, 13)


def _extreme_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(609)
    t_q, t_k = EXTREME_SCORES.shape
    q = torch.randint(-3, 4, (t_q, 16), generator=gen).float()  # (t_q, d_k = 16)
    q[:, :t_q] = 4 * torch.eye(t_q)  # the other columns meet zeros in k
    k = torch.cat([EXTREME_SCORES.T, torch.zeros(t_k, 16 - t_q)], dim=1)  # (t_k, d_k)
    v = torch.randn(t_k, 5, generator=gen)  # (t_k, d_v)
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


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


_PRODUCTS = {"mm", "bmm", "addmm", "baddbmm", "mv", "addmv", "dot", "vdot"}  # (…, a, c) @ (…, c, b), c summed
_SUMS = {"sum", "mean", "nansum"}


def _scored_pairs(watch: Watch, d_k: int) -> int:
    """How many (query, key) scores the operators computed, whatever their shapes: every number made by a product
    that sums over d_k (a matrix, matrix-vector or dot product: a block of queries, one query or one pair), or by
    a sum over d_k of a broadcast product ((q[:, None] * k_b).sum(-1)). Nothing else in attention sums over d_k
    (the check's d_k differs from every block's size, so p @ v_b, a sum over keys, is not counted)."""
    count = 0
    for op in watch.ops:
        if not op.outputs:
            continue
        made = math.prod(op.outputs[0])
        if op.name in _PRODUCTS and len(op.inputs) >= 2 and op.inputs[-2] and op.inputs[-2][-1] == d_k:
            count += made  # the left factor's last dimension is the one summed over
        elif op.name in _SUMS and op.inputs and sorted(_squeezed(op.inputs[0])) == sorted(
                (*_squeezed(op.outputs[0]), d_k)):
            count += made
    return count


def _rows_of_scores(shapes: set[tuple[int, ...]], t_q: int, t_k: int, d_k: int, d_v: int) -> bool:
    """True if a tensor held the scores of one or a few queries against every key: (t_k,), or (n, t_k) for
    n < t_q (either way round), n differing from the feature sizes (k.T is (d_k, t_k))."""
    few = set(range(2, t_q)) - {d_k, d_v}
    return (t_k,) in shapes or any((n, t_k) in shapes or (t_k, n) in shapes for n in few)


def _run_blockwise(fn: Callable[..., torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   block: int) -> object:
    """``fn(q, k, v, block)``, refused if it calls attention for you, holds more than a block of scores,
    overflows, or scores the keys more than once."""
    (t_q, d_k), t_k = q.shape, k.shape[0]
    args = q.clone(), k.clone(), v.clone()
    with torch.no_grad(), Watch(book_attention()) as watch:
        answer = call(fn, *args, block, name="blockwise_attention")
    if isinstance(answer, tuple):
        raise CheckFailed("blockwise_attention should return only the output tensor (t_q, d_v), not a tuple.")
    if watch.called or watch.used_fused_attention():
        called = listed(sorted(watch.called)) or "F.scaled_dot_product_attention"
        raise CheckFailed(
            f"blockwise_attention calls {called}, which computes the softmax (or its running form) for you. "
            "Hint: compute one block of scores at a time and update the running maximum, sum and output yourself."
        )
    if block < t_k:
        shapes = {_squeezed(o) for op in watch.ops for o in op.outputs}
        if {(t_q, t_k), (t_k, t_q)} & shapes:
            raise CheckFailed(
                "the function builds a full t_q × t_k tensor. Hint: compute the scores of one block of "
                "keys at a time (a slice of k's rows), never of all the keys at once."
            )
        if _rows_of_scores(shapes, t_q, t_k, d_k, v.shape[-1]):
            raise CheckFailed(
                "the function builds full rows of t_k scores (one query, or a few, against every key, for "
                "example a softmax row by row). Hint: loop over blocks of keys and keep a running maximum, sum "
                "and output per query, so that only a block of scores exists at a time."
            )
    if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and not torch.isfinite(answer).all():
        raise CheckFailed(
            "the output contains NaN or inf (this test's scores reach ±1000). Hint: exp(1000) overflows and "
            "exp(-1000) is 0, so each query must subtract its own maximum so far, updated block by block, and "
            "rescale the running sum and output by exp(old max − new max) when it grows."
        )
    # every (query, key) pair once, plus one block more: scoring the first block again to start the running maximum
    # is fine, as long as no key is scored twice over (a first pass for the maximum), by whole blocks or query by query
    if _scored_pairs(watch, d_k) > t_q * (t_k + min(block, t_k)):
        raise CheckFailed(
            "the function computes each block's scores more than once (for example a first pass over all "
            "blocks for the maximum, then a second). Hint: make one pass that updates the running maximum "
            "and rescales the running sum and output whenever it grows."
        )
    return answer


def _mistakes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int) -> dict[str, torch.Tensor]:
    return {
        "the scores are not scaled: multiply q kᵀ by 1/√d_k, as attention does.": attention(q, k, v, scale=1.0)[0],
        "when the running maximum grows, rescale the running sum and the running output by "
        "exp(old max − new max) before adding the new block.": _blockwise_without_rescale(q, k, v, block),
        "divide the accumulated output by the running sum at the end.":
            attention(q, k, v)[0] * _unnormalised_factor(q, k),
    }


_PEAK_QUERIES, _PEAK_D = 64, 4  # the memory test's queries: more of them than features, so scores outweigh keys


def _peak_bytes(fn: Callable[..., torch.Tensor], t_k: int) -> int:
    """Most bytes of new tensors alive at once while ``fn`` runs 64 queries on ``t_k`` keys in blocks of 4."""
    gen = torch.Generator().manual_seed(610)
    q, k, v = (torch.randn(t, _PEAK_D, generator=gen) for t in (_PEAK_QUERIES, t_k, t_k))
    with on_other_sizes("blockwise_attention", f"{_PEAK_QUERIES} queries and {t_k} keys of {_PEAK_D} features, "
                        "block 4", "take every size from q, k and v, not from numbers."), \
            torch.no_grad(), TensorMemoryTracker() as tracker:
        answer = call(fn, q, k, v, 4, name="blockwise_attention")
    del answer
    return tracker.peak


def blockwise_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch06-blockwise: ``fn(q, k, v, block)`` equals attention's output, computed in one pass
    over blocks of keys with a running maximum (online softmax), one block of scores at a time."""
    q, k, v = _extreme_data()  # first, so that an overflow is named before anything else
    check_tensor(_run_blockwise(fn, q, k, v, 4), attention(q, k, v)[0], "output with scores near ±1000",
                 _mistakes(q, k, v, 4))
    q, k, v = _blockwise_data()
    for block in (4, k.shape[0]):
        check_tensor(_run_blockwise(fn, q, k, v, block), attention(q, k, v)[0], f"output with block={block}",
                     _mistakes(q, k, v, block))
    # Holding one block at a time, the memory the function needs grows with the number of keys only as much as
    # a copy of the keys and values does (converted to float64, say); keeping every block's scores (or every
    # block's result) until the end makes it grow by t_q floats per key: 76,800 bytes for 300 more keys.
    short, long = _peak_bytes(fn, 100), _peak_bytes(fn, 400)
    if long - short > _PEAK_QUERIES * 300 * 4 / 2:
        raise CheckFailed(
            f"the output is right, but the memory the function holds grows with the number of keys ({short} bytes "
            f"of tensors at once for 100 keys, {long} for 400): it keeps every block's scores or results until "
            "the end. Hint: fold each block into the running maximum, sum and output as it comes, then let it go."
        )
