"""Tests for chapter 12's linear attention: three forms that agree, a state of fixed size, and bad input."""

import pytest
import torch
from messages import NUMBER_IN, raises_saying

from attn_helpers.linear_attention import (
    LinearAttentionHead,
    chunked,
    decay_mask,
    feature_map,
    parallel,
    plot_recall,
    recurrent,
)


def qkv(t=13, d_k=4, d_v=3, batch=(2,), seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*batch, t, d, generator=gen, dtype=torch.float64) for d in (d_k, d_k, d_v))


def test_feature_map_is_positive():
    x = torch.linspace(-30, 30, 101, dtype=torch.float64)
    assert (feature_map(x) > 0).all()


def test_decay_mask():
    D = decay_mask(4, 0.5, torch.float64)
    assert D[3, 1] == 0.25 and D[2, 2] == 1 and D[1, 2] == 0
    assert torch.equal(decay_mask(5), torch.ones(5, 5).tril())


@pytest.mark.parametrize("decay", [1.0, 0.9])
@pytest.mark.parametrize("chunk", [1, 4, 13, 20])
def test_three_forms_agree(decay, chunk):
    q, k, v = qkv()
    p = parallel(q, k, v, decay)
    r, _ = recurrent(q, k, v, decay)
    assert (p - r).abs().max() <= 1e-12
    assert (p - chunked(q, k, v, chunk, decay)).abs().max() <= 1e-12


def test_parallel_is_a_weighted_average_with_causal_weights():
    q, k, v = qkv(t=5, batch=())
    A = feature_map(q) @ feature_map(k).T
    w = A.tril() / A.tril().sum(-1, keepdim=True)
    assert torch.allclose(parallel(q, k, v), w @ v)


def test_state_carries_over_and_keeps_its_size():
    q, k, v = qkv(t=12)
    whole, (S, z) = recurrent(q, k, v, 0.7)
    first, state = recurrent(q[..., :5, :], k[..., :5, :], v[..., :5, :], 0.7)
    rest, (S2, z2) = recurrent(q[..., 5:, :], k[..., 5:, :], v[..., 5:, :], 0.7, state)
    assert torch.allclose(torch.cat([first, rest], dim=-2), whole) and torch.allclose(S2, S)
    assert state[0].shape == S.shape == (2, 4, 3) and z.shape == (2, 4)


def test_head_matches_parallel_form():
    torch.manual_seed(0)
    head = LinearAttentionHead(6, 4, 3).double()
    x = torch.randn(2, 7, 6, dtype=torch.float64)
    out, weights = head(x)
    assert torch.allclose(out, parallel(head.W_q(x), head.W_k(x), head.W_v(x)))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 7, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()


@pytest.mark.parametrize("decay, error", [
    (0.0, ValueError), (1.5, ValueError), (float("nan"), ValueError), (True, TypeError), ("0.9", TypeError),
    (torch.ones(2), TypeError),
])
def test_bad_decay(decay, error):
    q, k, v = qkv()
    for call in (lambda: parallel(q, k, v, decay), lambda: recurrent(q, k, v, decay), lambda: decay_mask(3, decay)):
        with raises_saying(error, "decay " + NUMBER_IN + " (0, 1] (each step multiplies the state"):
            call()


def test_decay_takes_a_one_number_tensor():
    assert torch.equal(decay_mask(3, torch.tensor(0.5)), decay_mask(3, 0.5))


def test_bad_inputs():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="d_k"):
        recurrent(q, k[..., :3], v)
    with pytest.raises(TypeError, match="dtype"):
        parallel(q.long(), k, v)
    with pytest.raises(ValueError, match="chunk"):
        chunked(q, k, v, 0)
    _, (S, z) = recurrent(q, k, v)
    with pytest.raises(ValueError, match="state"):
        recurrent(q, k, v, 1.0, (S.transpose(-2, -1)[..., :2], z))
    with pytest.raises(ValueError, match="d_model"):
        LinearAttentionHead(6, 4)(torch.randn(3, 5))


def test_plot_recall():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    frame = pd.DataFrame({"softmax": [1.0, 0.9], "linear": [0.8, 0.5]}, index=[2, 4])
    ax = plot_recall(frame, chance=0.1)
    assert [line.get_label() for line in ax.get_lines()] == ["softmax", "linear", "chance"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="non-empty"):
        plot_recall(pd.DataFrame(), chance=0.1)

