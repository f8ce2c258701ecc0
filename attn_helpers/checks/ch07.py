"""Self-checks for the exercises of chapter 7 (chapter 7; see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import torch

from . import (
    CheckFailed,
    Watch,
    call,
    check_tensor,
    check_value,
    correct,
    listed,
    reached_functions,
    tensors_from_outside,
)

__all__ = [
    "B", "DECODE_SIZES", "H", "LENGTHS", "PREDICT_SCORES", "T", "T_BIG", "T_K", "T_Q", "combined_mask",
    "decoding_mask_function", "minus_1e9_row", "weights_gib",
]

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
        "these scores are float32: look at what 2.0 - 1e9 becomes (torch.tensor(2.0) - 1e9).":
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
            f"convention of ah.attention; comparisons such as a < b give bool tensors."
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
        "this mask blocks the padded queries (rows) too: padding must block the padded keys (columns) only, "
        "so the padding part varies along the keys' axis and is the same for every query. "
        "A padded query may attend the real keys; its output is simply never used.": causal[None] & real[:, :, None],
    })


T_Q, T_K = 3, 7  # exercise ex-ch07-decode: the sizes the chapter compares with is_causal=True
DECODE_SIZES = ((T_Q, T_K), (1, 5), (2, 9), (4, 4), (5, 6))  # (t_q, t_k) on which the check calls the function


def _forbidden_masks() -> list[Callable]:
    """The ready-made causal masks the exercise rules out: the book's, and every route PyTorch offers to its own
    (either corner of its causal biases, whose top-left one sliced gives the same mask, and nn.Transformer's,
    whose static method calls a function of the module ``torch.nn.modules.transformer`` that can be called
    directly). General triangles (``torch.tril``, ``torch.triu``) are the exercise's own tools, not refused."""
    from torch import nn
    from torch.nn.attention import bias
    from torch.nn.modules import transformer

    from ..masks import causal_mask

    return [causal_mask, bias.causal_lower_right, bias.CausalBias._lower_right, bias.causal_upper_left,
            bias.CausalBias._upper_left, nn.Transformer.generate_square_subsequent_mask,
            transformer._generate_square_subsequent_mask]


def decoding_mask_function(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise ex-ch07-decode: ``fn(t_q, t_k)`` returns the bool causal mask (t_q, t_k) of the newest
    t_q of t_k positions (True = may attend), built without ``ah.causal_mask`` or PyTorch's ``CausalBias``."""
    if not callable(fn):
        raise CheckFailed(
            f"pass the function itself, decoding_mask, not {type(fn).__name__}: the check calls it on several sizes."
        )
    for reached in reached_functions(fn):  # functools.cache and its kind: computed again, under the watch
        if hasattr(reached, "cache_clear"):
            reached.cache_clear()
    if outside := tensors_from_outside(fn):
        raise CheckFailed(
            f"decoding_mask reads {listed(outside)}, which holds tensors made before this call (a mask made "
            f"beforehand, or a cache of earlier results): build the mask inside the function, from t_q and t_k "
            f"alone, on every call."
        )
    for t_q, t_k in DECODE_SIZES:
        watch = Watch(_forbidden_masks())
        try:
            with watch:
                answer = call(fn, t_q, t_k, name="decoding_mask", given=f"t_q = {t_q}, t_k = {t_k}")
        except CheckFailed as failed:
            if "CausalBias" in str(failed.__cause__):  # PyTorch's CausalBias tensor cannot be built while watched
                watch.called.add("torch.nn.attention.bias.CausalBias")
            if not watch.called:
                raise
        if watch.called:
            raise CheckFailed(
                f"decoding_mask({t_q}, {t_k}) calls {listed(sorted(watch.called))}, which builds this mask for you "
                f"and which the exercise asks you not to use. Hint: build the triangle yourself from a (t_q, t_k) "
                f"tensor of True: which keys may the first new query, at position t_k - t_q, see?"
            )
        ones = torch.ones(t_q, t_k, dtype=torch.bool)
        expected = ones.tril(diagonal=t_k - t_q)  # (t_q, t_k): query i is position t_k - t_q + i
        mistakes = {
            "the triangle starts at the top left, as PyTorch's causal flag does, but the queries are the last t_q "
            "positions, not the first ones: which keys may the first of them attend? tril takes a diagonal "
            "argument.": ones.tril(),
            "the diagonal offset has the wrong sign: query i is position t_k - t_q + i, so shift the triangle "
            "right by t_k - t_q, not by t_q - t_k.": ones.tril(diagonal=t_q - t_k),
            f"the shift is fixed at {T_K - T_Q}, right only for {T_Q} queries among {T_K} keys: it is t_k - t_q.":
                ones.tril(diagonal=T_K - T_Q),
            "True must mean 'may attend'; this mask is inverted.": ~expected,
            "the triangle is the wrong way round: each query looks back, so use tril, not triu.":
                ones.triu(diagonal=t_k - t_q),
            "every key is allowed: the last query may see all keys, but earlier ones may not see later keys.": ones,
        }
        with contextlib.redirect_stdout(io.StringIO()):  # one line for all the sizes, printed below
            _bool_mask(answer, expected, f"decoding_mask({t_q}, {t_k})", mistakes)
    correct("decoding_mask")


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
