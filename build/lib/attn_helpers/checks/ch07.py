"""Self-checks for chapter 7's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

import torch

from . import CheckFailed, check_tensor, check_value

# Exercise ex-ch07-predict: one query's scores, every key blocked with -1e9.
PREDICT_SCORES = torch.tensor([2.0, 1.0, 0.5, -1.0])


def minus_1e9_row(answer: object) -> None:
    """Exercise ex-ch07-predict: the float32 weights of a row whose four keys all get -1e9 added."""
    expected = torch.full((4,), 0.25)
    if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and torch.isnan(answer).any():
        raise CheckFailed(
            "w_row contains NaN. Hint: NaN is what a row of -inf gives in a plain softmax; -1e9 is a "
            "finite number, so the softmax still has something to normalise."
        )
    check_tensor(answer, expected, "w_row", {
        "all zeros is what the book's attention gives for a row blocked with -inf (or a bool mask); "
        "-1e9 is finite, so the softmax still spreads the weight over the blocked keys.": torch.zeros(4),
        "adding the same number to every score leaves a softmax unchanged in exact arithmetic, but "
        "in float32 numbers near 1e9 are 64 apart, so 2.0 - 1e9 rounds to -1e9 like all the others.":
            torch.softmax(PREDICT_SCORES, dim=0),
        "these are the masked scores; the exercise asks for the weights after the softmax.":
            PREDICT_SCORES - 1e9,
    })


def _bool_mask(answer: object, expected: torch.Tensor, name: str, mistakes: dict[str, torch.Tensor]) -> None:
    if not isinstance(answer, torch.Tensor):
        raise CheckFailed(f"{name} should be a torch.Tensor, got {type(answer).__name__}.")
    if answer.dtype != torch.bool:
        raise CheckFailed(
            f"{name} has dtype {answer.dtype}; build a bool mask with True = may attend, the "
            f"convention of ah.attention (comparisons such as a < b give bool tensors)."
        )
    check_tensor(answer.float(), expected.float(), name, {h: m.float() for h, m in mistakes.items()})


LENGTHS, T = [3, 5], 5  # exercise ex-ch07-combined


def combined_mask(answer: object) -> None:
    """Exercise ex-ch07-combined: bool (2, 5, 5), True where query i may attend key j (j <= i and j real)."""
    real = torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]  # (b, t)
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (t, t)
    expected = causal[None] & real[:, None, :]  # (b, t_q, t_k)
    _bool_mask(answer, expected, "mask", {
        "True must mean 'may attend' (the convention of ah.attention); this mask is inverted, "
        "True = blocked, as nn.MultiheadAttention wants.": ~expected,
        "the padding is missing: the first sentence has only 3 real tokens, so keys 3 and 4 must be "
        "blocked for it.": causal.expand(2, T, T),
        "the causal part is missing: query i may only attend keys j <= i.": real[:, None, :].expand(2, T, T),
        "the triangle is the wrong way round: a query looks back (keys j <= i, the lower triangle), "
        "not ahead.": causal.T[None] & real[:, None, :],
        "the padding mask is applied to the queries (rows); it must block padded keys (columns): "
        "use real[:, None, :], not real[:, :, None].": causal[None] & real[:, :, None],
    })


T_Q, T_K = 3, 7  # exercise ex-ch07-decode


def decoding_mask(answer: object) -> None:
    """Exercise ex-ch07-decode: bool (3, 7); the 3 queries are the last 3 of 7 positions."""
    expected = torch.ones(T_Q, T_K, dtype=torch.bool).tril(diagonal=T_K - T_Q)
    _bool_mask(answer, expected, "decode_mask", {
        "the triangle starts at the top left, as is_causal=True does: but these queries are positions "
        "4, 5, 6, so query 0 may attend keys 0…4. Shift the diagonal by t_k - t_q.":
            torch.ones(T_Q, T_K, dtype=torch.bool).tril(),
        "True must mean 'may attend'; this mask is inverted.": ~expected,
        "the triangle is the wrong way round: each query looks back, so use tril, not triu.":
            torch.ones(T_Q, T_K, dtype=torch.bool).triu(diagonal=T_K - T_Q),
        "every key is allowed: the last query may see all 7 keys, but earlier ones may not see later keys.":
            torch.ones(T_Q, T_K, dtype=torch.bool),
    })


B, H, T_BIG = 8, 12, 4096  # exercise ex-ch07-bytes


def weights_gib(answer: object) -> None:
    """Exercise ex-ch07-bytes: GiB of float32 attention weights for b=8, h=12, t=4096."""
    gib = 2 ** 30
    check_value(answer, B * H * T_BIG ** 2 * 4 / gib, "weights_gib", {
        "you left out the heads: every head has its own t × t matrix.": B * T_BIG ** 2 * 4 / gib,
        "you left out the batch: every sequence has its own matrices.": H * T_BIG ** 2 * 4 / gib,
        "a float32 number takes 4 bytes: multiply the count of numbers by 4.": B * H * T_BIG ** 2 / gib,
        "there are t × t weights per head, not t.": B * H * T_BIG * 4 / gib,
        "1 GiB is 2**30 bytes; you divided by 10**9 (that is GB).": B * H * T_BIG ** 2 * 4 / 1e9,
    }, atol=1e-3)
