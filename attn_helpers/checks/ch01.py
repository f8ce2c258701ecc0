"""Self-checks for chapter 1's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import CheckFailed, Watch, book_attention, check_tensor, torch_attention

__all__ = [
    "TOY_Q",
    "TOY_K",
    "TOY_V",
    "doubled_query_weights",
    "self_attention_function",
    "batch_sentences",
    "batched_attention",
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
    with Watch({**book_attention(), **torch_attention()}) as watch:
        result = fn(X.clone())
    if watch.called:
        raise CheckFailed(
            f"self_attention calls {', '.join(sorted(watch.called))} (directly or through another helper), which "
            "computes attention for you and which the exercise asks you not to use. Hint: build the scores, the "
            "softmax and the weighted sum yourself with torch."
        )
    if watch.used_fused_attention():
        raise CheckFailed(
            "self_attention calls F.scaled_dot_product_attention, which computes the attention for you. "
            "Hint: build the scores, the softmax and the weighted sum yourself with torch."
        )
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise CheckFailed("self_attention should return a pair (Y, W): the outputs and the weights.")
    Y, W = result
    scores = X @ X.T  # (t, t)
    expected_W = torch.softmax(scores, dim=-1)
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


def batch_sentences() -> tuple[torch.Tensor, torch.Tensor]:
    """The two toy sentences of exercise ex-ch01-batch, each (4, 3)."""
    gen = torch.Generator().manual_seed(202)
    return torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)


def batched_attention(X: torch.Tensor, W: torch.Tensor, Y: torch.Tensor) -> None:
    """Exercise ex-ch01-batch: X (2, 4, 3), W (2, 4, 4), Y (2, 4, 3)."""
    a, b = batch_sentences()
    expected_X = torch.stack([a, b])
    check_tensor(X, expected_X, "X", {
        "torch.cat joined the sentences into one sequence of 8 tokens; torch.stack adds a batch dimension.":
            torch.cat([a, b]),
        "the sentences are stacked along the wrong dimension: the batch dimension comes first, (b, t, d).":
            torch.stack([a, b], dim=1),
        "the sentences are in the other order: a first, then b.": torch.stack([b, a]),
    })
    scores = torch.bmm(expected_X, expected_X.transpose(1, 2))  # (2, 4, 4)
    expected_W = torch.softmax(scores, dim=-1)
    feature_scores = torch.bmm(expected_X.transpose(1, 2), expected_X)  # (2, 3, 3)
    check_tensor(W, expected_W, "W", {
        "softmax over dim=1 normalises each column; the weights of one query are a row: use dim=-1.":
            torch.softmax(scores, dim=1),
        "you computed Xᵀ X, a (d × d) table of features; the scores are X Xᵀ, one per pair of tokens.":
            torch.softmax(feature_scores, dim=-1),
        "you forgot the softmax: W holds the raw dot products.": scores,
    })
    check_tensor(Y, torch.bmm(expected_W, expected_X), "Y", {
        "the weights are transposed: use torch.bmm(W, X).": torch.bmm(expected_W.transpose(1, 2), expected_X),
    })
