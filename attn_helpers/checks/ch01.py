"""Self-checks for the exercises of chapter 1 (chapter 1; see ``attn_helpers.checks``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import CheckFailed, book_attention, check_tensor, on_cpu, run_by_hand, tensors_close, torch_attention

__all__ = [
    "TOY_Q",
    "TOY_K",
    "TOY_V",
    "doubled_query_weights",
    "self_attention_function",
    "sequence_first_batch",
    "sequence_first_attention",
]

TOY_Q = torch.tensor([1.0, 1.0])
TOY_K = torch.tensor([[2.0, 2.0], [1.0, 1.0]])
TOY_V = torch.tensor([[3.0, 3.0], [4.0, 4.0]])


def doubled_query_weights(answer: torch.Tensor) -> None:
    """Exercise ex-ch01-predict: the two weights, shape (2,), for the query (2, 2)."""
    q = 2 * TOY_Q
    scores = TOY_K @ q  # (2,)
    expected = torch.softmax(scores, dim=0)
    check_tensor(answer, expected, "w_doubled", {
        "these are the raw scores q·k; pass them through a softmax to get weights.": scores,
        "you divided each score by their sum; softmax exponentiates first, then normalises.": scores / scores.sum(),
        "these are the weights of the original query (1, 1); recompute the scores with (2, 2).":
            torch.softmax(TOY_K @ TOY_Q, dim=0),
        "this is the output vector Σ w_j v_j; the exercise asks for the weights w.": expected @ TOY_V,
    })


def _exercise_sequence() -> torch.Tensor:
    gen = torch.Generator().manual_seed(101)
    return torch.randn(5, 3, generator=gen)  # (t, d)


def self_attention_function(fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Exercise ex-ch01-function: ``fn(X) -> (Y, W)`` with raw dot-product weights, without ``ah.attention``."""
    X = _exercise_sequence()
    result = run_by_hand(fn, (X.clone(),), {**book_attention(), **torch_attention()}, "self_attention",
                         "build the scores, the softmax and the weighted sum yourself with torch.", "ah.attention",
                         pair=("Y", "W"))
    Y, W = result
    scores = X @ X.T  # (t, t)
    expected_W = torch.softmax(scores, dim=-1)
    t, d = X.shape  # 5 and 3: the outputs' shape and the weights' tell them apart
    if getattr(Y, "shape", None) == (t, t) and getattr(W, "shape", None) == (t, d):
        raise CheckFailed(
            f"self_attention returned a ({t}, {t}) tensor first and a ({t}, {d}) one second: the pair is in the "
            "other order. Hint: return the outputs first, then the weights: (Y, W)."
        )
    check_tensor(W, expected_W, "W", {
        "softmax over the wrong dimension: each row (one query) must sum to 1, so use dim=-1.":
            torch.softmax(scores, dim=0),
        "you forgot the softmax: W holds the raw dot products.": scores,
        "this chapter uses raw dot products; the division by √d comes in chapter 2.":
            torch.softmax(scores / X.shape[-1] ** 0.5, dim=-1),
    })
    check_tensor(Y, expected_W @ X, "Y", {
        "the weights are transposed: output i is Σ_j W[i, j] x_j, which is W @ X, not W.T @ X.":
            expected_W.T @ X,
        "Y is the input unchanged: multiply the weights by the values, Y = W @ X.": X,
    })


def sequence_first_batch() -> torch.Tensor:
    """The batch of exercise ex-ch01-batch: two toy sentences of four tokens, sequence first, (t, b, d) = (4, 2, 3)."""
    gen = torch.Generator().manual_seed(202)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
    return torch.stack([a, b], dim=1)


def sequence_first_attention(W: torch.Tensor, Y: torch.Tensor) -> None:
    """Exercise ex-ch01-batch: the weights Wb (b, t, t) = (2, 4, 4) and the outputs Ys (t, b, d) = (4, 2, 3),
    named in messages as the chapter names them."""
    Xs = sequence_first_batch()                       # (t, b, d)
    Xb = Xs.transpose(0, 1)                           # (b, t, d)
    t, b, _ = Xs.shape
    if isinstance(W, torch.Tensor) and W.shape == (t, b, b):
        raise CheckFailed(
            f"Wb has shape {tuple(W.shape)}: torch.bmm took the tokens, the first dimension of Xs, for the batch, "
            "and attended across the two sentences. Hint: swap the first two dimensions of Xs, so that the sentences "
            "come first, (b, t, d), before the product."
        )
    scores = torch.bmm(Xb, Xb.transpose(1, 2))        # (b, t, t)
    expected_W = torch.softmax(scores, dim=-1)
    scaled_W = torch.softmax(scores / Xs.shape[-1] ** 0.5, dim=-1)  # chapter 2's scores, SDPA's default
    regrouped = Xs.reshape(b, t, -1)                  # memory order cut into two "sentences" of mixed tokens
    check_tensor(W, expected_W, "Wb", {
        "Xs.reshape(2, 4, 3) (or .view) has the right shape, but it keeps the numbers in memory order, so each "
        "of its \"sentences\" mixes tokens of both. Swap the two leading dimensions instead of reshaping.":
            torch.softmax(torch.bmm(regrouped, regrouped.transpose(1, 2)), dim=-1),
        "the sentences are in the other order: sentence j of Xs is Xs[:, j], and Wb[j] its weights.":
            expected_W.flip(0),
        "each column of Wb sums to 1, not each row: a softmax over dim=1, or Wb transposed (the same here, as the "
        "scores are symmetric). The weights of one query are a row: softmax over dim=-1, and no transpose.":
            torch.softmax(scores, dim=1),
        "softmax over dim=0 normalises across the two sentences; the weights of one query are a row: use dim=-1.":
            torch.softmax(scores, dim=0),
        "you forgot the softmax: Wb holds the raw dot products.": scores,
        "this chapter uses raw dot products; the division by √d comes in chapter 2.": scaled_W,
    })
    batch_first = torch.bmm(expected_W, Xb)           # (b, t, d)
    on_cpu(Y, "Ys")
    if isinstance(Y, torch.Tensor) and Y.layout == torch.strided and tensors_close(Y.detach(), batch_first, 1e-4):
        raise CheckFailed(
            f"Ys is right but laid out batch first, {tuple(Y.shape)}; the exercise asks for the input's own layout, "
            "(t, b, d) = (4, 2, 3). Hint: swap its first two dimensions back."
        )
    check_tensor(Y, batch_first.transpose(0, 1), "Ys", {
        "reshape(4, 2, 3) regroups the numbers in memory order instead of swapping the two leading dimensions.":
            batch_first.reshape(t, b, -1),
        "the weights are transposed: output i of a sentence is Σ_j w_ij x_j, its row of the weights times the "
        "tokens, not its column.":
            torch.bmm(expected_W.transpose(1, 2), Xb).transpose(0, 1),
        "the sentences are in the other order: Ys[:, j] is sentence j.": batch_first.transpose(0, 1).flip(1),
        "these outputs come from scores divided by √d (as F.scaled_dot_product_attention and ah.attention do by "
        "default); this chapter uses raw dot products, so pass scale=1.0.":
            torch.bmm(scaled_W, Xb).transpose(0, 1),
    })
