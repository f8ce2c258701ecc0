"""Chapter 2's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import math

import pytest
import torch

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


def test_stable_softmax_accepts_reference(capsys):
    check.stable_softmax_function(reference_softmax)
    assert capsys.readouterr().out.count("correct") == 4


@pytest.mark.parametrize("fn, hint", [
    (naive, "exp\\(1000\\) overflows"),
    (global_max, "each row's own maximum"),
    (no_keepdim, "without keepdim=True, so they broadcast"),
    (no_keepdim_anywhere, "use keepdim=True in both"),
    (always_dim0, "normalise along dim, not along dim 0"),
    (ignores_dim, "dim=0 was ignored"),
    (sum_of_scores, "exponentiates first"),
])
def test_stable_softmax_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.stable_softmax_function(fn)


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


@pytest.mark.parametrize("scale, hint", [
    (1 / 8, "1/√d assumes unit-variance keys"),
    (1 / 256, "divides by the variance"),
    (1 / math.sqrt(128), "standard deviation \\(2\\) where their variance"),
])
def test_spread_rejects_wrong_scale(scale, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.spread_scale(scale, 1.0)


def test_spread_rejects_wrong_measurement():
    Q, K = check.spread_keys()
    raw = float((Q * K).sum(dim=-1).var())
    for measured, hint in [(raw, "unscaled scores"), (raw / 64, "scaled by 1/√d only"),
                           (raw / 16, "multiplied the variance by the scale")]:
        with pytest.raises(CheckFailed, match=hint):
            check.spread_scale(1 / 16, measured)
    with pytest.raises(CheckFailed, match="should be a number"):
        check.spread_scale(1 / 16, "1.0")
