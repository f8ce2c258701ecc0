"""Chapter 6's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import math

import pytest
import torch
from torch import nn

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch06 as check

# ex-ch06-predict: the broadcast output shape


def test_broadcast_shape_accepts_reference(capsys):
    check.broadcast_shape((2, 4, 5, 6))
    check.broadcast_shape(torch.Size([2, 4, 5, 6]))
    assert capsys.readouterr().out.count("✓ out_shape (2, 4, 5, 6): correct") == 2


def test_broadcast_shape_reference_matches_torch():
    Q, K, V = (torch.randn(s) for s in (check.PREDICT_Q, check.PREDICT_K, check.PREDICT_V))
    check.broadcast_shape(ah.attention(Q, K, V)[0].shape)


@pytest.mark.parametrize("wrong, hint", [
    ((2, 4, 5, 8), "comes from the values"),
    ((2, 4, 7, 6), "one output row per query"),
    ((2, 1, 5, 6), "1 against 4 gives 4"),
    ((4, 2, 5, 6), "from the right"),
    ((2, 4, 5, 7), "one column per value feature"),
    ((3, 3), "broadcast right-aligned"),
])
def test_broadcast_shape_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.broadcast_shape(wrong)


def test_broadcast_shape_rejects_wrong_types():
    with pytest.raises(CheckFailed, match="not the output tensor"):
        check.broadcast_shape(torch.zeros(2, 4, 5, 6))
    with pytest.raises(CheckFailed, match="tuple of ints"):
        check.broadcast_shape(None)


# ex-ch06-load: three matrices into nn.MultiheadAttention


def loaded(in_proj: torch.Tensor, out_proj: torch.Tensor, **kwargs) -> nn.MultiheadAttention:
    options = {"bias": False, "batch_first": True, **kwargs}
    mha = nn.MultiheadAttention(6, 2, **options)
    with torch.no_grad():
        mha.in_proj_weight.copy_(in_proj)
        mha.out_proj.weight.copy_(out_proj)
    return mha


def test_loaded_mha_accepts_reference(capsys):
    W_q, W_k, W_v, W_o = check.projection_matrices()
    check.loaded_mha(loaded(torch.cat([W_q, W_k, W_v]), W_o))
    out = capsys.readouterr().out
    assert "✓ in_proj_weight: correct" in out and "✓ the module's output: correct" in out


def test_loaded_mha_reference_equals_the_books_module():
    W_q, W_k, W_v, W_o = check.projection_matrices()
    book = ah.MultiHeadAttention(6, 2)
    with torch.no_grad():
        for lin, W in zip((book.W_q, book.W_k, book.W_v, book.W_o), (W_q, W_k, W_v, W_o), strict=True):
            lin.weight.copy_(W)
    check.loaded_mha(ah.to_torch_mha(book))


@pytest.mark.parametrize("make, hint", [
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q.T, W_k.T, W_v.T]), W_o), "transposed"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_k, W_q, W_v]), W_o), "queries come first"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_v, W_k]), W_o), "keys go in rows d:2d"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o.T), "copy W_o itself"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o, batch_first=False), "batch_first=True"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o, bias=True), "pass bias=False"),
    (lambda W_q, W_k, W_v, W_o: nn.MultiheadAttention(6, 3, bias=False, batch_first=True), "num_heads=3"),
    (lambda W_q, W_k, W_v, W_o: ah.MultiHeadAttention(6, 2), "got MultiHeadAttention"),
])
def test_loaded_mha_rejects_mistakes(make, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.loaded_mha(make(*check.projection_matrices()))


# ex-ch06-blockwise: attention without the t x t matrix


def reference_blockwise(q, k, v, block):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    total = torch.zeros(q.shape[0], 1)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        total = total * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[start:start + block]
        m = m_new
    return acc / total


def test_blockwise_accepts_reference(capsys):
    check.blockwise_function(reference_blockwise)
    out = capsys.readouterr().out
    assert "✓ output with block=4: correct" in out and "✓ output with block=10: correct" in out


def unscaled(q, k, v, block):
    return reference_blockwise(q * math.sqrt(q.shape[-1]), k, v, block)


def not_rescaled(q, k, v, block):
    return check._blockwise_without_rescale(q, k, v, block)


def not_normalised(q, k, v, block):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        acc = acc * torch.exp(m - m_new) + torch.exp(s - m_new) @ v[start:start + block]
        m = m_new
    return acc


def full_matrix(q, k, v, block):
    return ah.attention(q, k, v)[0]


@pytest.mark.parametrize("fn, hint", [
    (unscaled, "not scaled"),
    (not_rescaled, "rescale the running sum"),
    (not_normalised, "divide the accumulated output by the running sum"),
    (full_matrix, "builds a full t_q × t_k tensor"),
    (lambda q, k, v, block: (reference_blockwise(q, k, v, block), None), "only the output tensor"),
    (lambda q, k, v, block: reference_blockwise(q, k, v, block).T, "has shape"),
])
def test_blockwise_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.blockwise_function(fn)
