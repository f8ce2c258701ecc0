"""Tests for chapter 9's merging of partial attention results (flash-decoding's shards)."""

import pytest
import torch
import torch.nn.functional as F

import attn_helpers as ah
from attn_helpers.merge import finish_partial, merge_partials, partial_attention


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("splits", [[10], [3, 7], [4, 4, 2], [1] * 10])
def test_merged_shards_equal_sdpa(splits):
    q, k, v = randn(2, 3, 5, 8) * 2, randn(2, 3, 10, 8, seed=1) * 2, randn(2, 3, 10, 4, seed=2)
    mask = ah.causal_mask(5, 10).clone()
    mask[0] = False  # a query with no allowed key at all
    parts, start = [], 0
    for size in splits:
        parts.append(partial_attention(q, k[..., start:start + size, :], v[..., start:start + size, :],
                                       mask[:, start:start + size]))
        start += size
    merged = merge_partials(parts)
    out = finish_partial(merged)
    assert not torch.isnan(out).any()
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6)
    assert torch.allclose(finish_partial(merge_partials(parts[::-1])), out, atol=1e-6)
    assert torch.isinf(merged[0][..., 0, :]).all() and (merged[1][..., 0, :] == 0).all()


def test_a_fully_blocked_shard_is_minus_inf_zero_zero():
    m, ell, o = partial_attention(randn(4, 3), randn(2, 3), randn(2, 5), torch.zeros(4, 2, dtype=torch.bool))
    assert torch.isinf(m).all() and (m < 0).all() and (ell == 0).all() and (o == 0).all()


def test_merge_rejects_bad_input():
    with pytest.raises(ValueError, match="non-empty list"):
        merge_partials([])
    a = partial_attention(randn(4, 3), randn(2, 3), randn(2, 5))
    b = partial_attention(randn(3, 3), randn(2, 3), randn(2, 5))
    with pytest.raises(ValueError, match="different queries"):
        merge_partials([a, b])
    with pytest.raises(ValueError, match="d_k"):
        partial_attention(randn(4, 3), randn(2, 4), randn(2, 5))


