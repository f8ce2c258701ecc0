"""Chapter 2's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import functools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attn_helpers as ah
from attn_helpers.attention import safe_softmax
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch02 as check

# ex-ch02-predict: chapter 1's toy in 32 dimensions

SCORES_32 = torch.tensor([64.0, 32.0])
RAW = torch.softmax(SCORES_32, dim=0)
SCALED = torch.softmax(SCORES_32 / math.sqrt(32), dim=0)


def test_stretched_toy_accepts_reference(capsys):
    check.stretched_toy_weights(RAW, SCALED)
    out = capsys.readouterr().out
    assert "✓ w_raw: correct" in out and "✓ w_scaled: correct" in out


@pytest.mark.parametrize("w_raw, w_scaled, hint", [
    (SCORES_32, SCALED, "raw scores q·k"),
    (SCALED, SCALED, "you divided them by √d"),
    (torch.softmax(torch.tensor([16.0, 8.0]), dim=0), SCALED, "weights in 8 dimensions"),
    (RAW, RAW, "not scaled"),
    (RAW, torch.softmax(SCORES_32 / 32, dim=0), "you divided by d;"),
    (RAW, torch.softmax(torch.tensor([16.0, 8.0]) / math.sqrt(8), dim=0), "scaled weights in 8 dimensions"),
    (RAW, SCORES_32 / math.sqrt(32), "these are the scaled scores"),
])
def test_stretched_toy_rejects_mistakes(w_raw, w_scaled, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.stretched_toy_weights(w_raw, w_scaled)


def test_stretched_toy_rejects_wrong_shape():
    with pytest.raises(CheckFailed, match="has shape \\(1, 2\\), expected \\(2,\\)"):
        check.stretched_toy_weights(RAW.unsqueeze(0), SCALED)


# ex-ch02-stable: a stable softmax

def reference_softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def naive(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def global_max(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


def no_keepdim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim))
    return e / e.sum(dim=dim, keepdim=True)


def no_keepdim_anywhere(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim))
    return e / e.sum(dim=dim)


def always_dim0(x, dim=-1):
    return reference_softmax(x, dim=0)


def ignores_dim(x, dim=-1):
    return reference_softmax(x, dim=-1)


def sum_of_scores(x, dim=-1):
    return x / x.sum(dim=dim, keepdim=True)


def testsafe_softmax_accepts_reference(capsys):
    check.stable_softmax_function(reference_softmax)
    assert capsys.readouterr().out.count("correct") == 5


@pytest.mark.parametrize("fn, hint", [
    (naive, "exp\\(1000\\) overflows"),
    (global_max, "each row's own maximum"),
    (no_keepdim, "reduced dimension dropped, so they broadcast along the wrong axis"),
    (no_keepdim_anywhere, "as a dimension of size 1, in both the maximum and the sum"),
    (always_dim0, "normalise along dim, not along dim 0"),
    (ignores_dim, "dim=0 was ignored"),
    (sum_of_scores, "exponentiates first"),
    (lambda x, dim=-1: (e := torch.exp(x - x.amin(dim, keepdim=True))) / e.sum(dim, keepdim=True), "not its minimum"),
    (lambda x, dim=-1: (e := torch.exp(x - x.mean(dim, keepdim=True))) / e.sum(dim, keepdim=True), "not its minimum"),
])
def testsafe_softmax_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.stable_softmax_function(fn)


@pytest.mark.parametrize("fn", [
    lambda x, dim=-1: torch.softmax(x, dim=dim),
    lambda x, dim=-1: F.softmax(x, dim=dim),
    lambda x, dim=-1: x.softmax(dim),
    lambda x, dim=-1: torch.nn.Softmax(dim=dim)(x),
    lambda x, dim=-1: torch.exp(F.log_softmax(x, dim=dim)),
    lambda x, dim=-1: torch.special.softmax(x, dim),
])
def testsafe_softmax_rejects_pytorchs_softmax(fn):
    with pytest.raises(CheckFailed, match="calls PyTorch's softmax"):
        check.stable_softmax_function(fn)


@pytest.mark.parametrize("shortcut", [
    lambda x, dim=-1: torch.exp(x - torch.logsumexp(x, dim, keepdim=True)),
    lambda x, dim=-1: torch.exp(x - torch.logcumsumexp(x, dim).narrow(dim, -1, 1)),
    lambda x, dim=-1: torch.exp(x - functools.reduce(torch.logaddexp, x.unbind(dim)).unsqueeze(dim)),
], ids=["logsumexp", "logcumsumexp", "logaddexp"])
def testsafe_softmax_rejects_a_log_sum_exp_under_any_name(shortcut):
    x = torch.randn(3, 4)
    assert torch.allclose(shortcut(x), torch.softmax(x, -1), atol=1e-6)  # right values, by the shortcut
    with pytest.raises(CheckFailed, match="calls a log-sum-exp"):
        check.stable_softmax_function(shortcut)


def testsafe_softmax_rejects_ah_softmax():
    with pytest.raises(CheckFailed, match="calls ah.softmax"):
        check.stable_softmax_function(lambda x, dim=-1: ah.softmax(x, dim=dim))


def attention_weights(x, dim=-1):  # the book's softmax, reached through attention with identity keys
    eye = torch.eye(x.shape[-1])
    return ah.attention(x, eye, eye, scale=1.0)[1]


@pytest.mark.parametrize("fn, name", [
    (attention_weights, "ah.attention"),
    (lambda x, dim=-1: safe_softmax(x, dim), "ah.softmax"),
    (lambda x, dim=-1: ah.loop_attention(x, torch.eye(x.shape[-1]), torch.eye(x.shape[-1]), scale=1.0)[1],
     "ah.loop_attention"),
    (lambda x, dim=-1: ah.merge.finish_partial(ah.merge.partial_attention(x, torch.eye(x.shape[-1]),
                                                                          torch.eye(x.shape[-1]), scale=1.0)),
     "ah.merge"),
])
def testsafe_softmax_rejects_the_books_softmax_by_any_route(fn, name):
    with pytest.raises(CheckFailed, match=f"calls {name}"):
        check.stable_softmax_function(fn)


def testsafe_softmax_accepts_other_stable_forms(capsys):
    def with_max_and_division_in_place(x, dim=-1):
        e = (x - x.max(dim=dim, keepdim=True).values).exp()
        e /= e.sum(dim=dim, keepdim=True)
        return e

    check.stable_softmax_function(with_max_and_division_in_place)
    assert capsys.readouterr().out.count("correct") == 5


# ex-ch02-spread: keys with standard deviation 2

def reference_spread():
    scale = 1 / math.sqrt(64 * 4)
    Q, K = check.spread_keys()
    return scale, float(((Q * K).sum(dim=-1) * scale).var())


def test_spread_keys_are_reproducible():
    (q1, k1), (q2, k2) = check.spread_keys(), check.spread_keys()
    assert q1.shape == k1.shape == (4000, 64)
    assert torch.equal(q1, q2) and torch.equal(k1, k2)
    assert abs(float(k1.std()) - 2.0) < 0.05


def test_spread_accepts_reference(capsys):
    check.spread_scale(*reference_spread())
    out = capsys.readouterr().out
    assert "✓ scale: correct" in out and "✓ measured_var: correct" in out


def test_spread_accepts_other_correct_measurements(capsys):
    scale, _ = reference_spread()
    Q, K = check.spread_keys()
    scores = (Q * K).sum(dim=-1) * scale
    measurements = [
        np.float32(scores.var()),  # a NumPy scalar
        scores.var(),  # a 0-d tensor
        float(torch.einsum("nd,nd->n", Q, K).var()) * scale ** 2,  # Var(c·s) = c²·Var(s)
        float(np.var(scores.numpy())),  # NumPy's population variance (divides by n, not n - 1)
        float((Q @ K.T).diagonal().mul(scale).var()),
    ]
    for measured in measurements:
        check.spread_scale(scale, measured)
    assert capsys.readouterr().out.count("✓ measured_var: correct") == len(measurements)


@pytest.mark.parametrize("scale, hint", [
    (1 / 8, "1/√d assumes keys of variance 1"),
    (1 / 256, "divides by the variance"),
    (1 / math.sqrt(128), "standard deviation where their variance"),
    (16.0, "the number to divide by"),
])
def test_spread_rejects_wrong_scale(scale, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.spread_scale(scale, 1.0)


def test_spread_rejects_wrong_measurement():
    scale, right = reference_spread()
    Q, K = check.spread_keys()
    raw = float((Q * K).sum(dim=-1).var())
    for measured, hint in [
        (raw, "unscaled scores"),
        (raw / 64, "scaled by 1/√d only"),
        (raw / 16, "multiplied the variance by scale"),
        (float(((Q * K).sum(dim=-1) * scale).std()), "standard deviation of the scaled scores"),
        (1.0, "designed to give, not a measurement"),
        (float(((Q @ K.T) * scale).var()), "every query against every key"),
        (float(((Q * K).sum(dim=0) * scale).var()), "summed over the 4000 pairs"),
    ]:
        with pytest.raises(CheckFailed, match=hint):
            check.spread_scale(scale, measured)
    with pytest.raises(CheckFailed, match="should be a number"):
        check.spread_scale(scale, "1.0")
    assert abs(right - 1.0) > 0.02  # so a typed 1.0 and 0.95 are both far outside the tolerance
    for typed in (0.95, 1.05, right + 0.005):
        with pytest.raises(CheckFailed, match="measured_var = .* is not right"):
            check.spread_scale(scale, typed)
