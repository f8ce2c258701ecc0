"""Tests of attn_helpers.traffic: standard attention cut to fit a fast memory of M numbers (chapter 10)."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers import traffic


@pytest.mark.parametrize(("t", "d", "M"), [(512, 64, 2 ** 14), (300, 32, 2 ** 12), (200, 16, 2 ** 16)])
def test_fitted_standard_attention_is_attention_and_moves_more_than_the_lower_bound(t, d, M):
    q, k, v = (torch.randn(1, 1, t, d, dtype=torch.float64) for _ in range(3))
    fitted, bound = traffic.Traffic(M=M), traffic.Traffic()
    o = traffic.fitted_standard_attention(q, k, v, fitted)
    assert torch.allclose(o, ah.attention(q, k, v)[0], atol=1e-12)
    traffic.standard_attention(q, k, v, bound)
    block = (M - d) // (d + 1)
    assert fitted.total == bound.total + 2 * t * d * (math.ceil(t / block) - 1)
    assert (fitted.total > bound.total) == (block < t)  # equal only where one block holds every query


def test_fitted_standard_attention_reads_what_its_blocks_slice_out():  # counted another way
    t, d, M = 300, 32, 2 ** 12
    q, k, v = (torch.randn(1, 1, t, d) for _ in range(3))
    counter = traffic.Traffic(M=M)
    with ah.checks.Watch() as watch:
        traffic.fitted_standard_attention(q, k, v, counter)
    blocks = math.ceil(t / ((M - d) // (d + 1)))
    q_rows = sum(math.prod(s) for op in watch.ops if op.name == "slice" and op.inputs[0] == (1, 1, t, d)
                 for s in op.outputs if s[-2] > 1)  # the blocks of Q, not the one row the counter holds
    assert q_rows == t * d
    assert counter.reads == t * d + blocks * t * d + t * t + t * t + blocks * t * d  # Q, K, S, P and V


def test_fitted_standard_attention_needs_an_M_that_holds_a_row():
    q, k, v = (torch.randn(1, 1, 64, 16) for _ in range(3))
    with pytest.raises(ValueError, match="pass ah.traffic.Traffic"):
        traffic.fitted_standard_attention(q, k, v, traffic.Traffic())
    with pytest.raises(ValueError, match="take a larger M"):
        traffic.fitted_standard_attention(q, k, v, traffic.Traffic(M=32))


def test_standard_attention_refuses_a_limit_it_would_not_check():
    q, k, v = (torch.randn(1, 1, 64, 16) for _ in range(3))
    with pytest.raises(ValueError, match="use fitted_standard_attention for M"):
        traffic.standard_attention(q, k, v, traffic.Traffic(M=2 ** 14))
