"""attn_helpers.scaling: the measurements and figures of chapter 2."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from messages import INTEGER_AT_LEAST, INTEGER_BETWEEN, POSITIVE_INTEGER, POSITIVE_NUMBER, raises_saying

import attn_helpers as ah  # noqa: E402
from attn_helpers import scaling  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# dot_product_variance

def test_variance_grows_like_d_and_scaling_brings_it_to_one():
    dims = [2, 16, 128, 1024]
    raw, scaled = ah.scaling.dot_product_variance(dims, n_samples=4000, seed=0)
    assert raw.shape == scaled.shape == (4,)
    assert raw.dtype == torch.float64
    for d, v in zip(dims, raw.tolist(), strict=True):
        assert abs(v / d - 1) < 0.1, (d, v)
    assert torch.allclose(scaled, torch.ones(4, dtype=torch.float64), atol=0.1)
    assert torch.allclose(scaled * torch.tensor(dims, dtype=torch.float64), raw)


def test_variance_is_reproducible_and_depends_on_the_seed():
    a = ah.scaling.dot_product_variance([8, 64], n_samples=500, seed=3)
    b = ah.scaling.dot_product_variance([8, 64], n_samples=500, seed=3)
    c = ah.scaling.dot_product_variance([8, 64], n_samples=500, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("dims, error, match", [
    ([], ValueError, "non-empty list"),
    (8, TypeError, "dims must be a list of dimensions"),
    ([4, 0], ValueError, "every dimension in dims " + POSITIVE_INTEGER),
    ([4, 2.5], TypeError, "every dimension in dims " + POSITIVE_INTEGER),
    ([True], TypeError, "every dimension in dims " + POSITIVE_INTEGER),
])
def test_variance_rejects_bad_dims(dims, error, match):
    with raises_saying(error, match):
        ah.scaling.dot_product_variance(dims)


def test_variance_rejects_too_few_samples():
    with raises_saying(ValueError, "n_samples " + INTEGER_AT_LEAST + " 2"):
        ah.scaling.dot_product_variance([4], n_samples=1)


# softmax_jacobian

def test_jacobian_matches_autograd():
    s = torch.tensor([0.3, -1.2, 2.0, 0.5], dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, dim=-1), s)
    assert torch.allclose(ah.scaling.softmax_jacobian(torch.softmax(s, dim=-1)), expected)


def test_jacobian_of_a_batch_has_rows_summing_to_zero():
    w = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(1)), dim=-1)
    J = ah.scaling.softmax_jacobian(w)
    assert J.shape == (3, 5, 5)
    assert torch.allclose(J.sum(dim=-1), torch.zeros(3, 5), atol=1e-6)
    assert float(J.abs().max()) <= 0.25


def test_jacobian_vanishes_when_saturated():
    assert float(ah.scaling.softmax_jacobian(torch.tensor([1.0, 0.0, 0.0])).abs().max()) == 0.0


def test_jacobian_rejects_scores_and_non_tensors():
    with pytest.raises(ValueError, match="non-negative softmax outputs"):
        ah.scaling.softmax_jacobian(torch.tensor([1.5, -0.5]))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        ah.scaling.softmax_jacobian([0.5, 0.5])


# entropy

def test_entropy_of_uniform_and_one_hot_weights():
    assert math.isclose(float(ah.scaling.entropy(torch.full((8,), 1 / 8))), math.log(8), rel_tol=1e-6)
    h = ah.scaling.entropy(torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]))
    assert h.shape == (2,)
    assert not torch.isnan(h).any()
    assert torch.allclose(h, torch.tensor([0.0, math.log(2)]))


def test_entropy_along_another_dim():
    w = torch.tensor([[1.0, 0.5], [0.0, 0.5]])  # columns sum to 1
    assert torch.allclose(ah.scaling.entropy(w, dim=0), torch.tensor([0.0, math.log(2)]))


@pytest.mark.parametrize("weights, kwargs, error, match", [
    (torch.tensor([2.0, 1.0]), {}, ValueError, "must sum to 1"),
    (torch.tensor([1.5, -0.5]), {}, ValueError, "non-negative"),
    (torch.tensor([0.5, 0.5]), {"dim": 1}, ValueError, "dim " + INTEGER_BETWEEN + " -1 and 0"),
    (torch.tensor([0.5, 0.5]), {"dim": "last"}, TypeError, "dim " + INTEGER_BETWEEN + " -1 and 0"),
    (torch.tensor([1, 0]), {}, TypeError, "floating-point"),
])
def test_entropy_rejects_bad_input(weights, kwargs, error, match):
    with raises_saying(error, match):
        ah.scaling.entropy(weights, **kwargs)


# saturation_curves

def test_saturation_curves_show_vanishing_gradients_without_scaling():
    stats = ah.scaling.saturation_curves([2, 64, 1024], t=8, n_trials=200, seed=0)
    assert set(stats) == {"max_grad_raw", "max_grad_scaled", "entropy_raw", "entropy_scaled"}
    assert all(v.shape == (3,) for v in stats.values())
    assert float(stats["max_grad_raw"][-1]) < 1e-3 < 0.1 < float(stats["max_grad_scaled"][-1])
    assert float(stats["entropy_raw"][-1]) < 0.1 < 1.5 < float(stats["entropy_scaled"][-1]) <= math.log(8)
    assert torch.all(stats["entropy_raw"][1:] < stats["entropy_raw"][:-1])


def test_saturation_curves_reject_bad_sizes():
    with raises_saying(ValueError, "t " + INTEGER_AT_LEAST + " 2"):
        ah.scaling.saturation_curves([4], t=1)
    with pytest.raises(ValueError, match="n_trials"):
        ah.scaling.saturation_curves([4], n_trials=0)


# plot_curves

def test_plot_curves_draws_one_line_per_curve():
    ax = ah.scaling.plot_curves([2, 4, 8], {"predicted": [2, 4, 8], "measured": torch.tensor([2.1, 3.9, 8.2])},
                        "d", "variance", "A title", logy=True, dashed=["predicted"])
    assert [line.get_label() for line in ax.get_lines()] == ["predicted", "measured"]
    assert ax.get_lines()[0].get_linestyle() == "--"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "A title" and ax.get_xlabel() == "d" and ax.get_ylabel() == "variance"


def test_plot_curves_uses_a_given_axes_and_linear_scales():
    _, ax = plt.subplots()
    assert ah.scaling.plot_curves([1, 2], {"a": [0.1, 0.2]}, "x", "y", "t", ax=ax, logx=False) is ax
    assert ax.get_xscale() == "linear"


@pytest.mark.parametrize("curves, dashed, match", [
    ({}, (), "curves is empty"),
    ({"a": [1.0, 2.0]}, (), "has 2 values but x has 3"),
    ({"a": [1.0, 2.0, 3.0]}, ("b",), "not labels in curves"),
])
def test_plot_curves_rejects_bad_input(curves, dashed, match):
    with pytest.raises(ValueError, match=match):
        ah.scaling.plot_curves([1, 2, 3], curves, "x", "y", "t", dashed=dashed)


# plot_temperature

def test_plot_temperature_draws_a_bar_per_key_and_temperature():
    ax = ah.scaling.plot_temperature(torch.tensor([2.0, 1.0, 0.0]), [0.5, 1.0], ["a", "b", "c"])
    assert len(ax.patches) == 6
    heights = [p.get_height() for p in ax.patches[:3]]
    expected = torch.softmax(torch.tensor([4.0, 2.0, 0.0]), dim=0)
    assert torch.allclose(torch.tensor(heights, dtype=torch.float32), expected)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_ylabel() == "attention weight"


@pytest.mark.parametrize("scores, temps, labels, match", [
    (torch.ones(2, 3), [1.0], ["a", "b", "c"], "one row of shape"),
    (torch.ones(3), [1.0], ["a", "b"], "2 labels for 3 scores"),
    (torch.ones(3), [0.0], ["a", "b", "c"], POSITIVE_NUMBER),
    (torch.ones(3), [], ["a", "b", "c"], "temperatures is empty"),
])
def test_plot_temperature_rejects_bad_input(scores, temps, labels, match):
    with raises_saying(ValueError, match):
        ah.scaling.plot_temperature(scores, temps, labels)


def test_module_helpers_are_reached_through_the_module():
    for name in ("dot_product_variance", "softmax_jacobian", "entropy", "saturation_curves", "plot_curves",
                 "plot_temperature"):
        assert name in scaling.__all__ and getattr(ah.scaling, name) is getattr(scaling, name)
        assert name not in ah.__all__
