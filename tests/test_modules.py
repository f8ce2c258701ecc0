"""Tests for attn_helpers.modules: SelfAttentionHead (chapter 4) and MultiHeadAttention (chapter 5)."""

import math

import pytest
import torch
from messages import DOES_NOT_DIVIDE, POSITIVE_INTEGER, raises_saying
from torch import nn

import attn_helpers as ah
from attn_helpers.modules import MultiHeadAttention, SelfAttentionHead


def identity_head(d: int) -> SelfAttentionHead:
    head = SelfAttentionHead(d, d)
    with torch.no_grad():
        for lin in (head.W_q, head.W_k, head.W_v):
            lin.weight.copy_(torch.eye(d))
    return head


def identity_mha(d: int, h: int) -> MultiHeadAttention:
    mha = MultiHeadAttention(d, h)
    with torch.no_grad():
        for lin in (mha.W_q, mha.W_k, mha.W_v, mha.W_o):
            lin.weight.copy_(torch.eye(d))
    return mha


# ---------------------------------------------------------------- SelfAttentionHead


def test_head_attributes_and_shapes_2d_and_3d():
    torch.manual_seed(0)
    head = SelfAttentionHead(8, 4, d_v=6)
    assert head.W_q.weight.shape == (4, 8) and head.W_k.weight.shape == (4, 8)
    assert head.W_v.weight.shape == (6, 8) and head.W_q.bias is None
    out, w = head(torch.randn(5, 8))
    assert out.shape == (5, 6) and w.shape == (5, 5)
    out, w = head(torch.randn(3, 5, 8))
    assert out.shape == (3, 5, 6) and w.shape == (3, 5, 5)
    assert torch.allclose(w.sum(-1), torch.ones(3, 5))
    assert SelfAttentionHead(8, 4).W_v.out_features == 4
    assert SelfAttentionHead(8, 4, bias=True).W_q.bias is not None


def test_head_with_identity_projections_is_plain_attention():
    torch.manual_seed(1)
    x = torch.randn(2, 6, 5)
    out, w = identity_head(5)(x)
    ref_out, ref_w = ah.attention(x, x, x)
    assert torch.allclose(out, ref_out, atol=1e-6) and torch.allclose(w, ref_w, atol=1e-6)
    ref = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(5), dim=-1)
    assert torch.allclose(w, ref, atol=1e-6)


def test_head_matches_manual_projection_and_scale_uses_d_k():
    torch.manual_seed(2)
    head = SelfAttentionHead(6, 3)
    x = torch.randn(4, 6)
    q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T
    w = torch.softmax(q @ k.T / math.sqrt(3), dim=-1)
    out, weights = head(x)
    assert torch.allclose(weights, w, atol=1e-6) and torch.allclose(out, w @ v, atol=1e-6)


def test_head_mask():
    torch.manual_seed(3)
    head = SelfAttentionHead(4, 4)
    x = torch.randn(2, 5, 4)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    _, w = head(x, mask=causal)
    assert torch.all(w[:, ~causal] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(2, 5))


def test_head_bad_input():
    head = SelfAttentionHead(4, 2)
    with pytest.raises(ValueError, match="d_model=4"):
        head(torch.randn(5, 3))
    with pytest.raises(ValueError, match="at least 2 dimension"):
        head(torch.randn(4))
    with pytest.raises(TypeError, match=r"\.float\(\)"):
        head(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="does not broadcast"):
        head(torch.randn(5, 4), mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):  # would silently add a batch dimension
        head(torch.randn(5, 4), mask=torch.ones(2, 5, 5, dtype=torch.bool))
    with raises_saying(ValueError, "d_k " + POSITIVE_INTEGER):
        SelfAttentionHead(4, 0)


# ---------------------------------------------------------------- MultiHeadAttention


def test_mha_attributes_and_shapes_2d_and_3d():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3)
    assert mha.num_heads == 3 and mha.d_k == 4
    for lin in (mha.W_q, mha.W_k, mha.W_v, mha.W_o):
        assert lin.weight.shape == (12, 12) and lin.bias is None
    out, w = mha(torch.randn(2, 5, 12))
    assert out.shape == (2, 5, 12) and w.shape == (2, 3, 5, 5)
    out, w = mha(torch.randn(5, 12))
    assert out.shape == (5, 12) and w.shape == (3, 5, 5)
    assert MultiHeadAttention(12, 3, bias=True).W_o.bias is not None


def test_mha_one_head_with_identities_is_plain_attention():
    torch.manual_seed(4)
    x = torch.randn(2, 6, 8)
    out, w = identity_mha(8, 1)(x)
    ref_out, ref_w = ah.attention(x, x, x)
    assert torch.allclose(out, ref_out, atol=1e-6) and torch.allclose(w[:, 0], ref_w, atol=1e-6)


def test_mha_heads_use_consecutive_row_blocks():
    """Head i = attention on columns i*d_k:(i+1)*d_k, the layout of nn.MultiheadAttention."""
    torch.manual_seed(5)
    x = torch.randn(2, 5, 8)
    out, w = identity_mha(8, 2)(x)
    halves = [ah.attention(x[..., s], x[..., s], x[..., s]) for s in (slice(0, 4), slice(4, 8))]
    assert torch.allclose(w[:, 0], halves[0][1], atol=1e-6)
    assert torch.allclose(w[:, 1], halves[1][1], atol=1e-6)
    assert torch.allclose(out, torch.cat([halves[0][0], halves[1][0]], dim=-1), atol=1e-6)


def test_mha_matches_torch_multihead_attention():
    torch.manual_seed(6)
    d, h = 12, 3
    mha = MultiHeadAttention(d, h)
    ref = nn.MultiheadAttention(d, h, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
    x = torch.randn(2, 7, d)
    out, w = mha(x)
    ref_out, ref_w = ref(x, x, x, average_attn_weights=False)
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(w, ref_w, atol=1e-5)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    out, w = mha(x, mask=causal)
    ref_out, ref_w = ref(x, x, x, attn_mask=~causal, average_attn_weights=False)  # torch: True = blocked
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(w, ref_w, atol=1e-5)


def test_mha_masks():
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(3, 5, 8)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    _, w = mha(x, mask=causal)
    assert torch.all(w[:, :, ~causal] == 0)
    padding = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    _, w = mha(x, mask=padding[:, None, None, :])  # (b, 1, 1, t_k)
    assert torch.all(w[1, :, :, 3:] == 0) and torch.all(w[2, :, :, 2:] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(3, 2, 5))
    additive = torch.zeros(5, 5).masked_fill(~causal, -math.inf)
    assert torch.allclose(mha(x, mask=additive)[0], mha(x, mask=causal)[0])
    _, w = mha(x[0], mask=causal)  # unbatched input, (t, t) mask
    assert w.shape == (2, 5, 5) and torch.all(w[:, ~causal] == 0)


def test_mha_key_value_different_from_query():
    torch.manual_seed(8)
    mha = MultiHeadAttention(8, 4)
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    out, w = mha(query, memory)
    assert out.shape == (2, 3, 8) and w.shape == (2, 4, 3, 6)
    assert torch.allclose(mha(query, memory, memory)[0], out)
    value = torch.randn(2, 6, 8)
    out2, w2 = mha(query, memory, value)
    assert torch.allclose(w2, w) and not torch.allclose(out2, out)
    out, w = mha(query[0], memory[0])
    assert out.shape == (3, 8) and w.shape == (4, 3, 6)


def test_mha_heads_must_divide_d_model():
    with raises_saying(ValueError, "num_heads=5 " + DOES_NOT_DIVIDE + " d_model=12", "divisors"):
        MultiHeadAttention(12, 5)
    with raises_saying(ValueError, "num_heads " + POSITIVE_INTEGER):
        MultiHeadAttention(12, 0)


def test_mha_bad_input():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(t, d_model\) or \(b, t, d_model\).*unsqueeze"):
        mha(torch.randn(8))
    with pytest.raises(ValueError, match=r"\(t, d_model\) or \(b, t, d_model\)"):
        mha(torch.randn(2, 2, 5, 8))
    with pytest.raises(ValueError, match=r"query has 6 features.*d_model=8"):
        mha(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"key has 6 features"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="all be batched"):
        mha(torch.randn(2, 5, 8), torch.randn(5, 8))
    with pytest.raises(ValueError, match="batch sizes"):
        mha(torch.randn(2, 5, 8), torch.randn(3, 5, 8))
    with pytest.raises(ValueError, match="exactly one value"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 4, 8), torch.randn(2, 3, 8))
    with pytest.raises(TypeError, match=r"\.float\(\)"):
        mha(torch.ones(2, 5, 8, dtype=torch.int64))


def test_mha_bad_masks():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(3, 5, 8)
    with pytest.raises(ValueError, match=r"does not broadcast.*\(3, 2, 5, 5\)"):
        mha(x, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"ambiguous.*mask\[:, None\]"):
        mha(x, mask=torch.ones(3, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):  # (b, t) padding mask not reshaped
        mha(x, mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs batched"):
        mha(x[0], mask=torch.ones(1, 1, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.Tensor"):
        mha(x, mask=[[True] * 5] * 5)
    with pytest.raises(TypeError, match=r"mask\.bool\(\)"):
        mha(x, mask=torch.ones(5, 5, dtype=torch.int64))


def test_mha_gradients_reach_every_projection():
    torch.manual_seed(9)
    mha = MultiHeadAttention(8, 2)
    out, _ = mha(torch.randn(2, 4, 8))
    out.pow(2).sum().backward()
    for lin in (mha.W_q, mha.W_k, mha.W_v, mha.W_o):
        assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0
