"""Tests for attn_helpers.depth: rank collapse of stacked attention (chapter 8)."""

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from messages import POSITIVE_INTEGER, raises_saying

from attn_helpers import depth


def test_collapse_residual_values():
    assert depth.collapse_residual(torch.ones(4, 3) * torch.tensor([1.0, 2.0, 3.0])) == 0.0  # equal rows
    assert abs(depth.collapse_residual(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) - 1.0) < 1e-12  # mean row 0
    X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    s = torch.linalg.svdvals(X.double())
    rank1_distance = float(s[1:].norm() / s.norm())
    assert depth.collapse_residual(X) >= rank1_distance - 1e-12  # an upper bound on the rank-1 distance


def test_plain_attention_collapses_and_residual_layernorm_slows_it():
    X = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))  # scores of order 1: soft weights
    plain = depth.stack_attention(X, layers=8)
    kept = depth.stack_attention(X, layers=8, residual=True, layer_norm=True)
    assert len(plain) == len(kept) == 9 and plain[0] == kept[0]
    assert plain[-1] < 1e-10 < 0.1 < kept[-1]
    assert all(b <= a + 1e-12 for a, b in zip(plain[:4], plain[1:5], strict=True))


def test_residual_with_layernorm_only_slows_the_collapse_to_one_over_depth():  # chapter 8's claim, on other input
    X = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    r = depth.stack_attention(X, layers=200, residual=True, layer_norm=True)
    assert r[200] < r[100] < r[50] < r[12]                                  # it keeps falling: not stopped
    assert abs(r[200] * 200 / (r[100] * 100) - 1) < 0.05                     # r·L levels off: r ~ c/L
    assert r[12] > 1e-3                                                     # but nowhere near doubly exponential


def test_attention_layers_returns_every_state():
    X = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
    states = depth.attention_layers(X, layers=3, residual=True)
    assert len(states) == 4 and all(S.shape == (5, 4) and S.dtype == torch.float64 for S in states)
    assert torch.equal(states[0], X.double())
    A = torch.softmax(states[0] @ states[0].T / 2.0, dim=-1) @ states[0]     # one layer by hand, √d = 2
    assert torch.allclose(states[1], states[0] + A)
    assert depth.stack_attention(X, 3, residual=True) == [depth.collapse_residual(S) for S in states]


@pytest.mark.parametrize("call, message", [
    (lambda: depth.collapse_residual(torch.zeros(3, 2)), "all zeros"),
    (lambda: depth.collapse_residual(torch.zeros(2, 3, 2)), r"one sequence of shape \(t, d\)"),
    (lambda: depth.stack_attention(torch.ones(3, 2), layers=0), "layers " + POSITIVE_INTEGER),
    (lambda: depth.stack_attention(torch.ones(2, 3, 2), layers=2), r"one sequence of shape \(t, d\)"),
    (lambda: depth.plot_collapse({}, "t"), "curves is empty"),
    (lambda: depth.plot_collapse({"a": [0.5]}, "t", log_depth=True), "no value after layer 1"),
])
def test_bad_input_is_explained(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_bool_is_the_wrong_kind_of_layer_count():
    with raises_saying(TypeError, "layers " + POSITIVE_INTEGER, "got True (a bool, not a number)"):
        depth.attention_layers(torch.ones(3, 2), layers=True)


def test_plot_collapse():
    ax = depth.plot_collapse({"a": [1.0, 0.1, 0.01], "b": [1.0, 0.9, 0.8]}, "title")
    assert len(ax.lines) == 2 and ax.get_yscale() == "log" and ax.get_xscale() == "linear"
    assert list(ax.lines[0].get_xdata()) == [0, 1, 2]
    ax = depth.plot_collapse({"a": [1.0, 0.1, 0.01]}, "title", log_depth=True)
    assert ax.get_xscale() == "log" and list(ax.lines[0].get_xdata()) == [1, 2]  # from layer 1: log(0) is not drawn
