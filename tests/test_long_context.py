"""Tests for chapter 11's positions past the trained length: RoPE layouts, ALiBi, stretched frequencies."""

import math

import pytest
import torch
import torch.nn.functional as F
from messages import MUST_BE_EVEN, POSITIVE_INTEGER, POSITIVE_NUMBER, raises_saying

import attn_helpers as ah
from attn_helpers import long_context, position


def test_halves_order_moves_pair_2i_2i1_to_i_i_plus_half():
    order = long_context.halves_order(6)
    assert order.tolist() == [0, 2, 4, 1, 3, 5]
    for i in range(3):  # features 2i and 2i+1 end up at i and i + 3
        assert order[i] == 2 * i and order[i + 3] == 2 * i + 1


def test_rope_halves_is_interleaved_rope_on_reordered_features():
    x = torch.randn(3, 2, 5, 10)
    positions = torch.tensor([3, 9, 0, 40, 7])
    order = long_context.halves_order(10)
    assert torch.equal(long_context.rope_halves(x[..., order], positions), position.rope(x, positions)[..., order])
    assert not torch.allclose(long_context.rope_halves(x, positions), position.rope(x, positions))


def test_rope_halves_matches_rotate_half_written_out():
    x = torch.randn(4, 8)
    angles = torch.arange(4.0)[:, None] * position.frequencies(8).float()  # (t, d/2)
    cos, sin = torch.cos(angles).repeat(1, 2), torch.sin(angles).repeat(1, 2)
    rotated = torch.cat([-x[:, 4:], x[:, :4]], dim=-1)
    assert torch.allclose(long_context.rope_halves(x), x * cos + rotated * sin, atol=1e-6)


def test_rope_with_frequencies_is_chapter_8s_rope_for_its_frequencies():
    x = torch.randn(2, 7, 8)
    assert torch.allclose(long_context.rope_with_frequencies(x, position.frequencies(8), [1, 2, 3, 4, 5, 6, 90]),
                          position.rope(x, [1, 2, 3, 4, 5, 6, 90]), atol=1e-6)


def test_rope_scores_depend_on_the_offset_only_with_any_frequencies():
    theta = long_context.yarn(8, 4, 16)
    q, k = torch.randn(1, 8), torch.randn(1, 8)
    rotate = long_context.rope_with_frequencies
    score = [(rotate(q, theta, [m]) @ rotate(k, theta, [m + 3]).T).item() for m in (0, 5, 50)]
    assert max(score) - min(score) < 1e-4


@pytest.mark.parametrize("h, expected", [
    (8, [2.0 ** -i for i in range(1, 9)]),
    (4, [0.25, 0.0625, 0.015625, 0.00390625]),
    (1, [2.0 ** -8]),
])
def test_alibi_slopes_are_the_papers(h, expected):
    assert torch.allclose(long_context.alibi_slopes(h), torch.tensor(expected))


def test_alibi_slopes_for_a_head_count_that_is_not_a_power_of_two():
    slopes = long_context.alibi_slopes(12)  # the 8 of h = 8, then every other slope of h = 16
    assert torch.allclose(slopes[:8], long_context.alibi_slopes(8))
    assert torch.allclose(slopes[8:], long_context.alibi_slopes(16)[0::2][:4])


def test_alibi_bias_is_causal_linear_and_works_as_sdpa_mask():
    bias = long_context.alibi_bias(2, 4)
    assert bias.shape == (2, 4, 4) and torch.isinf(bias[:, 0, 1:]).all()
    assert bias[1, 3, 0] == -3 * long_context.alibi_slopes(2)[1]
    assert not torch.signbit(bias[:, range(4), range(4)]).any()  # +0 on the diagonal, not -0
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    ours, _ = ah.attention(q, k, v, mask=bias)
    assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=bias), atol=1e-6)


def test_alibi_bias_for_new_tokens_is_aligned_at_the_bottom_right():
    full = long_context.alibi_bias(4, 6)
    assert torch.equal(long_context.alibi_bias(4, 2, 6), full[:, 4:])


def test_interpolation_maps_the_longer_range_onto_the_trained_one():
    theta = position.frequencies(16)
    pi = long_context.interpolation(theta, 4)
    assert torch.allclose(400 * pi, 100 * theta)


def test_ntk_aware_keeps_the_fastest_pair_and_divides_the_slowest_by_s():
    theta, ntk = position.frequencies(64), long_context.ntk_aware(64, 8)
    assert ntk[0] == theta[0] and torch.isclose(ntk[-1], theta[-1] / 8)
    assert ((ntk <= theta) & (ntk >= theta / 8 - 1e-18)).all()


def test_yarn_keeps_fast_pairs_interpolates_slow_ones_and_ramps_between():
    theta, yarn = position.frequencies(128), long_context.yarn(128, 4, 4096)
    turns = 4096 * theta / (2 * math.pi)
    assert torch.equal(yarn[turns > 32], theta[turns > 32])
    assert torch.allclose(yarn[turns < 1], theta[turns < 1] / 4)
    ramp = (turns >= 1) & (turns <= 32)
    assert ramp.sum() > 10 and (yarn[ramp] <= theta[ramp]).all() and (yarn[ramp] >= theta[ramp] / 4).all()


def test_yarn_as_its_authors_code_rounds_the_bounds_to_pair_indices():
    theta = position.frequencies(8)
    # d_k = 8, L = 16: pair 0 turns 2.5 times, the others less than once. The code keeps pair 0 and
    # interpolates pairs 1-3 (what the printed formula does only with beta = 2); the printed formula with
    # beta = 32 puts pair 0 at the start of its ramp.
    for s in (2, 4):
        coded = long_context.yarn(8, s, 16, rounded=True)
        assert torch.equal(coded / theta, torch.tensor([1.0, 1 / s, 1 / s, 1 / s], dtype=theta.dtype))
        assert torch.equal(coded, long_context.yarn(8, s, 16, beta=2))
        assert long_context.yarn(8, s, 16)[0] < 0.6 * theta[0]
    big, big_coded = long_context.yarn(128, 4, 4096), long_context.yarn(128, 4, 4096, rounded=True)
    both = position.frequencies(128)
    assert torch.equal(big_coded[:21], both[:21]) and torch.allclose(big_coded[46:], both[46:] / 4)
    ramp = (big_coded[21:46] / both[21:46]).log()  # linear in the pair index, not in the turns
    assert (ramp.diff() < 0).all() and not torch.allclose(big_coded, big)



def test_yarn_rounded_clips_the_upper_bound_at_d_minus_1_as_the_authors_code_does():
    # d = 8, L = 20000: r = 1 falls at pair index 3.5, rounded up to 4, past the last pair (3). The authors' code
    # clips it at d - 1 = 7, so it stays 4 and pair 3 sits on the ramp at (3 - low) / (4 - low), not at its end.
    d, s, L = 8, 4, 20000
    theta = position.frequencies(d)

    def pair_at(r):
        return d * math.log(L / (2 * math.pi * r)) / (2 * math.log(10000.0))

    low, high = max(math.floor(pair_at(32)), 0), min(math.ceil(pair_at(1)), d - 1)
    assert high == 4
    ramp = ((torch.arange(d // 2, dtype=theta.dtype) - low) / (high - low)).clamp(0, 1)  # 1 = interpolate
    expected = theta / s * ramp + theta * (1 - ramp)
    coded = long_context.yarn(d, s, L, rounded=True)
    assert torch.allclose(coded, expected) and coded[3] > theta[3] / s


def _authors_yarn(d, s, L, alpha, beta, base=10000.0):
    """YaRN's frequencies as the authors' find_correction_range and linear_ramp_mask compute them, written out."""
    def pair_at(r):
        return d * math.log(L / (2 * math.pi * r)) / (2 * math.log(base))

    low, high = max(math.floor(pair_at(beta)), 0), min(math.ceil(pair_at(alpha)), d - 1)
    if low == high:
        high += 0.001  # their guard, for equal bounds only
    keep = 1 - ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    theta = position.frequencies(d, base)
    return theta / s * (1 - keep) + theta * keep


@pytest.mark.parametrize("d, L, alpha, beta", [
    (8, 16, 1, 32), (8, 16, 1, 2), (128, 4096, 1, 32),
    (8, 4, 1, 32),                # both bounds clipped to pair 0: equal, so the guard moves the upper one up
    (8, 4 * 10 ** 9, 1, 32),      # both at pair 7 (= d - 1): equal again
    (8, 4, 10, 20),               # the upper index clipped at 0 lies below the lower one (-1): no guard
    (8, 4 * 10 ** 10, 1, 32),     # the lower index 8 lies above the upper one, clipped at 7: no guard
])
def test_yarn_rounded_is_the_authors_code_including_its_guard(d, L, alpha, beta):
    coded = long_context.yarn(d, 4, L, alpha=alpha, beta=beta, rounded=True)
    assert torch.allclose(coded, _authors_yarn(d, 4, L, alpha, beta), rtol=1e-12, atol=0)


def test_yarn_attention_factor():
    assert long_context.yarn_attention_factor(1) == 1.0
    assert math.isclose(long_context.yarn_attention_factor(16), 0.1 * math.log(16) + 1)


@pytest.mark.parametrize("call, error, message", [
    (lambda: long_context.halves_order(7), ValueError, MUST_BE_EVEN),
    (lambda: long_context.halves_order(True), TypeError, "a bool"),
    (lambda: long_context.rope_halves(torch.randn(3, 5)), ValueError, MUST_BE_EVEN),
    (lambda: long_context.rope_halves(torch.randn(3, 4), positions=[0, 1]), ValueError, "positions must hold t = 3"),
    (lambda: long_context.rope_with_frequencies(torch.randn(3, 4), torch.ones(3)), ValueError, "d/2 = 2 frequencies"),
    (lambda: long_context.rope_with_frequencies(torch.randn(3, 4), [1.0, 0.5]), TypeError, "d/2 = 2 frequencies"),
    (lambda: long_context.rope_with_frequencies(torch.randn(3, 4), torch.ones(2), torch.tensor([1j, 2j, 3j])),
     TypeError, "positions must be numbers"),
    (lambda: long_context.alibi_slopes(0), ValueError, "h " + POSITIVE_INTEGER),
    (lambda: long_context.alibi_bias(2, 5, 3), ValueError, "t_q=5 queries but only t_k=3"),
    (lambda: long_context.interpolation(position.frequencies(8), 0.5), ValueError, "at least 1"),
    (lambda: long_context.ntk_aware(8, "2"), TypeError, "at least 1"),
    (lambda: long_context.ntk_aware(2, 2), ValueError, "d must be at least 4 for NTK-aware scaling"),
    (lambda: long_context.yarn(8, 2, 0), ValueError, "trained_len " + POSITIVE_INTEGER),
    (lambda: long_context.yarn(8, 2, 16, alpha=2, beta=2), ValueError, "beta must be a finite number larger than 2"),
    (lambda: long_context.yarn(8, 2, 16, alpha=0), ValueError, "alpha " + POSITIVE_NUMBER),
    (lambda: long_context.yarn_attention_factor(float("inf")), ValueError, "at least 1"),
])
def test_bad_input_says_what_to_do(call, error, message):
    with raises_saying(error, message):
        call()
