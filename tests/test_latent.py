"""Tests for chapter 12's multi-head latent attention: absorbed = naive, cached = uncached, what is cached."""

import pytest
import torch
from messages import DOES_NOT_DIVIDE, MUST_BE_EVEN, POSITIVE_INTEGER, TRUE_OR_FALSE, raises_saying

from attn_helpers.latent import LatentAttention, LatentCache


@pytest.fixture()
def layer():
    torch.manual_seed(0)
    return LatentAttention(32, 4, 12, 4).double()


def x_of(b=2, t=9, seed=1):
    return torch.randn(b, t, 32, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_absorbed_equals_naive(layer):
    x = x_of()
    with torch.no_grad():
        a, cache = layer(x)
        n, _ = layer(x, absorb=False)
    assert (a - n).abs().max() <= 1e-12
    assert cache.c.shape == (2, 9, 12) and cache.k_rope.shape == (2, 9, 4) and len(cache) == 9


@pytest.mark.parametrize("absorb", [True, False])
def test_cached_equals_uncached(layer, absorb):
    x = x_of()
    with torch.no_grad():
        full, whole = layer(x, absorb=absorb)
        _, cache = layer(x[:, :4], absorb=absorb)
        outs = []
        for i in range(4, 9):
            out, cache = layer(x[:, i:i + 1], cache, absorb=absorb)
            outs.append(out)
    assert torch.allclose(torch.cat(outs, 1), full[:, 4:], atol=1e-12)
    assert torch.allclose(cache.k_rope, whole.k_rope, atol=1e-12)


def test_positions_matter(layer):
    x = x_of()
    with torch.no_grad():
        full, _ = layer(x)
        _, cache = layer(x[:, :8])
        step, _ = layer(x[:, 8:], cache)
        alone, _ = layer(x[:, 8:])  # no cache: position 0 and nothing to see
    assert torch.allclose(step, full[:, 8:], atol=1e-12) and not torch.allclose(alone, full[:, 8:], atol=1e-3)


def test_cache_bytes(layer):
    with torch.no_grad():
        _, cache = layer(x_of(b=1, t=10).float().double())
    assert cache.nbytes == 10 * (12 + 4) * 8 == 10 * layer.cache_bytes_per_token(torch.float64)
    assert isinstance(cache.extend(cache.c, cache.k_rope), LatentCache)


@pytest.mark.parametrize("args, error, said", [
    ((30, 4, 12, 4), ValueError, DOES_NOT_DIVIDE), ((32, 4, 12, 3), ValueError, MUST_BE_EVEN),
    ((32, 0, 12, 4), ValueError, "num_heads " + POSITIVE_INTEGER),
    ((32, 4, True, 4), TypeError, "d_c " + POSITIVE_INTEGER),
])
def test_bad_construction(args, error, said):
    with raises_saying(error, said):
        LatentAttention(*args)


def test_bad_input(layer):
    with pytest.raises(ValueError, match="batch"):
        layer(torch.randn(5, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="d_model"):
        layer(torch.randn(1, 5, 31, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        layer(torch.randn(1, 5, 32))
    _, cache = layer(torch.randn(2, 3, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch, d_c, d_rope and dtype must match"):
        layer(torch.randn(1, 1, 32, dtype=torch.float64), cache)  # a cache of 2 sequences, 1 new token


@pytest.mark.parametrize("absorb, per_token", [(True, 12 + 4), (False, 4 * (8 + 4))])
def test_absorbed_never_builds_per_head_keys(layer, absorb, per_token):
    """Decoding a token on a cache of 9: the largest tensor along the 10 cached tokens, in numbers per token."""
    from attn_helpers.checks import Watch

    x = x_of(b=1)
    with torch.no_grad():
        _, cache = layer(x)
        with Watch() as watch:
            layer(x[:, :1], cache, absorb=absorb)
    sizes = [shape for op in watch.ops for shape in op.outputs if 10 in shape]
    assert max(torch.Size(s).numel() // 10 for s in sizes) == per_token  # d_c + d_rope, or h (d_k + d_rope)


def test_absorb_must_be_a_bool(layer):
    with raises_saying(TypeError, "absorb " + TRUE_OR_FALSE):
        layer(x_of(), absorb="no")


def test_the_fixture_catches_a_missing_score_scale(layer):
    """d_c != d_k here, so absorbed = naive fails if the absorbed path forgets to rescale its scores."""
    assert layer.d_c != layer.d_k
