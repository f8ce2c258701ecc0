"""Tests for chapter 11's sliding window: the banded mask, the ring buffer and attention sinks."""

import pytest
import torch
from messages import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers import inference, position, sliding_window


def test_window_mask_is_a_band_under_the_diagonal():
    mask = sliding_window.window_mask(6, window=2)
    expected = torch.ones(6, 6, dtype=torch.bool).tril() & ~torch.ones(6, 6, dtype=torch.bool).tril(-2)
    assert torch.equal(mask, expected)
    assert torch.equal(sliding_window.window_mask(5, window=5), ah.causal_mask(5))


def test_window_mask_with_sinks_and_new_tokens():
    mask = sliding_window.window_mask(2, 8, window=3, sinks=2)  # queries at positions 6 and 7
    assert mask.int().tolist() == [[1, 1, 0, 0, 1, 1, 1, 0], [1, 1, 0, 0, 0, 1, 1, 1]]
    assert torch.equal(sliding_window.window_mask(3, 3, window=1, sinks=2), ah.causal_mask(3) & (
        torch.eye(3, dtype=torch.bool) | (torch.arange(3) < 2)))


def test_ring_slot():
    assert [sliding_window.ring_slot(n, 3) for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [sliding_window.ring_slot(n, 3, sinks=2) for n in range(8)] == [0, 1, 2, 3, 4, 2, 3, 4]


def _decode(x, W, window, sinks, prompt):
    q, k, v = (position.rope(x @ W[i]) if i < 2 else x @ W[i] for i in range(3))
    out, _ = ah.attention(q[..., :prompt, :], k[..., :prompt, :], v[..., :prompt, :],
                          mask=sliding_window.window_mask(prompt, window=window, sinks=sinks))
    cache, outs = sliding_window.RingCache.empty(1, 1, x.shape[-1], window, sinks), [out]
    for n in range(x.shape[-2]):
        cache = cache.write(k[..., n:n + 1, :], v[..., n:n + 1, :], n)
        if n >= prompt:
            outs.append(ah.attention(q[..., n:n + 1, :], cache.k, cache.v, mask=cache.allowed())[0])
    return torch.cat(outs, dim=-2), (q, k, v), cache


@pytest.mark.parametrize("window, sinks, prompt", [(4, 0, 2), (4, 0, 9), (5, 3, 1), (3, 1, 7)])
def test_ring_decoding_equals_attention_under_the_window_mask(window, sinks, prompt):
    torch.manual_seed(0)
    x, W = torch.randn(1, 1, 30, 8), torch.randn(3, 8, 8) / 3
    decoded, (q, k, v), cache = _decode(x, W, window, sinks, prompt)
    expected, _ = ah.attention(q, k, v, mask=sliding_window.window_mask(30, window=window, sinks=sinks))
    assert (decoded - expected).abs().max() <= 1e-6
    assert sorted(cache.positions.tolist()) == list(range(sinks)) + list(range(30 - window, 30))


def test_ring_decoding_differs_from_full_attention():
    torch.manual_seed(0)
    x, W = torch.randn(1, 1, 20, 8), torch.randn(3, 8, 8) / 3
    decoded, (q, k, v), _ = _decode(x, W, 4, 0, 2)
    assert not torch.allclose(decoded, ah.attention(q, k, v, mask=ah.causal_mask(20))[0], atol=1e-3)


def test_ring_memory_is_constant_and_a_kv_cache_grows():
    ring, growing = sliding_window.RingCache.empty(2, 3, 4, window=5), None
    sizes = set()
    for n in range(40):
        k = torch.randn(2, 3, 1, 4)
        ring = ring.write(k, k, n)
        growing = inference.KVCache(k, k) if growing is None else growing.extend(k, k)
        sizes.add(ring.nbytes)
    assert sizes == {2 * 2 * 3 * 5 * 4 * 4} and growing.nbytes == 8 * ring.nbytes


def test_write_is_out_of_place():
    empty = sliding_window.RingCache.empty(1, 1, 2, window=2)
    full = empty.write(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2), 0)
    assert empty.k.abs().sum() == 0 and empty.positions.tolist() == [-1, -1]
    assert full.positions.tolist() == [0, -1] and full.allowed().tolist() == [True, False]


def test_cache_positions_number_the_slots_as_streaming_llm_does():
    cache = sliding_window.RingCache.empty(1, 1, 2, window=4, sinks=2)
    assert cache.cache_positions().tolist() == [-1] * 6
    for n in range(9):
        cache = cache.write(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2), n)
    assert cache.positions.tolist() == [0, 1, 6, 7, 8, 5]
    assert cache.cache_positions().tolist() == [0, 1, 3, 4, 5, 2]  # sinks, then tokens 5 … 8 oldest first


def _written(tokens, window=3, sinks=1):
    """A cache of 1 + 3 slots after tokens 0 … tokens - 1."""
    cache = sliding_window.RingCache.empty(1, 1, 4, window=window, sinks=sinks)
    for n in range(tokens):
        cache = cache.write(torch.full((1, 1, 1, 4), float(n)), torch.full((1, 1, 1, 4), float(n)), n)
    return cache


@pytest.mark.parametrize("call, error, message", [
    (lambda: sliding_window.window_mask(4, window=0), ValueError, "window " + POSITIVE_INTEGER),
    (lambda: sliding_window.window_mask(4, window=2, sinks=-1), ValueError, "sinks " + NON_NEGATIVE_INTEGER),
    (lambda: sliding_window.window_mask(4, 2, window=2), ValueError, "t_q=4 queries but only t_k=2"),
    (lambda: sliding_window.ring_slot(-1, 4), ValueError, "n " + NON_NEGATIVE_INTEGER),
    (lambda: sliding_window.ring_slot(3, 2.0), TypeError, "window " + POSITIVE_INTEGER),
    (lambda: sliding_window.RingCache.empty(1, 1, 4, window=3).write(torch.ones(1, 1, 2, 4), torch.ones(1, 1, 2, 4), 0),
     ValueError, "one token at a time"),
    (lambda: sliding_window.RingCache.empty(1, 1, 4, window=3).write(torch.ones(1, 1, 1, 4).double(),
                                                                     torch.ones(1, 1, 1, 4).double(), 0),
     TypeError, "the cache holds torch.float32: convert with k_new.to(torch.float32)"),
    (lambda: sliding_window.RingCache.empty(1, 1, 4, window=3).write(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4),
                                                                     1),
     ValueError, "n must be the position of the next token, 0 (it is empty), got 1"),
    (lambda: _written(5).write(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4), 2),
     ValueError, "next token, 5 (it holds tokens up to 4), got 2: a ring buffer takes the tokens in order"),
    (lambda: _written(5).write(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4), 7), ValueError, "next token, 5"),
    (lambda: _written(5).write(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4), 5.0), TypeError,
     "n " + NON_NEGATIVE_INTEGER + ", got 5.0 (a float); pass n=5"),
])
def test_bad_input_says_what_to_do(call, error, message):
    with raises_saying(error, message):
        call()
