"""Tests for attn_helpers.torch_compat: the book's MultiHeadAttention and nn.MultiheadAttention agree (chapter 6)."""

import pytest
import torch
from torch import nn

import attn_helpers as ah
from attn_helpers.torch_compat import copy_from_torch_mha, copy_to_torch_mha, from_torch_mha, to_torch_mha

HEADS = [1, 2, 3, 4, 6, 12]


def randomise(module: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


def assert_same_function(book, mha, x, key=None):
    key = x if key is None else key
    with torch.no_grad():
        out_b, w_b = book(x, key, key)
        out_t, w_t = mha(x, key, key, average_attn_weights=False)
        out_a, w_a = mha(x, key, key)
    assert out_b.shape == out_t.shape and w_b.shape == w_t.shape
    assert torch.allclose(out_b, out_t, atol=1e-6)
    assert torch.allclose(w_b, w_t, atol=1e-6)
    assert torch.allclose(out_b, out_a, atol=1e-6)
    assert torch.allclose(w_b.mean(dim=-3), w_a, atol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("h", HEADS)
def test_book_to_torch_agrees(h, bias):
    torch.manual_seed(h)
    book = ah.MultiHeadAttention(12, h, bias=bias)
    randomise(book, seed=h)
    mha = to_torch_mha(book)
    assert isinstance(mha, nn.MultiheadAttention) and mha.batch_first and mha.num_heads == h
    assert (mha.in_proj_bias is not None) == bias
    assert_same_function(book, mha, torch.randn(3, 5, 12))
    assert_same_function(book, mha, torch.randn(2, 4, 12), key=torch.randn(2, 7, 12))  # cross-attention


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("h", HEADS)
def test_torch_to_book_agrees(h, bias):
    torch.manual_seed(100 + h)
    mha = nn.MultiheadAttention(12, h, bias=bias, batch_first=True)
    randomise(mha, seed=100 + h)
    book = from_torch_mha(mha)
    assert isinstance(book, ah.MultiHeadAttention) and book.num_heads == h
    assert_same_function(book, mha, torch.randn(3, 5, 12))


def test_unbatched_input_agrees():
    torch.manual_seed(7)
    book = ah.MultiHeadAttention(8, 2)
    mha = to_torch_mha(book)
    x = torch.randn(6, 8)
    with torch.no_grad():
        out_b, w_b = book(x)
        out_t, w_t = mha(x, x, x, average_attn_weights=False)
    assert torch.allclose(out_b, out_t, atol=1e-6) and torch.allclose(w_b, w_t, atol=1e-6)


def test_round_trip_copies_exactly_and_in_place():
    torch.manual_seed(8)
    book = ah.MultiHeadAttention(8, 4, bias=True)
    mha = nn.MultiheadAttention(8, 4, bias=True, batch_first=True)
    returned = copy_to_torch_mha(book, mha)
    assert returned is mha
    assert torch.equal(mha.in_proj_weight[8:16], book.W_k.weight)
    assert torch.equal(mha.in_proj_bias[16:], book.W_v.bias)
    assert torch.equal(mha.out_proj.bias, book.W_o.bias)
    other = ah.MultiHeadAttention(8, 4, bias=True)
    assert copy_from_torch_mha(mha, other) is other
    for a, b in zip(book.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)


def test_copy_keeps_autograd_clean():
    book = ah.MultiHeadAttention(8, 2)
    mha = to_torch_mha(book)
    assert all(p.requires_grad and p.is_leaf for p in mha.parameters())
    x = torch.randn(1, 3, 8)
    mha(x, x, x)[0].sum().backward()
    assert mha.in_proj_weight.grad is not None and book.W_q.weight.grad is None


def test_batch_first_false_module_holds_the_same_weights():
    torch.manual_seed(9)
    book = ah.MultiHeadAttention(8, 2)
    time_first = copy_to_torch_mha(book, nn.MultiheadAttention(8, 2, bias=False))
    x = torch.randn(2, 5, 8)  # (b, t, d)
    with torch.no_grad():
        out_t, _ = time_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    assert torch.allclose(book(x)[0], out_t.transpose(0, 1), atol=1e-6)


def test_float64_modules():
    book = ah.MultiHeadAttention(8, 2).double()
    mha = to_torch_mha(book)
    assert mha.in_proj_weight.dtype == torch.float64
    assert from_torch_mha(mha).W_q.weight.dtype == torch.float64


@pytest.mark.parametrize("book, mha, message", [
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(16, 2, bias=False), "sizes differ.*embed_dim=16.*d_model=8"),
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 4, bias=False), "head counts differ"),
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 2, bias=True), "bias settings differ"),
    (ah.MultiHeadAttention(8, 2, bias=True), nn.MultiheadAttention(8, 2, bias=False), "bias settings differ"),
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 2, bias=False, kdim=4, vdim=4), "kdim=4"),
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True), "add_bias_kv"),
    (ah.MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 2, bias=False, add_zero_attn=True), "add_zero_attn"),
])
def test_mismatches_raise_clear_errors(book, mha, message):
    with pytest.raises(ValueError, match=message):
        copy_to_torch_mha(book, mha)
    with pytest.raises(ValueError, match=message):
        copy_from_torch_mha(mha, book)


def test_wrong_types_raise_clear_errors():
    with pytest.raises(TypeError, match="MultiHeadAttention\\(d_model, num_heads=1\\)"):
        to_torch_mha(ah.SelfAttentionHead(8, 8))
    with pytest.raises(TypeError, match="expected a torch.nn.MultiheadAttention, got Linear"):
        from_torch_mha(nn.Linear(8, 8))
    with pytest.raises(TypeError, match="expected a torch.nn.MultiheadAttention"):
        copy_to_torch_mha(ah.MultiHeadAttention(8, 2), ah.MultiHeadAttention(8, 2))


def test_reads_only_public_attributes_of_torch_modules():
    import inspect
    import re

    from attn_helpers import torch_compat

    private = re.findall(r"\bmha\._\w+", inspect.getsource(torch_compat))
    assert private == [], f"torch_compat reads private attributes of nn.MultiheadAttention: {private}"


def test_aten_operators_lists_what_runs_below_autograd_and_keeps_the_modules_fast_path():
    q = torch.randn(1, 1, 4, 8)
    assert ah.torch_compat.aten_operators(torch.nn.functional.scaled_dot_product_attention, q, q, q) == [
        "_scaled_dot_product_flash_attention_for_cpu"]
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        assert ah.torch_compat.aten_operators(mha, x, x, x, need_weights=False) == ["_native_multi_head_attention"]
        mha.train()
        regular = ah.torch_compat.aten_operators(mha, x, x, x, need_weights=False)
    assert "_native_multi_head_attention" not in regular and "addmm" in regular


def test_aten_operators_refuses_what_it_cannot_call():
    with pytest.raises(TypeError, match="function or module to call"):
        ah.torch_compat.aten_operators(torch.randn(3))
