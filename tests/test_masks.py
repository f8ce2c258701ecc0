"""Tests for attn_helpers.masks: padding and causal masks, and the three mask conventions (chapter 7)."""

import math

import pytest
import torch
import torch.nn.functional as F
from messages import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, raises_saying
from torch import nn

import attn_helpers as ah
from attn_helpers.masks import MASK_CONVENTIONS, causal_mask, convert_mask, padding_mask


def identity_mha(d: int) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(d, 1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d))
    return mha


# ---------------------------------------------------------------- padding_mask


def test_padding_mask_marks_real_tokens():
    mask = padding_mask([2, 4, 1])
    assert mask.dtype == torch.bool and mask.shape == (3, 4)
    assert mask.int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_padding_mask_accepts_tensor_and_max_len():
    mask = padding_mask(torch.tensor([1, 3]), max_len=5)
    assert mask.int().tolist() == [[1, 0, 0, 0, 0], [1, 1, 1, 0, 0]]
    assert padding_mask((0, 2)).int().tolist() == [[0, 0], [1, 1]]


@pytest.mark.parametrize("lengths, max_len, error, message", [
    ([], None, ValueError, "non-empty list"),
    ("abc", None, TypeError, "lengths must be a list of sequence lengths, got 'abc' (str)"),
    ([2, -1], None, ValueError, "every length " + NON_NEGATIVE_INTEGER + ", got -1"),
    ([2, 1.5], None, TypeError, "every length " + NON_NEGATIVE_INTEGER),
    ([2, True], None, TypeError, "every length " + NON_NEGATIVE_INTEGER + ", got True (a bool"),
    ([3, 5], 4, ValueError, "max_len=4"),
    ([3], 0, ValueError, "max_len " + POSITIVE_INTEGER),
    (torch.tensor([[1, 2]]), None, ValueError, "1-D integer tensor"),
    (torch.tensor([1.0, 2.0]), None, TypeError, "lengths must be whole numbers"),
])
def test_padding_mask_rejects_bad_input(lengths, max_len, error, message):
    with raises_saying(error, message):
        padding_mask(lengths, max_len)


def test_padded_batch_gives_each_sentence_its_own_attention():
    torch.manual_seed(0)
    seqs = [torch.randn(n, 6) for n in (5, 2, 3)]
    X = nn.utils.rnn.pad_sequence(seqs, batch_first=True)  # (3, 5, 6)
    out, w = ah.attention(X, X, X, mask=padding_mask([5, 2, 3])[:, None, :])
    for i, s in enumerate(seqs):
        alone, _ = ah.attention(s, s, s)
        assert torch.allclose(out[i, :len(s)], alone, atol=1e-6)
        assert (w[i, :, len(s):] == 0).all()


# ---------------------------------------------------------------- causal_mask


def test_causal_mask_square_is_lower_triangle():
    assert causal_mask(3).int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert causal_mask(3).dtype == torch.bool


def test_causal_mask_fewer_queries_aligns_bottom_right():
    mask = causal_mask(2, 4)
    assert mask.int().tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]


def test_causal_mask_matches_sdpa_is_causal_when_square():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 5, 4) for _ in range(3))
    ours, _ = ah.attention(q, k, v, mask=causal_mask(5))
    assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6)


@pytest.mark.parametrize("args, error, message", [
    ((0,), ValueError, "t_q " + POSITIVE_INTEGER),
    ((2.0,), TypeError, "t_q " + POSITIVE_INTEGER + ", got 2.0 (a float); pass t_q=2"),
    ((3, 2), ValueError, "Use t_k >= t_q"),
    ((2, 0), ValueError, "t_k " + POSITIVE_INTEGER),
])
def test_causal_mask_rejects_bad_sizes(args, error, message):
    with raises_saying(error, message):
        causal_mask(*args)


# ---------------------------------------------------------------- convert_mask


def test_conventions_round_trip():
    allowed = torch.tensor([[True, False], [True, True]])
    additive = torch.tensor([[0.0, -math.inf], [0.0, 0.0]])
    blocked = ~allowed
    spelled = {"allowed": allowed, "blocked": blocked, "additive": additive}
    for source in MASK_CONVENTIONS:
        for target in MASK_CONVENTIONS:
            assert torch.equal(convert_mask(spelled[source], source, target), spelled[target]), (source, target)


def test_convert_to_additive_respects_dtype_and_copies():
    allowed = torch.tensor([True, False])
    out = convert_mask(allowed, "allowed", "additive", dtype=torch.float64)
    assert out.dtype == torch.float64 and out.tolist() == [0.0, -math.inf]
    same = convert_mask(allowed, "allowed", "allowed")
    same[0] = False
    assert allowed[0], "converting to the same convention must not alias the input"


def test_all_three_conventions_give_the_same_attention():
    torch.manual_seed(2)
    X = torch.randn(4, 8)
    allowed = causal_mask(4)
    blocked, additive = convert_mask(allowed, "allowed", "blocked"), convert_mask(allowed, "allowed", "additive")
    reference, _ = ah.attention(X, X, X, mask=allowed)
    mha = identity_mha(8)
    with torch.no_grad():
        outs = [
            ah.attention(X, X, X, mask=additive)[0],
            F.scaled_dot_product_attention(X, X, X, attn_mask=allowed),
            F.scaled_dot_product_attention(X, X, X, attn_mask=additive),
            mha(X, X, X, attn_mask=blocked)[0],
            mha(X, X, X, attn_mask=additive)[0],
            mha(X[None], X[None], X[None], key_padding_mask=torch.tensor([[False, False, False, False]]),
                attn_mask=blocked)[0][0],
        ]
    for out in outs:
        assert torch.allclose(out, reference, atol=1e-6)


@pytest.mark.parametrize("mask, source, target, error, message", [
    ([True, False], "allowed", "blocked", TypeError, "must be a torch.Tensor"),
    (torch.tensor([True]), "allow", "blocked", ValueError, "source must be one of"),
    (torch.tensor([True]), "allowed", "padding", ValueError, "target must be one of"),
    (torch.tensor([1.0, 0.0]), "allowed", "blocked", TypeError, "use source='additive'"),
    (torch.tensor([1, 0]), "blocked", "allowed", TypeError, "mask.bool()"),
    (torch.tensor([True]), "additive", "allowed", TypeError, "say which"),
    (torch.tensor([0.0, -1e9]), "additive", "allowed", ValueError, "-1e9"),
    (torch.tensor([0.0, 0.5]), "additive", "blocked", ValueError, "no boolean equivalent"),
    (torch.tensor([True]), "allowed", "additive", TypeError, "floating-point dtype"),
])
def test_convert_mask_rejects_bad_input(mask, source, target, error, message):
    kwargs = {"dtype": torch.int64} if message == "floating-point dtype" else {}
    with pytest.raises(error, match=message):
        convert_mask(mask, source, target, **kwargs)


# ---------------------------------------------------------------- fully masked rows (chapter 7's table)


def test_fully_masked_row_behaviour_in_this_torch_version():
    torch.manual_seed(3)
    X = torch.randn(3, 4)
    allowed = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    out, w = ah.attention(X, X, X, mask=allowed)
    assert (w[1] == 0).all() and (out[1] == 0).all() and torch.isfinite(out).all()
    assert (F.scaled_dot_product_attention(X, X, X, attn_mask=allowed)[1] == 0).all()
    mha = identity_mha(4)
    blocked = convert_mask(allowed, "allowed", "blocked")
    with torch.no_grad():
        out_w, w_w = mha(X, X, X, attn_mask=blocked)
        out_nw, _ = mha(X, X, X, attn_mask=blocked, need_weights=False)
    assert torch.isnan(out_w[1]).all() and torch.isnan(w_w[1]).all()
    assert (out_nw[1] == 0).all()
    minus_1e9 = torch.zeros(3, 3).masked_fill(~allowed, -1e9)
    _, w_1e9 = ah.attention(X, X, X, mask=minus_1e9)
    assert torch.allclose(w_1e9[1], torch.full((3,), 1 / 3))
