"""Self-checks for the exercises of chapter 2 (chapter 2; see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import safe_softmax, softmax
from . import CheckFailed, book_attention, check_tensor, check_value, run_by_hand

__all__ = [
    "D_PREDICT", "D_SPREAD", "KEY_STD", "N_PAIRS", "spread_keys", "spread_scale", "stable_softmax_function",
    "stretched_toy_weights",
]

D_PREDICT = 32  # the dimension of exercise ex-ch02-predict
D_SPREAD, KEY_STD, N_PAIRS = 64, 2.0, 4000  # exercise ex-ch02-spread


def _toy_scores(d: int) -> torch.Tensor:
    q = torch.ones(d)
    K = torch.stack([2 * torch.ones(d), torch.ones(d)])  # (2, d)
    return K @ q  # (2,): 2d and d


def stretched_toy_weights(w_raw: torch.Tensor, w_scaled: torch.Tensor) -> None:
    """Exercise ex-ch02-predict: the two weights, shape (2,), of chapter 1's toy in 32 dimensions."""
    d = D_PREDICT
    scores = _toy_scores(d)
    raw, scaled = torch.softmax(scores, dim=0), torch.softmax(scores / math.sqrt(d), dim=0)
    check_tensor(w_raw, raw, "w_raw", atol=1e-5, mistakes={
        "these are the raw scores q·k; pass them through a softmax to get weights.": scores,
        "w_raw should use the raw scores; you divided them by √d, which is w_scaled.": scaled,
        "these are the weights in 8 dimensions (16 and 8); the exercise stretches the vectors to 32.":
            torch.softmax(_toy_scores(8), dim=0),
    })
    check_tensor(w_scaled, scaled, "w_scaled", atol=1e-5, mistakes={
        "the scores are not scaled: divide them by √d before the softmax.": raw,
        "you divided by d; divide by √d = √32 instead.": torch.softmax(scores / d, dim=0),
        "these are the scaled weights in 8 dimensions (0.9442, 0.0558); redo them with d = 32.":
            torch.softmax(_toy_scores(8) / math.sqrt(8), dim=0),
        "these are the scaled scores; pass them through a softmax to get weights.": scores / math.sqrt(d),
    })


def _probe_square() -> torch.Tensor:
    return torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0], [4.0, 0.0, -2.0]])


def _fail_if_not_finite(result: object, what: str, hint: str) -> None:
    if isinstance(result, torch.Tensor) and torch.is_floating_point(result) and not torch.isfinite(result).all():
        raise CheckFailed(f"your softmax of {what} contains NaN or inf. Hint: {hint}")


_SHORTCUTS = {  # what a learner's softmax may not call, by the fragments of the operators' names that give it away
    "PyTorch's softmax (torch.softmax, F.softmax, x.softmax, nn.Softmax or log_softmax), which the exercise rules out":
        ("softmax", "softmin"),
    "a log-sum-exp (torch.logsumexp, logcumsumexp or logaddexp), which does the shift by the maximum for you":
        ("logsumexp", "logcumsumexp", "logaddexp"),  # a log-sum-exp under any of PyTorch's names
}


def _run_by_hand(fn: Callable[..., torch.Tensor], x: torch.Tensor, dim: int) -> torch.Tensor:
    """``fn(x, dim=dim)``, refused if it reaches for a ready-made softmax."""
    forbidden = {**book_attention(), softmax: "ah.softmax", safe_softmax: "ah.softmax"}
    return run_by_hand(fn, (x.clone(),), forbidden, "stable_softmax", "write it with torch.exp, amax and sum only.",
                       kwargs={"dim": dim}, shortcuts=_SHORTCUTS)


def stable_softmax_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch02-stable: ``fn(x, dim=-1)`` must equal ``torch.softmax`` without overflowing or calling it."""
    x = _probe_square()
    shifted = torch.exp(x - x.amax(dim=-1))  # the maxima broadcast along the wrong axis (no keepdim)
    check_tensor(_run_by_hand(fn, x, -1), torch.softmax(x, dim=-1), "softmax of a small 3 × 3 matrix", {
        "each row must sum to 1: normalise along dim, not along dim 0.": torch.softmax(x, dim=0),
        "you subtracted the maxima with the reduced dimension dropped, so they broadcast along the wrong axis: "
        "keep it, as a dimension of size 1, so that each row's maximum lines up with its own row.":
            shifted / shifted.sum(dim=-1, keepdim=True),
        "the maxima and the sums lost their reduced dimension, so they broadcast along the wrong axis: "
        "keep it, as a dimension of size 1, in both the maximum and the sum.": shifted / shifted.sum(dim=-1),
        "you divided by the sum of the scores; softmax exponentiates first, then normalises.":
            x / x.sum(dim=-1, keepdim=True),
    })
    big = torch.tensor([[1000.0, 999.0, 998.0]])
    result = _run_by_hand(fn, big, -1)
    _fail_if_not_finite(result, "[1000, 999, 998]",
                        "exp(1000) overflows to inf. Subtract each row's maximum before calling torch.exp.")
    check_tensor(result, torch.softmax(big, dim=-1), "softmax of [1000, 999, 998]")
    mixed = torch.tensor([[1000.0, 999.0], [-1000.0, -1001.0]])
    result = _run_by_hand(fn, mixed, -1)
    _fail_if_not_finite(result, "rows of very different sizes",
                        "subtract each row's own maximum (a maximum along dim that keeps that dimension), not one "
                        "maximum for the whole tensor: exp(-2000) is 0 and the second row becomes 0/0.")
    check_tensor(result, torch.softmax(mixed, dim=-1), "softmax of rows of very different sizes")
    wide = torch.tensor([[0.0, 1000.0], [3.0, -997.0]])  # rows spanning 1000: only the maximum is a safe shift
    result = _run_by_hand(fn, wide, -1)
    _fail_if_not_finite(result, "[0, 1000] and [3, -997]",
                        "subtract each row's maximum, not its minimum or its mean: exp(x - shift) overflows as soon as "
                        "x - shift exceeds about 88, and only the maximum keeps every x - shift at or below 0.")
    check_tensor(result, torch.softmax(wide, dim=-1), "softmax of [0, 1000] and [3, -997]")
    check_tensor(_run_by_hand(fn, x, 0), torch.softmax(x, dim=0), "softmax along dim=0", {
        "dim=0 was ignored: use the dim argument in amax and sum instead of a fixed -1.": torch.softmax(x, dim=-1),
    })


def spread_keys() -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise ex-ch02-spread: 4000 query–key pairs in d = 64; queries N(0, 1), keys with standard deviation 2."""
    gen = torch.Generator().manual_seed(202)
    Q = torch.randn(N_PAIRS, D_SPREAD, generator=gen)  # (n, d)
    K = KEY_STD * torch.randn(N_PAIRS, D_SPREAD, generator=gen)  # (n, d)
    return Q, K


def _spread_variances(scale: float) -> dict[str, float]:
    """Variances of the exercise's scores computed the right way and the usual wrong ways, in float64."""
    Q, K = (m.double() for m in spread_keys())  # (n, d) each
    pair = (Q * K).sum(dim=-1)  # (n,): row n of Q with row n of K
    n = Q.shape[0]
    # every query against every key, Q @ K.T, without building the n × n matrix:
    # Σ_ij s_ij² = trace(QᵀQ KᵀK) and Σ_ij s_ij = (Σ_i q_i)·(Σ_j k_j)
    total, square = Q.sum(0) @ K.sum(0), torch.trace((Q.T @ Q) @ (K.T @ K))
    all_pairs = float((square - total ** 2 / n ** 2) / (n ** 2 - 1))
    var = float(pair.var())
    return {
        "right": var * scale ** 2,
        "raw": var,
        "sqrt_d": var / D_SPREAD,
        "var_times_scale": var * scale,
        "all_pairs": all_pairs * scale ** 2,
        "wrong_dim": float((Q * K).sum(dim=0).var()) * scale ** 2,
    }


def spread_scale(scale: float, measured_var: float) -> None:
    """Exercise ex-ch02-spread: the factor that gives the scores unit variance, and their measured variance."""
    d, var_k = D_SPREAD, KEY_STD ** 2
    right_scale = 1 / math.sqrt(d * var_k)
    check_value(scale, right_scale, "scale", {
        "1/√d assumes keys of variance 1; work out Var(q_i k_i) when the keys have standard deviation 2.":
            1 / math.sqrt(d),
        "that divides by the variance of q·k; to get variance 1, divide the scores by its square root.":
            1 / (d * var_k),
        "you used the keys' standard deviation where their variance belongs in Var(q_i k_i).":
            1 / math.sqrt(d * KEY_STD),
        "that is the number to divide by; scale is the factor the scores are multiplied by.": 1 / right_scale,
    })
    v = _spread_variances(right_scale)
    # float32 round-off moves the measured variance by about 1e-6, and .var(unbiased=False) by
    # 1/n of it (2.6e-4); the nearest wrong method (the standard deviation) is 1.4e-2 away.
    check_value(measured_var, v["right"], "measured_var", {
        "this is the variance of the unscaled scores; multiply each q·k by scale first.": v["raw"],
        "these scores were scaled by 1/√d only; use the scale you worked out in part 1.": v["sqrt_d"],
        "you multiplied the variance by scale, but Var(c·s) = c²·Var(s): scale the scores, then take .var().":
            v["var_times_scale"],
        "this is the standard deviation of the scaled scores (.std()); the exercise asks for the variance (.var()).":
            math.sqrt(v["right"]),
        "you scored every query against every key (Q @ K.T); pair row n of Q with row n of K only.":
            v["all_pairs"],
        "you summed over the 4000 pairs (dim=0); each score sums the d = 64 products of one pair (dim=-1).":
            v["wrong_dim"],
        "this is the variance the scale is designed to give, not a measurement: compute the scaled scores "
        "and take their variance.": 1.0,
    }, atol=1e-3, rtol=0)
