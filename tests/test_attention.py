"""attn_helpers.attention: softmax and attention, including every bad input the book promises to explain."""

import math

import pytest
import torch
from messages import INTEGER_BETWEEN, ONE_VALUE_PER_KEY, POSITIVE_NUMBER, raises_saying

import attn_helpers as ah


def test_softmax_matches_torch_and_survives_large_scores():
    x = torch.tensor([[1.0, 2.0, 3.0], [1000.0, 999.0, 0.0]])
    assert torch.allclose(ah.softmax(x), torch.softmax(x, dim=-1))
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)
    assert torch.isnan(naive[1]).any()  # the naive formula overflows...
    assert torch.isfinite(ah.softmax(x)).all()  # ...the stable one does not


def test_softmax_dim_and_masked_entries():
    x = torch.tensor([[0.0, -math.inf], [-math.inf, -math.inf]])
    out = ah.softmax(x, dim=-1)
    assert torch.equal(out, torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    y = torch.randn(3, 4)
    assert torch.allclose(ah.softmax(y, dim=0).sum(0), torch.ones(4))


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([1, 2]), "dtype torch.int64"),
    (torch.tensor([1.0, math.nan]), "NaN or \\+inf"),
    (torch.tensor([1.0, math.inf]), "NaN or \\+inf"),
])
def test_softmax_rejects_bad_input(bad, message):
    with pytest.raises((TypeError, ValueError), match=message):
        ah.softmax(bad)


def test_softmax_rejects_bad_dim():
    with raises_saying(ValueError, "dim " + INTEGER_BETWEEN + " -2 and 1 (a dimension of x, -1 for the last), got 2"):
        ah.softmax(torch.zeros(2, 2), dim=2)
    for bad in ("last", 1.0, True, None):
        with raises_saying(TypeError, "dim " + INTEGER_BETWEEN + " -2 and 1"):
            ah.softmax(torch.zeros(2, 2), dim=bad)


def test_softmax_takes_numpy_dims_and_any_shape_as_promised():
    import numpy as np

    x = torch.randn(3, 4)
    assert torch.allclose(ah.softmax(x, dim=np.int64(0)), torch.softmax(x, dim=0))
    assert torch.equal(ah.softmax(torch.tensor(3.0)), torch.tensor(1.0))  # one slice of one score
    assert ah.softmax(torch.empty(0, 3)).shape == (0, 3)                  # nothing to normalise
    assert torch.equal(ah.softmax(torch.full((2, 3), -math.inf)), torch.zeros(2, 3))


def test_softmax_keeps_gradients():
    x = torch.randn(2, 5, requires_grad=True)
    jac = torch.autograd.functional.jacobian(ah.softmax, x[0].detach())
    w = torch.softmax(x[0].detach(), dim=-1)
    assert torch.allclose(jac, torch.diag(w) - torch.outer(w, w), atol=1e-6)


def test_toy_example_of_chapter_1():
    q = torch.tensor([[1.0, 1.0]])
    k = torch.tensor([[2.0, 2.0], [1.0, 1.0]])
    v = torch.tensor([[3.0, 3.0], [4.0, 4.0]])
    out, w = ah.attention(q, k, v, scale=1.0)
    assert torch.allclose(w, torch.tensor([[0.8808, 0.1192]]), atol=1e-4)
    assert torch.allclose(out, torch.tensor([[3.1192, 3.1192]]), atol=1e-4)


def test_default_scale_is_one_over_sqrt_dk():
    q, k, v = torch.randn(4, 8), torch.randn(5, 8), torch.randn(5, 3)
    _, w = ah.attention(q, k, v)
    assert torch.allclose(w, torch.softmax(q @ k.T / math.sqrt(8), dim=-1))


@pytest.mark.parametrize("q_shape, kv_lead", [((5, 4), ()), ((2, 5, 4), (2,)), ((3, 8, 5, 4), (3, 1))])
def test_2d_3d_and_broadcast_shapes(q_shape, kv_lead):
    q = torch.randn(q_shape)
    k, v = torch.randn(*kv_lead, 6, 4), torch.randn(*kv_lead, 6, 7)
    out, w = ah.attention(q, k, v)
    lead = torch.broadcast_shapes(q_shape[:-2], kv_lead)
    assert out.shape == (*lead, q_shape[-2], 7)
    assert w.shape == (*lead, q_shape[-2], 6)
    assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(out, ref, atol=1e-5)


def test_bool_and_additive_masks_agree_and_match_sdpa():
    q, k, v = torch.randn(2, 4, 3), torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    keep = torch.rand(4, 5) > 0.3
    keep[:, 0] = True
    additive = torch.zeros(4, 5).masked_fill(~keep, -math.inf)
    out_bool, w_bool = ah.attention(q, k, v, mask=keep)
    out_add, w_add = ah.attention(q, k, v, mask=additive)
    assert torch.allclose(out_bool, out_add) and torch.allclose(w_bool, w_add)
    assert (w_bool[:, ~keep] == 0).all()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert torch.allclose(out_bool, ref, atol=1e-5)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 2)
    keep = torch.ones(3, 3, dtype=torch.bool)
    keep[1] = False
    out, w = ah.attention(q, k, v, mask=keep)
    assert torch.equal(w[1], torch.zeros(3)) and torch.equal(out[1], torch.zeros(2))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("args, error, message", [
    ((torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 4)), ValueError, "d_k=4 features but keys have 5"),
    ((torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 4)), ValueError,
     "keys describe 3 tokens but values describe 2"),
    ((torch.randn(4), torch.randn(3, 4), torch.randn(3, 4)), ValueError, "at least 2 dimension"),
    ((torch.randn(2, 3, 4), torch.randn(3, 3, 4), torch.randn(3, 3, 4)), ValueError, "do not broadcast"),
    ((torch.empty(0, 4), torch.randn(3, 4), torch.randn(3, 4)), ValueError, "is empty"),
    ((torch.ones(3, 4, dtype=torch.long), torch.randn(3, 4), torch.randn(3, 4)), TypeError, r"queries.float\(\)"),
    ((torch.full((3, 4), math.nan), torch.randn(3, 4), torch.randn(3, 4)), ValueError, "contains NaN"),
    ((torch.randn(3, 4), torch.full((3, 4), math.inf), torch.randn(3, 4)), ValueError, "contains inf"),
    (([[1.0]], torch.randn(3, 4), torch.randn(3, 4)), TypeError, "must be a torch.Tensor"),
])
def test_attention_explains_bad_input(args, error, message):
    with pytest.raises(error, match=message):
        ah.attention(*args)


def test_attention_explains_bad_masks_and_scales():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3\) does not broadcast"):
        ah.attention(q, q, q, mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask.bool"):
        ah.attention(q, q, q, mask=torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        ah.attention(q, q, q, mask=torch.full((3, 3), math.inf))
    with raises_saying(ValueError, "scale " + POSITIVE_NUMBER):
        ah.attention(q, q, q, scale=0.0)


# ---------------------------------------------------------------- loop_attention (chapter 7)


@pytest.mark.parametrize("t_q, t_k, d_k, d_v", [(1, 1, 1, 1), (5, 5, 4, 4), (3, 7, 6, 2)])
def test_loop_attention_equals_book_attention(t_q, t_k, d_k, d_v):
    gen = torch.Generator().manual_seed(t_q * 100 + t_k)
    q = torch.randn(t_q, d_k, generator=gen)
    k, v = torch.randn(t_k, d_k, generator=gen), torch.randn(t_k, d_v, generator=gen)
    out, w = ah.loop_attention(q, k, v)
    ref_out, ref_w = ah.attention(q, k, v)
    assert out.shape == (t_q, d_v) and w.shape == (t_q, t_k) and out.dtype == q.dtype
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(w, ref_w, atol=1e-6)


def test_loop_attention_scale_and_large_scores():
    q = torch.tensor([[100.0, 0.0]])
    k = torch.tensor([[100.0, 0.0], [0.0, 100.0]])
    v = torch.tensor([[1.0], [2.0]])
    out, w = ah.loop_attention(q, k, v, scale=1.0)  # scores 1e4 and 0: must not overflow
    assert torch.allclose(w, torch.tensor([[1.0, 0.0]])) and torch.allclose(out, torch.tensor([[1.0]]))


@pytest.mark.parametrize("args, error, message", [
    ((torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, 2, 1)), ValueError, "must be 2-D"),
    ((torch.randn(2, 3), torch.randn(4, 5), torch.randn(4, 2)), ValueError, "same d_k"),
    ((torch.randn(2, 3), torch.randn(4, 3), torch.randn(5, 2)), ValueError, ONE_VALUE_PER_KEY),
    (([[1.0]], torch.randn(1, 1), torch.randn(1, 1)), TypeError, "must be a torch.Tensor"),
    ((torch.ones(2, 2, dtype=torch.int64), torch.randn(1, 2), torch.randn(1, 1)), TypeError, "floating-point"),
    ((torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, 2), True), TypeError, "scale " + POSITIVE_NUMBER),
    ((torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, 2), -1.0), ValueError, "scale " + POSITIVE_NUMBER),
])
def test_loop_attention_rejects_bad_input(args, error, message):
    with pytest.raises(error, match=message):
        ah.loop_attention(*args)
