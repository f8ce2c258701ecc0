"""Self-checks for chapter 2's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from . import CheckFailed, check_tensor, check_value

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
    check_tensor(w_raw, raw, "w_raw", {
        "these are the raw scores q·k; pass them through a softmax to get weights.": scores,
        "w_raw should use the raw scores; you divided them by √d, which is w_scaled.": scaled,
        "these are the weights in 8 dimensions (16 and 8); the exercise stretches the vectors to 32.":
            torch.softmax(_toy_scores(8), dim=0),
    })
    check_tensor(w_scaled, scaled, "w_scaled", {
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


def stable_softmax_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch02-stable: ``fn(x, dim=-1)`` must equal ``torch.softmax`` without overflowing."""
    x = _probe_square()
    shifted = torch.exp(x - x.amax(dim=-1))  # the maxima broadcast along the wrong axis (no keepdim)
    check_tensor(fn(x.clone(), dim=-1), torch.softmax(x, dim=-1), "softmax of a small 3 × 3 matrix", {
        "each row must sum to 1: normalise along dim, not along dim 0.": torch.softmax(x, dim=0),
        "you subtracted the maxima without keepdim=True, so they broadcast along the wrong axis: "
        "use x.amax(dim=dim, keepdim=True).": shifted / shifted.sum(dim=-1, keepdim=True),
        "without keepdim=True the maxima and the sums broadcast along the wrong axis: "
        "use keepdim=True in both amax and sum.": shifted / shifted.sum(dim=-1),
        "you divided by the sum of the scores; softmax exponentiates first, then normalises.":
            x / x.sum(dim=-1, keepdim=True),
    })
    big = torch.tensor([[1000.0, 999.0, 998.0]])
    result = fn(big.clone(), dim=-1)
    _fail_if_not_finite(result, "[1000, 999, 998]",
                        "exp(1000) overflows to inf. Subtract each row's maximum before calling torch.exp.")
    check_tensor(result, torch.softmax(big, dim=-1), "softmax of [1000, 999, 998]")
    mixed = torch.tensor([[1000.0, 999.0], [-1000.0, -1001.0]])
    result = fn(mixed.clone(), dim=-1)
    _fail_if_not_finite(result, "rows of very different sizes",
                        "subtract each row's own maximum (x.amax(dim=dim, keepdim=True)), not one maximum "
                        "for the whole tensor: exp(-2000) is 0 and the second row becomes 0/0.")
    check_tensor(result, torch.softmax(mixed, dim=-1), "softmax of rows of very different sizes")
    check_tensor(fn(x.clone(), dim=0), torch.softmax(x, dim=0), "softmax along dim=0", {
        "dim=0 was ignored: use the dim argument in amax and sum instead of a fixed -1.": torch.softmax(x, dim=-1),
    })


def spread_keys() -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise ex-ch02-spread: 4000 query–key pairs in d = 64; queries N(0, 1), keys with standard deviation 2."""
    gen = torch.Generator().manual_seed(202)
    Q = torch.randn(N_PAIRS, D_SPREAD, generator=gen)  # (n, d)
    K = KEY_STD * torch.randn(N_PAIRS, D_SPREAD, generator=gen)  # (n, d)
    return Q, K


def spread_scale(scale: float, measured_var: float) -> None:
    """Exercise ex-ch02-spread: the factor that gives the scores unit variance, and their measured variance."""
    d, var_k = D_SPREAD, KEY_STD ** 2
    check_value(scale, 1 / math.sqrt(d * var_k), "scale", {
        "1/√d assumes unit-variance keys; here Var(q_i k_i) = 1 · 4, so Var(q·k) = 4d.": 1 / math.sqrt(d),
        "that divides by the variance 4d; to get unit variance divide by its square root √(4d).": 1 / (d * var_k),
        "you used the keys' standard deviation (2) where their variance (4) belongs: Var(q·k) = d · 4.":
            1 / math.sqrt(d * KEY_STD),
    })
    Q, K = spread_keys()
    raw_var = float((Q * K).sum(dim=-1).var())
    check_value(measured_var, 1.0, "measured_var", {
        "this is the variance of the unscaled scores; multiply each q·k by your scale first.": raw_var,
        "you scaled by 1/√d only; the variance of the scores is then about 4, not 1.": raw_var / d,
        "you multiplied the variance by the scale, but Var(c·s) = c²·Var(s): scale the scores, then take .var().":
            raw_var / math.sqrt(d * var_k),
    }, atol=0.1)
