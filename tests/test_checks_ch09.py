"""Chapter 9's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch09 as check

# ex-ch09-predict: the bytes of a grouped-query cache

PER_NUMBER = 2  # bfloat16


def test_cache_bytes_accepts_reference(capsys):
    check.cache_bytes(2 * check.N_LAYERS * check.G * check.D_K * PER_NUMBER * check.T)
    assert "✓ cache_bytes: correct" in capsys.readouterr().out


def test_cache_bytes_accepts_the_measured_cache(capsys):
    torch.manual_seed(0)
    model = ah.inference.TinyDecoder(50, check.H * check.D_K, check.H, check.G, check.N_LAYERS).to(check.DTYPE)
    with torch.no_grad():
        _, caches = model(torch.zeros(1, check.T, dtype=torch.long))
    check.cache_bytes(sum(c.nbytes for c in caches))
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (2 * 4 * 8 * 16 * 2 * 100, "g = 2 shared heads"),
    (4 * 2 * 16 * 2 * 100, "keys AND values"),
    (2 * 4 * 2 * 16 * 4 * 100, "2 bytes"),
    (2 * 4 * 2 * 16 * 2, "per token"),
    (2 * 2 * 16 * 2 * 100, "n_layers"),
    ("51200", "should be a number"),
    (12345, "is not right"),
])
def test_cache_bytes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.cache_bytes(wrong)


# ex-ch09-merge: merging two (m, l, o) triples


def reference_merge(a, b):
    m = torch.maximum(a[0], b[0])
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    fa, fb = torch.exp(a[0] - safe), torch.exp(b[0] - safe)
    return m, a[1] * fa + b[1] * fb, a[2] * fa + b[2] * fb


def test_merge_accepts_reference(capsys):
    check.merge_function(reference_merge)
    out = capsys.readouterr().out
    assert "✓ m: correct" in out and "✓ o / l against attention over all keys: correct" in out


def nan_merge(a, b):  # forgets that -inf - (-inf) is NaN
    m = torch.maximum(a[0], b[0])
    fa, fb = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * fa + b[1] * fb, a[2] * fa + b[2] * fb


def no_rescale(a, b):
    return torch.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2]


def normalised(a, b):
    m, ell, o = reference_merge(a, b)
    return m, ell, o / torch.where(ell == 0, torch.ones_like(ell), ell)


def min_instead_of_max(a, b):
    return (torch.minimum(a[0], b[0]), *reference_merge(a, b)[1:])


@pytest.mark.parametrize("wrong, hint", [
    (nan_merge, "contains NaN"),
    (no_rescale, "rescale each sum"),
    (normalised, "keep o unnormalised"),
    (min_instead_of_max, "larger of the two"),
    (lambda a, b: reference_merge(a, b)[2], "should return a tuple"),
])
def test_merge_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.merge_function(wrong)


# ex-ch09-gqa: grouped-query attention for one new token, without copying keys


def reference_gqa(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    stacked = q.reshape(b, g, h // g, d_k)  # (b, g, h/g, d_k)
    w = torch.softmax(stacked @ k.transpose(-2, -1) / d_k ** 0.5, dim=-1)  # (b, g, h/g, t)
    return (w @ v).reshape(b, h, 1, -1)


def test_gqa_accepts_reference(capsys):
    check.gqa_function(reference_gqa)
    assert "✓ gqa_decode(q, k, v): correct" in capsys.readouterr().out


def test_gqa_accepts_the_helper(capsys):
    check.gqa_function(lambda q, k, v: ah.inference.grouped_query_attention(q, k, v)[0])
    assert "correct" in capsys.readouterr().out


def repeated(q, k, v):  # right numbers, but copies the keys once per query head
    r = q.shape[1] // k.shape[1]
    return ah.attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1))[0]


def broadcast(q, k, v):  # right numbers, but matmul copies the broadcast keys
    b, h, _, d_k = q.shape
    g = k.shape[1]
    return ah.attention(q.view(b, g, h // g, 1, d_k), k[:, :, None], v[:, :, None])[0].reshape(b, h, 1, d_k)


def wrong_pairing(q, k, v):
    r = q.shape[1] // k.shape[1]
    return ah.attention(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1))[0]


def unscaled(q, k, v):
    b, h, _, d_k = q.shape
    w = torch.softmax(q.reshape(b, k.shape[1], -1, d_k) @ k.transpose(-2, -1), dim=-1)
    return (w @ v).reshape(b, h, 1, -1)


def sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


@pytest.mark.parametrize("wrong, hint", [
    (repeated, "copied once per query head"),
    (broadcast, "copied once per query head"),
    (wrong_pairing, "wrong key heads"),
    (unscaled, "not scaled"),
    (sdpa, "calls scaled_dot_product_attention"),
    (lambda q, k, v: (reference_gqa(q, k, v), None), "not a tuple"),
])
def test_gqa_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.gqa_function(wrong)
