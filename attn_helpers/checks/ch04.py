"""Self-checks for the exercises of chapter 4 (chapter 4; see ``attn_helpers.checks``)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn

from ..modules import MultiHeadAttention, SelfAttentionHead
from ..training import copy_task_accuracy, copy_task_batch
from . import (
    CheckFailed,
    Watch,
    book_attention,
    call,
    check_tensor,
    correct,
    listed,
    on_other_sizes,
    run_by_hand,
    torch_attention,
)

__all__ = [
    "exercise_sequence",
    "tied_weight",
    "tied_scores",
    "exercise_head",
    "exercise_batch",
    "head_function",
    "next_token_head",
    "recall_question",
    "recall_scores",
]


def exercise_sequence() -> torch.Tensor:
    """The sequence of exercise ex-ch04-tied: X of shape (t, d_model) = (5, 6)."""
    return torch.randn(5, 6, generator=torch.Generator().manual_seed(401))


def tied_weight() -> torch.Tensor:
    """The weight W (d_k, d_model) = (4, 6) shared by queries and keys in exercise ex-ch04-tied."""
    return torch.randn(4, 6, generator=torch.Generator().manual_seed(402)) / math.sqrt(6)


def tied_scores(answer: torch.Tensor) -> None:
    """Exercise ex-ch04-tied: the scaled scores S = Q Kᵀ / √d_k, shape (5, 5), with Q = K = X Wᵀ."""
    X, W = exercise_sequence(), tied_weight()
    Q = X @ W.T  # (t, d_k); the keys are the same
    raw = Q @ Q.T  # (t, t)
    expected = raw / math.sqrt(W.shape[0])
    check_tensor(answer, expected, "S_tied", {
        "you forgot the scale: divide the dot products by √d_k = 2.": raw,
        "you divided by √d_model = √6; the scale uses the width of the queries and keys, d_k = 4.":
            raw / math.sqrt(X.shape[1]),
        "this is after the softmax; the exercise asks for the scores before it.":
            torch.softmax(expected, dim=-1),
        "these are the scores of the raw inputs, X Xᵀ/√d; project them with W first (Q = X Wᵀ).":
            X @ X.T / math.sqrt(X.shape[1]),
    })


def _seeded_head(d_model: int, d_k: int, d_v: int, seed: int) -> SelfAttentionHead:
    gen = torch.Generator().manual_seed(seed)
    head = SelfAttentionHead(d_model, d_k, d_v=d_v)
    with torch.no_grad():
        for lin in (head.W_q, head.W_k, head.W_v):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen))
    return head


def exercise_head() -> SelfAttentionHead:
    """The head of exercise ex-ch04-manual: d_model=6, d_k=4, d_v=3, seeded."""
    return _seeded_head(6, 4, 3, seed=403)


def exercise_batch() -> torch.Tensor:
    """The input of exercise ex-ch04-manual: (b, t, d_model) = (2, 5, 6)."""
    return torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(404))


def _forbidden() -> dict[Callable, str]:
    return {SelfAttentionHead.forward: "the head's forward (head(x), head.forward(x), or a head with the same "
                                       "weights)",
            MultiHeadAttention.forward: "ah.MultiHeadAttention", **book_attention(), **torch_attention()}


def _run_head_function(fn: Callable, head: SelfAttentionHead, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn(head, x)`` on a copy of the head (what fn does to it cannot change the check's), watched."""
    return run_by_hand(fn, (copy.deepcopy(head), x.clone()), _forbidden(), "head_by_hand",
                       "project x with the head's three weight matrices yourself (an nn.Linear multiplies by its "
                       "weight transposed), then compute the scores, scale them and take their softmax; call the head "
                       "only afterwards, to compare.", "the head")


def head_function(fn: Callable[[SelfAttentionHead, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Exercise ex-ch04-manual: ``fn(head, x) -> (out, weights)``, shapes (b, t, d_v) and (b, t, t), equals
    ``head(x)`` for any SelfAttentionHead without bias, computed from its weights without calling it."""
    head, x = exercise_head(), exercise_batch()
    out, weights = _run_head_function(fn, head, x)
    with torch.no_grad():
        q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T
    raw = q @ k.transpose(-2, -1)  # (b, t, t)
    expected_w = torch.softmax(raw / 2.0, dim=-1)  # √d_k = 2
    check_tensor(weights, expected_w, "weights", {
        "you divided by √d_model = √6; the scale is √d_k = 2, the width of the queries and keys.":
            torch.softmax(raw / math.sqrt(6), dim=-1),
        "you divided by √d_v = √3; the scale is √d_k = 2, the width of the queries and keys.":
            torch.softmax(raw / math.sqrt(3), dim=-1),
        "you forgot the scale: divide the scores by √d_k = 2 before the softmax.": torch.softmax(raw, dim=-1),
        "you divided by d_k = 4; the scale is its square root, √d_k = 2.": torch.softmax(raw / 4.0, dim=-1),
        "you multiplied by √d_k; divide the scores by √d_k = 2.": torch.softmax(raw * 2.0, dim=-1),
        "softmax over the wrong dimension: each query's row must sum to 1, so use dim=-1.":
            torch.softmax(raw / 2.0, dim=-2),
        "you returned (weights, out): return the outputs first, out, weights, as the head does.": expected_w @ v,
        "queries and keys are swapped: the scores are Q Kᵀ, row i for query i.":
            torch.softmax(raw.transpose(-2, -1) / 2.0, dim=-1),
    })
    check_tensor(out, expected_w @ v, "out", {
        "the weights are transposed: out = weights @ V.": expected_w.transpose(-2, -1) @ v,
        "you averaged the inputs X instead of the values V = X W_vᵀ.": expected_w @ x,
        "you averaged the queries instead of the values V = X W_vᵀ.": expected_w @ q,
    })
    # A head of other sizes, on a batch of other sizes: the scale must come from the head, not be a number.
    head, x = _seeded_head(8, 2, 5, seed=405), torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(406))
    with on_other_sizes("head_by_hand", "SelfAttentionHead(8, 2, d_v=5) and a batch of shape (3, 4, 8)",
                        "take every size and the scale from the head and x, not from numbers."):
        out, weights = _run_head_function(fn, head, x)
        with torch.no_grad():
            q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T
        raw = q @ k.transpose(-2, -1)
        expected_w = torch.softmax(raw / math.sqrt(2), dim=-1)
        check_tensor(weights, expected_w, "weights on SelfAttentionHead(8, 2, d_v=5)", {
            "you divided by 2, the √d_k of the exercise's head; this head's d_k is 2, so divide by √2: "
            "read d_k from the head you are given, then take its square root.": torch.softmax(raw / 2.0, dim=-1),
        })
        check_tensor(out, expected_w @ v, "out on SelfAttentionHead(8, 2, d_v=5)")


def next_token_head(head: nn.Module) -> None:
    """Exercise ex-ch04-next: a SelfAttentionHead(18, 8, d_v=10) trained to copy the NEXT token."""
    if not isinstance(head, SelfAttentionHead) or (head.d_model, head.d_v) != (18, 10):
        raise CheckFailed(
            "head should be a self-attention head that takes 10 + 8 features in (10 token features plus 8 "
            "position features) and gives 10 out, one score per token of the vocabulary."
        )
    accuracy = copy_task_accuracy(head, offset=1)
    if accuracy < 0.99:
        if copy_task_accuracy(head, offset=-1) > 0.9:
            raise CheckFailed(
                f"the head copies the previous token (its next-token accuracy is {accuracy:.1%}). "
                f"Hint: train it with offset=1, not the default offset=-1."
            )
        raise CheckFailed(
            f"the head copies the next token right only {accuracy:.1%} of the time (need 99%). "
            f"Hint: did you train it on the next token (an offset of 1)? Try more steps."
        )
    correct("accuracy")
    x, _, _ = copy_task_batch(200, offset=1, generator=torch.Generator().manual_seed(405))
    with torch.no_grad():
        _, weights = head(x)  # (b, t, t)
    hits = (weights[:, :-1].argmax(-1) == torch.arange(1, 8)).float().mean()
    if hits < 0.99:
        raise CheckFailed(
            f"the head gets the answer right, but in only {float(hits):.1%} of the rows does the strongest "
            f"weight fall on the token the row copies. Hint: check that you passed the trained head."
        )
    correct("attention map")


# ---------------------------------------------------------------- ex-ch04-recall (associative recall)

def recall_question() -> tuple[torch.Tensor, list[str]]:
    """The sequence of exercise ex-ch04-recall: ``x_new`` (t, d) = (7, 19), six pairs then a question, and its
    labels."""
    from ..tasks import recall_batch, recall_labels

    x, keys, values, query, _ = recall_batch(1, generator=torch.Generator().manual_seed(406))
    return x[0], recall_labels(keys[0], values[0], query[0])


def recall_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], head: nn.Module) -> None:
    """Exercise ex-ch04-recall: ``fn(B, x)`` is the last token's scores ``x_q^T B x_j``, shape (t,), read off a
    bilinear map B (d, d) alone: on ``head``'s map B = W_Qᵀ W_K / √d_k and ``recall_question()``, and on
    another map and sequence."""
    from ..tasks import recall_accuracy

    if not isinstance(head, SelfAttentionHead) or (head.d_model, head.d_v) != (19, 10):
        raise CheckFailed(
            "pass the chapter's trained recall_head, an ah.SelfAttentionHead(19, 16, d_v=10): "
            "8 key features + 10 value features + the query flag in, one score per digit out."
        )
    if recall_accuracy(head, n=500) < 0.9:
        raise CheckFailed("this head has not learned the task; pass the chapter's trained recall_head.")
    x, _ = recall_question()  # (t, d)
    with torch.no_grad():
        raw = head.W_q.weight.T @ head.W_k.weight  # (d, d)
    B = raw / math.sqrt(head.d_k)
    with Watch({SelfAttentionHead.forward: "the head's forward", **book_attention()}) as watch:
        answer = call(fn, B.clone(), x.clone(), name="question_scores", given="recall_map and x_new")
    if watch.called:
        raise CheckFailed(f"question_scores calls {listed(sorted(watch.called))}: the exercise asks for the "
                          "scores from B and x alone. Hint: the question's row of scores is x_q B xᵀ.")
    expected = x[-1] @ B @ x.T  # (t,): the question's row
    check_tensor(answer, expected, "question_scores(recall_map, x_new)", {
        "you forgot the scale: B = W_Qᵀ W_K / √d_k, as in the chapter's recall_map.": x[-1] @ raw @ x.T,
        "this is how much each token's query likes the question, x_jᵀ B x_q (a column of the scores). "
        "The question's scores are its row: x_qᵀ B x_j, with the question on the left.": x @ B @ x[-1],
        "this is after the softmax; the exercise asks for the scores before it.": torch.softmax(expected, dim=-1),
        "this is the first pair's row of scores; the question is the last token, x[-1].": x[0] @ B @ x.T,
        "this is the whole (t, t) score matrix; keep only the question's row, the last one.": x @ B @ x.T,
        "you left out B: these are plain dot products x_q·x_j; put B between them.": x[-1] @ x.T,
        "these are the logarithms of the head's weights, which differ from the scores by a constant; "
        "compute the scores from B and x, without calling the head.": torch.log_softmax(expected, dim=-1),
    })
    # Another map and sequence: the scores must come from the B and x the function is given.
    gen = torch.Generator().manual_seed(407)
    B_other, x_other = torch.randn(19, 19, generator=gen), torch.randn(6, 19, generator=gen)
    with on_other_sizes("question_scores", "another map B (19, 19) and a sequence x of 6 tokens (6, 19)",
                        "take every index and size from B and x: the question is the last token, x[-1]."):
        answer = call(fn, B_other.clone(), x_other.clone(), name="question_scores")
        check_tensor(answer, x_other[-1] @ B_other @ x_other.T, "question_scores on another map and sequence", {
            "these are recall_head's scores, not those of the B the function is given: use its B argument, not "
            "recall_map or the head's layers.": x_other[-1] @ B @ x_other.T,
            "these are the scores of x_new, not of the x the function is given: use its x argument.":
                x[-1] @ B_other @ x.T,
        })
