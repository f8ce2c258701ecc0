"""Self-checks for the exercises of chapter 5 (chapter 5; see ``attn_helpers.checks``)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import torch

from .. import validate
from ..modules import MultiHeadAttention, SelfAttentionHead
from . import CheckFailed, book_attention, call, check_tensor, check_value, on_other_sizes, run_by_hand, torch_attention

__all__ = [
    "transpose_strides",
    "parameter_counts",
    "split_and_merge",
    "exercise_mha",
    "exercise_batch",
    "multi_head_function",
    "look_back_distance",
]


def _as_float(strides: object, name: str) -> torch.Tensor:
    """``strides`` as a float tensor, if it is a tuple (or list) of integers: Python's, NumPy's or 0-d integer
    tensors, anything ``operator.index`` takes, but not bools (True is 1 to Python) nor floats."""
    wanted = f"{name} should be a tuple of integers, like the one x.stride() returns"
    if not isinstance(strides, (tuple, list)):
        raise CheckFailed(f"{wanted}, got {type(strides).__name__}.")
    for s in strides:
        if validate.whole_number(s) is not None:
            continue
        if isinstance(s, (bool, np.bool_)) or getattr(s, "dtype", None) in (torch.bool, np.dtype(bool)):
            raise CheckFailed(f"{wanted}, and it holds the bool {s!r}. Hint: a stride counts elements; write each "
                              "one as a whole number.")
        whole = isinstance(s, float | np.floating) or isinstance(s, torch.Tensor) and s.is_floating_point()
        raise CheckFailed(f"{wanted}, and it holds {s!r}, a {type(s).__name__}. Hint: " + (
            "a stride counts elements, a whole number: write it without a decimal point (7, not 7.0)."
            if whole else "write each stride as a whole number."))
    return torch.tensor([validate.whole_number(s) for s in strides], dtype=torch.float32)


def transpose_strides(strides_t: tuple[int, ...], strides_c: tuple[int, ...]) -> None:
    """Exercise ex-ch05-strides: x = torch.zeros(2, 5, 3, 4); strides of x.transpose(1, 2) and of its .contiguous()."""
    check_tensor(_as_float(strides_t, "strides_t"), torch.tensor([60.0, 4, 12, 1]), "strides_t", {
        "these are the strides of x itself; transpose swaps the strides of dimensions 1 and 2.":
            torch.tensor([60.0, 12, 4, 1]),
        "these are the strides of the copy; transpose moves no data, it only swaps two strides.":
            torch.tensor([60.0, 20, 4, 1]),
    })
    check_tensor(_as_float(strides_c, "strides_c"), torch.tensor([60.0, 20, 4, 1]), "strides_c", {
        "making it contiguous copies the data into row-major order, so the strides change: recompute them "
        "for the new shape (2, 3, 5, 4).": torch.tensor([60.0, 4, 12, 1]),
        "these are the strides of the original shape (2, 5, 3, 4); the copy has shape (2, 3, 5, 4).":
            torch.tensor([60.0, 12, 4, 1]),
    })


def parameter_counts(n_split: int, n_full: int) -> None:
    """Exercise ex-ch05-params: parameters of d_model=64, h=8 with split heads and with full-width heads (no bias)."""
    d, h = 64, 8
    check_value(n_split, 4 * d * d, "n_split", {
        "you left out the output projection W_o: it adds another d_model² weights.": 3 * d * d,
        "splitting does not shrink the total: the h heads of width d/h together are d_model wide, so "
        "each of W_q, W_k, W_v, W_o stays d_model × d_model.": 4 * d * d / h,
        "that is the full-width count; split heads have d_k = d_model / h = 8.": 4 * h * d * d,
    }, atol=0, rtol=0)
    check_value(n_full, 4 * h * d * d, "n_full", {
        "W_o of full-width heads maps h·d_model = 512 features back to d_model: it has h·d_model² weights, "
        "not d_model².": 3 * h * d * d + d * d,
        "you left out the output projection W_o (h·d_model → d_model).": 3 * h * d * d,
        "that is the split-head count; full-width heads are each d_model = 64 wide.": 4 * d * d,
    }, atol=0, rtol=0)


def _split_input() -> torch.Tensor:
    """The first input of ex-ch05-split, at the chapter's own sizes b, t, h, d_k = 2, 6, 3, 4: a function that
    takes them from the notebook passes here and fails, with that cause named, on the other sizes."""
    return torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(501))  # (b, t, h·d_k), h = 3


def _view_hint(error: BaseException) -> str | None:
    """The hint for view's refusal to merge dimensions that transpose left out of reading order."""
    if isinstance(error, RuntimeError) and "view" in str(error):
        return ("after the transpose the memory is no longer in reading order, so view cannot merge the last two "
                "dimensions: make a contiguous copy first, or use reshape, which copies when it must.")
    return None


def split_and_merge(split_heads: Callable, merge_heads: Callable) -> None:
    """Exercise ex-ch05-split: split_heads(x, h) (b, t, h·d_k) -> (b, h, t, d_k); merge_heads the inverse."""
    x, h = _split_input(), 3
    b, t, hk = x.shape
    expected = x.view(b, t, h, hk // h).transpose(1, 2)  # (b, h, t, d_k)
    split = call(split_heads, x.clone(), h, name="split_heads", given="x of shape (2, 6, 12) with h = 3")
    check_tensor(split, expected, "split_heads(x, 3)", {
        "you viewed (b, t, h·d_k) straight as (b, h, t, d_k): view to (b, t, h, d_k) first, then swap the token "
        "and head dimensions.":
            x.reshape(b, h, t, hk // h),
        "the features are split in the wrong order: head i takes the consecutive columns i·d_k:(i+1)·d_k, "
        "so view as (b, t, h, d_k), not (b, t, d_k, h).": x.view(b, t, hk // h, h).permute(0, 3, 1, 2),
        "you forgot the transpose: the result should be (b, h, t, d_k) with heads before tokens.":
            x.view(b, t, h, hk // h),
    })
    other = 4  # the same features split into another number of heads: h must come from the argument
    with on_other_sizes("split_heads", f"the same x with h = {other}", "take d_k from x and h: x.shape[-1] // h."):
        check_tensor(call(split_heads, x.clone(), other, name="split_heads"),
                     x.view(b, t, other, hk // other).transpose(1, 2), f"split_heads(x, {other})", {
            f"the result does not depend on h: with h={other} each head gets {hk // other} features.": expected,
        })
    # what attention returns, and so what merge_heads gets in a model: a contiguous (b, h, t, d_k) tensor
    heads = expected.contiguous()
    merged = call(merge_heads, heads.clone(), name="merge_heads",
                  given="a contiguous (b, h, t, d_k) tensor, which is what attention returns", hint=_view_hint)
    check_tensor(merged, x, "merge_heads(split)", {
        "you reshaped (b, h, t, d_k) straight to (b, t, h·d_k): swap the head and token dimensions first, so "
        "the heads of one token sit next to each other.": expected.reshape(b, t, hk),
        "the heads are concatenated in the wrong order: the features of head 0 come first, then head 1, ….":
            expected.permute(0, 2, 3, 1).reshape(b, t, hk),
    })
    x2 = torch.randn(3, 4, 10, generator=torch.Generator().manual_seed(502))  # other sizes: (b, t, h·d_k), h = 5
    split2 = x2.view(3, 4, 5, 2).transpose(1, 2)  # (b, h, t, d_k)
    with on_other_sizes("split_heads or merge_heads", "a (3, 4, 10) tensor with h = 5",
                        "take b, t and h·d_k from the tensor's shape, and d_k = h·d_k // h."):
        check_tensor(call(split_heads, x2.clone(), 5, name="split_heads"), split2,
                     "split_heads on a (3, 4, 10) tensor with h = 5")
        check_tensor(call(merge_heads, split2.contiguous(), name="merge_heads"), x2,
                     "merge_heads on its (3, 5, 4, 2) split")


def _seeded_mha(d_model: int, num_heads: int, seed: int) -> MultiHeadAttention:
    gen = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model, num_heads)
    with torch.no_grad():
        for lin in (mha.W_q, mha.W_k, mha.W_v, mha.W_o):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) / math.sqrt(d_model) * 2)
    return mha


def exercise_mha() -> MultiHeadAttention:
    """The module of exercise ex-ch05-forward: MultiHeadAttention(12, 3), seeded weights."""
    return _seeded_mha(12, 3, seed=502)


def exercise_batch() -> torch.Tensor:
    """The input of exercise ex-ch05-forward: (b, t, d_model) = (2, 5, 12)."""
    return torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(503))


def _forbidden() -> dict[Callable, str]:
    return {MultiHeadAttention.forward: "the module's forward (mha(x), mha.forward(x), or a module with the same "
                                        "weights)",
            MultiHeadAttention._split: "the module's own _split",
            SelfAttentionHead.forward: "ah.SelfAttentionHead", **book_attention(), **torch_attention()}


def _run_multi_head_function(fn: Callable, mha: MultiHeadAttention,
                             x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn(mha, x)`` on a copy of the module (what fn does to it cannot change the check's), watched."""
    return run_by_hand(fn, (copy.deepcopy(mha), x.clone()), _forbidden(), "multi_head_by_hand",
                       "use the module's layers W_q, W_k, W_v and W_o, matrix products, torch.softmax and reshaping "
                       "of your own; call the module only afterwards, to compare.", "the module")


def _reference(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The right weights and output, and what the usual mistakes give instead."""
    b, t, d = x.shape
    h, dk = mha.num_heads, d // mha.num_heads
    with torch.no_grad():
        q, k, v = (lin(x) for lin in (mha.W_q, mha.W_k, mha.W_v))  # (b, t, d)

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, h, dk).transpose(1, 2)  # (b, h, t, d_k)

        raw = split(q) @ split(k).transpose(-2, -1)  # (b, h, t, t)
        w = torch.softmax(raw / math.sqrt(dk), dim=-1)
        no_transpose = [y.reshape(b, h, t, dk) for y in (q, k, v)]
        heads_last = [y.view(b, t, dk, h).permute(0, 3, 1, 2) for y in (q, k)]  # (b, h, t, d_k), wrongly cut
        heads = w @ split(v)  # (b, h, t, d_k)
        merged = heads.transpose(1, 2).reshape(b, t, d)
        return {
            "weights": w, "out": mha.W_o(merged), "merged": merged, "raw": raw,
            "w_no_transpose": torch.softmax(no_transpose[0] @ no_transpose[1].transpose(-2, -1) / math.sqrt(dk),
                                            dim=-1),
            "w_heads_last": torch.softmax(heads_last[0] @ heads_last[1].transpose(-2, -1) / math.sqrt(dk), dim=-1),
            "interleaved": mha.W_o(heads.permute(0, 2, 3, 1).reshape(b, t, d)),
            "unmerged": mha.W_o(heads.reshape(b, t, d)),
        }


def multi_head_function(fn: Callable[[MultiHeadAttention, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Exercise ex-ch05-forward: ``fn(mha, x) -> (out, weights)``, shapes (b, t, d_model) and (b, h, t, t),
    equals ``mha(x)`` for any MultiHeadAttention without bias, without calling the module."""
    mha, x = exercise_mha(), exercise_batch()
    out, weights = _run_multi_head_function(fn, mha, x)
    ref = _reference(mha, x)
    raw = ref["raw"]
    check_tensor(weights, ref["weights"], "weights", {
        "you scaled by √d_model = √12; each head's scores are scaled by √d_k = √(d_model / h) = 2.":
            torch.softmax(raw / math.sqrt(12), dim=-1),
        "softmax over the wrong dimension: each query's row must sum to 1, so use dim=-1.":
            torch.softmax(raw / 2.0, dim=-2),
        "you viewed (b, t, h·d_k) straight as (b, h, t, d_k) without the transpose, which mixes tokens "
        "and heads: view to (b, t, h, d_k), then swap the token and head dimensions.": ref["w_no_transpose"],
        "you forgot the scale: divide each head's scores by √d_k = 2.": torch.softmax(raw, dim=-1),
        "you divided by d_k = 4; the scale is its square root, √d_k = 2.": torch.softmax(raw / 4.0, dim=-1),
        "you split the features as (b, t, d_k, h): each head's features are consecutive, so view as "
        "(b, t, h, d_k), then swap the token and head dimensions.": ref["w_heads_last"],
        "these are the weights averaged over the heads (nn.MultiheadAttention's default); return each head's, "
        "shape (b, h, t, t).": ref["weights"].mean(dim=1),
        "you returned (weights, out): return the output first, out, weights, as the module does.": ref["out"],
    })
    check_tensor(out, ref["out"], "out", {
        "the heads are merged in the wrong order: swap the head and token dimensions back to (b, t, h, d_k), "
        "then view as (b, t, h·d_k), so head 0's features come first.": ref["interleaved"],
        "you reshaped (b, h, t, d_k) to (b, t, h·d_k) without swapping the head and token dimensions first, "
        "which mixes tokens.": ref["unmerged"],
        "you forgot the output projection W_o.": ref["merged"],
    })
    # Other sizes (d_model 8, 4 heads of d_k = 2, a batch (3, 4, 8)): nothing may be a number of the exercise's.
    mha, x = _seeded_mha(8, 4, seed=504), torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(505))
    with on_other_sizes("multi_head_by_hand", "MultiHeadAttention(8, 4) and a batch of shape (3, 4, 8)",
                        "take every size (b, t, d_model, h, d_k) from mha and x, not from numbers."):
        out, weights = _run_multi_head_function(fn, mha, x)
        ref = _reference(mha, x)
        check_tensor(weights, ref["weights"], "weights on MultiHeadAttention(8, 4)", {
            "you divided by 2, the √d_k of the exercise's module; here d_k = 8 / 4 = 2, so divide by √2: take "
            "d_k from the module.": torch.softmax(ref["raw"] / 2.0, dim=-1),
        })
        check_tensor(out, ref["out"], "out on MultiHeadAttention(8, 4)")


def _look_back_weights() -> torch.Tensor:
    """Random attention weights (b, h, t, t) = (3, 2, 8, 8) on which look_back is checked first: the t = 8 of the
    chapter's w_one and w_two, so a function that takes t from them passes here and fails, with that cause
    named, on the other sizes."""
    scores = 2 * torch.randn(3, 2, 8, 8, generator=torch.Generator().manual_seed(505))
    return torch.softmax(scores, dim=-1)


def look_back_distance(look_back: Callable) -> None:
    """The check of "How far back does each head look" (chapter 5): ``look_back(weights)`` maps
    ``(b, h, t, t)`` to ``(h,)``, the mean of sum_j w_ij (i - j) over the sequences and the queries i >= 2."""
    w = _look_back_weights()
    t = w.shape[-1]
    i = torch.arange(t, dtype=torch.float32)
    distance = i[:, None] - i[None, :]  # (t, t): query i minus key j
    per_query = (w * distance).sum(-1)  # (b, h, t)
    expected = per_query[:, :, 2:].mean(dim=(0, 2))  # (h,)
    nearest = (i - w.argmax(-1).float())[:, :, 2:].mean(dim=(0, 2))  # distance to the top key only
    answer = call(look_back, w.clone(), name="look_back")
    check_tensor(answer, expected, "look_back(weights)", {
        "the distances come out negative: measure query position minus key position, i - j, not j - i.":
            -expected,
        "you summed over the queries (dim=-2): a query's weights over the keys are its row, so sum over dim=-1.":
            (w * distance).sum(-2)[:, :, 2:].mean(dim=(0, 2)),
        "you averaged over every query; use only the queries i >= 2, which have a token two back.":
            per_query.mean(dim=(0, 2)),
        "you took only the key with the largest weight (argmax); weight every key's distance by its "
        "attention weight and sum.": nearest,
        "you averaged over the queries but not over the sequences of the batch: the result has one number "
        "per head, shape (h,).": per_query[:, :, 2:].mean(dim=2),
        "you averaged over the heads too: return one number per head, shape (h,).": expected.mean(),
    })
    w2 = torch.softmax(2 * torch.randn(2, 3, 9, 9, generator=torch.Generator().manual_seed(506)), dim=-1)
    i2 = torch.arange(9, dtype=torch.float32)
    expected2 = (w2 * (i2[:, None] - i2[None, :])).sum(-1)[:, :, 2:].mean(dim=(0, 2))  # (3,)
    with on_other_sizes("look_back", "weights of shape (2, 3, 9, 9)",
                        "take t from the weights you are given (their last dimension), not from the notebook."):
        check_tensor(call(look_back, w2.clone(), name="look_back"), expected2,
                     "look_back on weights of shape (2, 3, 9, 9)")
