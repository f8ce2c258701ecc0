"""Tests for attn_helpers.position: sinusoidal encodings, RoPE and permutation equivariance (chapter 8)."""

import math

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from messages import MUST_BE_EVEN, POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers import position


def test_sinusoidal_encoding_follows_the_formula():
    pe = ah.position.sinusoidal_encoding(5, 6)
    assert pe.shape == (5, 6) and pe.dtype == torch.get_default_dtype()
    for p in range(5):
        for i in range(3):
            theta = 10000 ** (-2 * i / 6)
            assert math.isclose(pe[p, 2 * i], math.sin(p * theta), abs_tol=1e-6)
            assert math.isclose(pe[p, 2 * i + 1], math.cos(p * theta), abs_tol=1e-6)


def test_sinusoidal_dot_products_depend_on_the_offset_only():
    pe = ah.position.sinusoidal_encoding(60, 16).double()
    dots = torch.stack([pe[m] @ pe[m + 7] for m in range(0, 50, 5)])
    assert torch.allclose(dots, dots[0].expand_as(dots), atol=1e-5)


def test_rope_matches_an_explicit_rotation_and_keeps_lengths():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    out = ah.position.rope(x, [0, 1, 5])
    assert torch.equal(out[0], x[0])                        # position 0: no rotation
    for p, row in zip([1, 5], [1, 2], strict=True):
        for i, theta in enumerate([1.0, 10000 ** -0.5]):
            c, s = math.cos(p * theta), math.sin(p * theta)
            a, b = x[row, 2 * i], x[row, 2 * i + 1]
            assert math.isclose(out[row, 2 * i], c * a - s * b, abs_tol=1e-5)
            assert math.isclose(out[row, 2 * i + 1], s * a + c * b, abs_tol=1e-5)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_rope_scores_depend_on_the_offset_only():
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 6, 8, generator=gen), torch.randn(2, 6, 8, generator=gen)  # batched (b, t, d)
    pos = torch.arange(6)
    scores = ah.position.rope(q, pos) @ ah.position.rope(k, pos).transpose(-2, -1)
    moved = ah.position.rope(q, pos + 37) @ ah.position.rope(k, pos + 37).transpose(-2, -1)
    assert (scores - moved).abs().max() < 1e-5
    assert not torch.allclose(scores, q @ k.transpose(-2, -1), atol=1e-3)  # it does change the scores


@pytest.mark.parametrize("call, error, message", [
    (lambda: ah.position.rope(torch.zeros(3, 5)), ValueError, "the last dimension of x " + MUST_BE_EVEN),
    (lambda: ah.position.rope(torch.zeros(3, 4), [0, 1]), ValueError, "one per token"),
    (lambda: ah.position.rope(torch.zeros(4)), ValueError, "at least 2 dimension"),
    (lambda: ah.position.rope(torch.zeros(3, 4, dtype=torch.long)), TypeError, "floating-point"),
    (lambda: ah.position.rope(torch.zeros(3, 4), base=1), ValueError, "larger than 1"),
    (lambda: ah.position.sinusoidal_encoding(0, 4), ValueError, "t " + POSITIVE_INTEGER),
    (lambda: ah.position.sinusoidal_encoding(4, 3), ValueError, "d " + MUST_BE_EVEN),
    (lambda: ah.position.rope(torch.zeros(3, 4), torch.tensor([True, False, True])), TypeError, "dtype torch.bool"),
])
def test_bad_input_is_explained(call, error, message):
    with raises_saying(error, message):
        call()


def test_permutation_equivariance_detects_positions():
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(7, 6, generator=gen)
    assert ah.position.is_permutation_equivariant(lambda Z: ah.attention(Z, Z, Z)[0], X, gen)
    pe = ah.position.sinusoidal_encoding(7, 6)
    assert not ah.position.is_permutation_equivariant(lambda Z: ah.attention(Z + pe, Z + pe, Z + pe)[0], X, gen)
    with raises_saying(TypeError, "fn must return a tensor, got tuple", "wrap it"):
        ah.position.is_permutation_equivariant(lambda Z: ah.attention(Z, Z, Z), X, gen)
    with pytest.raises(ValueError, match=r"one sequence of shape \(t, d\)"):
        ah.position.is_permutation_equivariant(lambda Z: Z, torch.zeros(2, 3, 4))


def test_plot_score_by_offset():
    offsets = torch.arange(-3, 4)
    ax = position.plot_score_by_offset(offsets, {"a": torch.zeros(7), "b": torch.ones(7)}, "t")
    assert len(ax.lines) == 2 and ax.get_title() == "t"
    with pytest.raises(ValueError, match="one score per offset"):
        position.plot_score_by_offset(offsets, {"a": torch.zeros(3)}, "t")
    with pytest.raises(ValueError, match="curves is empty"):
        position.plot_score_by_offset(offsets, {}, "t")
