"""Tests for chapter 9's helpers: KV cache, grouped-query attention and the tiny decoder."""


import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from messages import DOES_NOT_DIVIDE, TOKEN_IDS, raises_saying

import attn_helpers as ah
from attn_helpers.cost import TensorMemoryTracker
from attn_helpers.inference import KVCache, decode_flops, decode_times, grouped_query_attention


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- KVCache


def test_cache_extend_appends_along_time_and_counts_bytes():
    cache = KVCache(randn(2, 3, 4, 5), randn(2, 3, 4, 5, seed=1))
    longer = cache.extend(randn(2, 3, 1, 5, seed=2), randn(2, 3, 1, 5, seed=3))
    assert len(cache) == 4 and len(longer) == 5
    assert torch.equal(longer.k[:, :, :4], cache.k) and torch.equal(longer.k[:, :, 4:], randn(2, 3, 1, 5, seed=2))
    assert longer.nbytes == 2 * 2 * 3 * 5 * 5 * 4


@pytest.mark.parametrize("k, v, match", [
    (randn(3, 4, 5), randn(3, 4, 5), r"\(b, g, t, d_k\)"),
    (randn(1, 2, 4, 5), randn(1, 2, 3, 5), "one value per key"),
    (torch.ones(1, 1, 2, 2, dtype=torch.long), torch.ones(1, 1, 2, 2, dtype=torch.long), "floating-point"),
])
def test_cache_rejects_bad_tensors(k, v, match):
    with pytest.raises((ValueError, TypeError), match=match):
        KVCache(k, v)


def test_cache_extend_rejects_other_heads():
    cache = KVCache(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match="must match"):
        cache.extend(randn(1, 4, 1, 4), randn(1, 4, 1, 4))


# ---------------------------------------------------------------- grouped-query attention


@pytest.mark.parametrize("h, g", [(8, 8), (8, 4), (8, 2), (8, 1), (6, 3)])
@pytest.mark.parametrize("t_q, t_k", [(5, 5), (3, 9), (1, 7)])
def test_gqa_matches_sdpa_enable_gqa(h, g, t_q, t_k):
    from torch.nn.attention.bias import causal_lower_right  # imports torch._dynamo: here, not at collection

    q, k, v = randn(2, h, t_q, 4), randn(2, g, t_k, 4, seed=1), randn(2, g, t_k, 3, seed=2)
    mask = ah.causal_mask(t_q, t_k)
    out, w = grouped_query_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(t_q, t_k), enable_gqa=True)
    assert out.shape == (2, h, t_q, 3) and w.shape == (2, h, t_q, t_k)
    assert torch.allclose(out, ref, atol=1e-6)
    r = h // g  # query head i uses key head i // r
    full, _ = ah.attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), mask)
    assert torch.allclose(out, full, atol=1e-6)


def test_gqa_never_copies_the_keys_per_query_head():
    q, k, v = randn(1, 8, 1, 16), randn(1, 2, 256, 16, seed=1), randn(1, 2, 256, 16, seed=2)
    with torch.no_grad(), TensorMemoryTracker() as tracker:
        grouped_query_attention(q, k, v)
    # nothing bigger than one cached tensor (attention's input checks make temporaries of that size),
    # while copying the keys for every query head would make tensors h / g = 4 times bigger
    assert tracker.largest <= k.nbytes


@pytest.mark.parametrize("q, k, v, mask, match", [
    (randn(8, 1, 4), randn(1, 2, 3, 4), randn(1, 2, 3, 4), None, "(b, heads, t, d)"),
    (randn(1, 8, 1, 4), randn(1, 3, 3, 4), randn(1, 3, 3, 4), None,
     "num_kv_heads=3 " + DOES_NOT_DIVIDE + " num_heads=8"),
    (randn(1, 8, 1, 4), randn(1, 2, 3, 4), randn(1, 4, 3, 4), None, "same number g"),
    (randn(1, 8, 1, 4), randn(1, 2, 3, 4), randn(1, 2, 3, 4), torch.ones(1, 1, 1, 3, dtype=torch.bool), "mask"),
])
def test_gqa_rejects_bad_shapes(q, k, v, mask, match):
    with raises_saying(ValueError, match):
        grouped_query_attention(q, k, v, mask)


def test_gqa_module_with_all_heads_is_chapter_5s_module():
    torch.manual_seed(0)
    mha = ah.MultiHeadAttention(16, 4)
    gqa = ah.inference.GroupedQueryAttention(16, 4, rope=False)
    gqa.load_state_dict(mha.state_dict())
    x = randn(2, 6, 16)
    with torch.no_grad():
        ref, _ = mha(x, mask=ah.causal_mask(6))
        out, cache = gqa(x)
    assert torch.allclose(out, ref, atol=1e-6) and len(cache) == 6


def _heads(linear, x, n):  # (b, t, n · d_k) -> (b, n, t, d_k)
    b, t, _ = x.shape
    return linear(x).view(b, t, n, -1).transpose(1, 2)


def test_gqa_module_rotates_queries_and_keys_with_rope_and_caches_the_rotated_keys():
    torch.manual_seed(0)
    layer = ah.inference.GroupedQueryAttention(16, 4, 2)
    x = randn(2, 6, 16)
    with torch.no_grad():
        out, cache = layer(x)
        q = ah.position.rope(_heads(layer.W_q, x, 4), positions=torch.arange(6))  # (b, h, t, d_k)
        k = ah.position.rope(_heads(layer.W_k, x, 2), positions=torch.arange(6))  # (b, g, t, d_k)
        v = _heads(layer.W_v, x, 2)
        heads, _ = ah.attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), ah.causal_mask(6))
        ref = layer.W_o(heads.transpose(1, 2).reshape(2, 6, 16))
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(cache.k, k, atol=1e-6) and torch.allclose(cache.v, v, atol=1e-6)


def test_new_tokens_continue_from_the_cache_length():
    torch.manual_seed(0)
    layer = ah.inference.GroupedQueryAttention(16, 4)
    x = randn(1, 7, 16)
    with torch.no_grad():
        full, _ = layer(x)
        _, cache = layer(x[:, :5])
        default, _ = layer(x[:, 5:], cache)
        explicit, _ = layer(x[:, 5:], cache, positions=[5, 6])
        restarted, _ = layer(x[:, 5:], cache, positions=[0, 1])  # the bug: positions counted among the new tokens
    assert torch.equal(default, explicit) and torch.allclose(default, full[:, 5:], atol=1e-6)
    assert not torch.allclose(restarted, full[:, 5:], atol=1e-3)


def test_only_offsets_matter_so_a_shifted_sequence_gives_the_same_output():
    torch.manual_seed(0)
    layer = ah.inference.GroupedQueryAttention(16, 4, 2)
    x = randn(1, 6, 16)
    with torch.no_grad():
        at_zero, _ = layer(x)
        at_100, _ = layer(x, positions=torch.arange(100, 106))
    assert torch.allclose(at_zero, at_100, atol=1e-5)


def test_gqa_module_rejects_odd_heads_for_rope_and_positions_without_rope():
    with pytest.raises(ValueError, match="even"):
        ah.inference.GroupedQueryAttention(12, 4)  # d_k = 3
    ah.inference.GroupedQueryAttention(12, 4, rope=False)  # no rotation, no pairs needed
    layer = ah.inference.GroupedQueryAttention(16, 4, rope=False)
    with pytest.raises(ValueError, match="rope=False"):
        layer(randn(1, 2, 16), positions=[0, 1])
    with pytest.raises(ValueError, match="one per token"):
        ah.inference.GroupedQueryAttention(16, 4)(randn(1, 2, 16), positions=[0, 1, 2])


def test_gqa_module_rejects_input_of_the_wrong_width():
    layer = ah.inference.GroupedQueryAttention(16, 4, 2)
    with pytest.raises(ValueError, match=r"\(b, t, d_model=16\)"):
        layer(randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"\(b, t, d_model=16\)"):
        layer(randn(5, 16))


@pytest.mark.parametrize("args, match", [
    ((16, 4, 3), "num_kv_heads=3 " + DOES_NOT_DIVIDE + " num_heads=4"),
    ((16, 3), "num_heads=3 " + DOES_NOT_DIVIDE + " d_model=16"),
    ((16, 0), "positive"),
])
def test_gqa_module_rejects_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        ah.inference.GroupedQueryAttention(*args)


# ---------------------------------------------------------------- TinyDecoder


@pytest.fixture
def decoder():
    torch.manual_seed(0)
    return ah.inference.TinyDecoder(vocab=20, d_model=16, num_heads=4, num_kv_heads=2, n_layers=2)


def test_cached_generation_equals_recomputation(decoder):
    prompt = torch.randint(20, (2, 5), generator=torch.Generator().manual_seed(1))
    tokens_c, logits_c = decoder.generate(prompt, 7, use_cache=True)
    tokens_f, logits_f = decoder.generate(prompt, 7, use_cache=False)
    assert tokens_c.shape == (2, 12) and logits_c.shape == (2, 7, 20)
    assert torch.equal(tokens_c, tokens_f) and torch.allclose(logits_c, logits_f, atol=1e-5)
    assert torch.equal(tokens_c[:, :5], prompt)
    assert torch.equal(tokens_c[:, 5:], logits_c.argmax(-1))


def test_decoding_with_every_new_token_at_position_0_differs(decoder):
    prompt = torch.randint(20, (2, 5), generator=torch.Generator().manual_seed(1))
    seq, _ = decoder.generate(prompt, 4)
    with torch.no_grad():
        full, _ = decoder(seq)
        _, caches = decoder(seq[:, :5])
        right, _ = decoder(seq[:, 5:6], caches)
        wrong, _ = decoder(seq[:, 5:6], caches, positions=[0])
    assert torch.allclose(right, full[:, 5:6], atol=1e-5)
    assert not torch.allclose(wrong, full[:, 5:6], atol=1e-3)


def test_decoder_passes_rope_to_every_layer():
    torch.manual_seed(0)
    plain = ah.inference.TinyDecoder(vocab=20, d_model=16, num_heads=4, rope=False)
    assert not any(layer.rope for layer in plain.layers)
    assert all(layer.rope for layer in ah.inference.TinyDecoder(vocab=20, d_model=16, num_heads=4).layers)


def test_a_chunk_of_new_tokens_on_a_cache(decoder):
    seq = torch.randint(20, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = decoder(seq)
        _, caches = decoder(seq[:, :6])
        chunk, caches = decoder(seq[:, 6:], caches)
    assert torch.allclose(chunk, full[:, 6:], atol=1e-5) and [len(c) for c in caches] == [9, 9]


def test_cache_bytes_per_token_matches_the_tensors(decoder):
    with torch.no_grad():
        _, caches = decoder(torch.zeros(1, 10, dtype=torch.long))
    assert sum(c.nbytes for c in caches) == 10 * decoder.cache_bytes_per_token() == 10 * 2 * 2 * 2 * 4 * 4
    assert decoder.cache_bytes_per_token(torch.bfloat16) == decoder.cache_bytes_per_token() // 2


@pytest.mark.parametrize("tokens, caches, err, match", [
    (torch.zeros(1, 3), None, TypeError, TOKEN_IDS),
    (torch.zeros(3, dtype=torch.long), None, ValueError, TOKEN_IDS),
    (torch.full((1, 3), 20), None, ValueError, "0 … 19"),
    (torch.zeros(1, 3, dtype=torch.long), [], ValueError, "one cache per layer"),
])
def test_decoder_rejects_bad_input(decoder, tokens, caches, err, match):
    with raises_saying(err, match):
        decoder(tokens, caches)


def test_flops_grow_linearly_with_a_cache_and_quadratically_without(decoder):
    table = decode_flops(decoder, [8, 16, 32])
    assert list(table.columns) == ["cached", "full", "cached_attention", "full_attention"]
    h, d_k, layers = 4, 4, 2
    for t in table.index:  # 2 FLOPs per multiply-add, q·k and w·v, every head and layer
        assert table.loc[t, "cached_attention"] == 2 * 2 * layers * h * d_k * t
        assert table.loc[t, "full_attention"] == 2 * 2 * layers * h * d_k * t * t
    assert ah.cost.loglog_slope(table.index, table["cached_attention"]) == pytest.approx(1.0)
    assert ah.cost.loglog_slope(table.index, table["full_attention"]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match=">= 2"):
        decode_flops(decoder, [1, 4])


def test_decode_times_returns_positive_seconds(decoder):
    table = decode_times(decoder, [4, 8])
    assert isinstance(table, pd.DataFrame) and list(table.index) == [4, 8]
    assert (table > 0).all().all()
    with pytest.raises(ValueError, match="positive"):
        decode_times(decoder, [4], threads=0)
