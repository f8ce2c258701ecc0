"""Tests for attn_helpers.depth: rank collapse of stacked attention (chapter 8)."""

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from attn_helpers import depth


def test_collapse_residual_values():
    assert depth.collapse_residual(torch.ones(4, 3) * torch.tensor([1.0, 2.0, 3.0])) == 0.0  # equal rows
    assert abs(depth.collapse_residual(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) - 1.0) < 1e-12  # mean row 0
    X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    s = torch.linalg.svdvals(X.double())
    rank1_distance = float(s[1:].norm() / s.norm())
    assert depth.collapse_residual(X) >= rank1_distance - 1e-12  # an upper bound on the rank-1 distance


def test_plain_attention_collapses_and_residual_layernorm_does_not():
    X = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))  # scores of order 1: soft weights
    plain = depth.stack_attention(X, layers=8)
    kept = depth.stack_attention(X, layers=8, residual=True, layer_norm=True)
    assert len(plain) == len(kept) == 9 and plain[0] == kept[0]
    assert plain[-1] < 1e-10 < 0.1 < kept[-1]
    assert all(b <= a + 1e-12 for a, b in zip(plain[:4], plain[1:5], strict=True))


@pytest.mark.parametrize("call, message", [
    (lambda: depth.collapse_residual(torch.zeros(3, 2)), "all zeros"),
    (lambda: depth.collapse_residual(torch.zeros(2, 3, 2)), r"one sequence of shape \(t, d\)"),
    (lambda: depth.stack_attention(torch.ones(3, 2), layers=0), "layers must be a positive integer"),
    (lambda: depth.stack_attention(torch.ones(2, 3, 2), layers=2), r"one sequence of shape \(t, d\)"),
    (lambda: depth.plot_collapse({}, "t"), "curves is empty"),
])
def test_bad_input_is_explained(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_plot_collapse():
    ax = depth.plot_collapse({"a": [1.0, 0.1, 0.01], "b": [1.0, 0.9, 0.8]}, "title")
    assert len(ax.lines) == 2 and ax.get_yscale() == "log"
