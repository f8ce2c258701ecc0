"""Tests for chapter 12's speculative verification: tree masks, cache rollback, and exact greedy output."""

from fractions import Fraction as F

import pytest
import torch
from messages import raises_saying

import attn_helpers as ah
from attn_helpers.speculative import draft_model, rollback, speculative_generate, tree_mask


def test_chain_is_causal():
    assert torch.equal(tree_mask([-1, 0, 1, 2, 3]), ah.causal_mask(5))


def test_tree_mask_sees_ancestors_only():
    m = tree_mask([-1, 0, 0, 1, -1])
    assert m[3].tolist() == [True, True, False, True, False]  # 3 → 1 → 0
    assert m[2].tolist() == [True, False, True, False, False]
    assert m[4].tolist() == [False, False, False, False, True]


@pytest.mark.parametrize("parents, error, match", [
    ([-1, 1], ValueError, "before"), ([-1, 0, 5], ValueError, "before"), ([-2], ValueError, "parents"),
    ([-1, 0.0], TypeError, "parents"),
])
def test_bad_tree(parents, error, match):
    with raises_saying(error, match):
        tree_mask(parents)


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(3)
    return ah.inference.TinyDecoder(vocab=32, d_model=32, num_heads=4, n_layers=3).double()


def test_rollback_equals_a_fresh_cache(target):
    tokens = torch.randint(32, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, caches = target(tokens)
        _, fresh = target(tokens[:, :7])
    for kept, new in zip(rollback(caches, 7), fresh, strict=True):
        assert torch.allclose(kept.k, new.k, atol=1e-12) and torch.allclose(kept.v, new.v, atol=1e-12)
    with pytest.raises(ValueError, match="holds 12"):
        rollback(caches, 13)


def test_draft_shares_the_target_weights(target):
    draft = draft_model(target, 1)
    assert len(draft.layers) == 1 and draft.embed is target.embed and draft.layers[0] is target.layers[0]
    with pytest.raises(ValueError, match="fewer layers"):
        draft_model(target, 3)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_speculative_output_is_the_targets(target, k):
    prompt = torch.randint(32, (1, 5), generator=torch.Generator().manual_seed(1))
    expected, _ = target.generate(prompt, 20)
    run = speculative_generate(target, draft_model(target, 1), prompt, 20, k)
    assert torch.equal(run.tokens, expected)
    assert run.target_passes == 1 + len(run.accepted) and all(0 <= a <= k for a in run.accepted)
    assert run.draft_passes == k * len(run.accepted)


def test_speculative_bad_input(target):
    with pytest.raises(ValueError, match=r"\(1, t\)"):
        speculative_generate(target, draft_model(target, 1), torch.zeros(2, 4, dtype=torch.long), 5, 2)
    with pytest.raises(ValueError, match="k must"):
        speculative_generate(target, draft_model(target, 1), torch.zeros(1, 4, dtype=torch.long), 5, 0)
    other = ah.inference.TinyDecoder(vocab=target.vocab + 4, d_model=32, num_heads=4, n_layers=1).double()
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(target, other, torch.zeros(1, 4, dtype=torch.long), 5, 2)


P3, Q3 = [F(1, 2), F(1, 3), F(1, 6)], [F(1, 6), F(1, 2), F(1, 3)]


def test_sampling_rule_emits_the_targets_distribution_exactly():
    assert ah.speculative.emitted_distribution(P3, Q3) == P3
    assert ah.speculative.emitted_distribution(P3, P3) == P3  # p = q: nothing is ever rejected
    accept, resample = ah.speculative.sampling_rule(P3, Q3, 1)
    assert accept == F(2, 3) and resample == [1, 0, 0]


def test_resampling_from_p_is_not_the_target():
    emitted = ah.speculative.emitted_distribution(P3, Q3, lambda p, q, x: (min(F(1), p[x] / q[x]), list(p)))
    assert emitted != P3 and sum(emitted) == 1


@pytest.mark.parametrize("k", [0, 1, 4])
def test_expected_tokens_is_the_papers_formula(k):
    alpha = sum(min(a, b) for a, b in zip(P3, Q3, strict=True))
    assert ah.speculative.expected_tokens(P3, Q3, k) == (1 - alpha ** (k + 1)) / (1 - alpha)


@pytest.mark.parametrize("p, error, match", [
    ([F(1, 2), F(1, 3)], ValueError, "sum to exactly 1"), ([0.1, 0.2, 0.7], ValueError, "Fraction"),
    ([F(3, 2), F(-1, 2)], ValueError, "p[1] must be a number of at least 0 (a probability)"),
    ([], ValueError, "non-empty"), ("ab", TypeError, "p must be a list of probabilities, one per token"),
    ([F(1, 2), "1/2"], TypeError, "p[1] must be a number of at least 0"),
])
def test_sampling_bad_input(p, error, match):
    with raises_saying(error, match):
        ah.speculative.emitted_distribution(p, Q3)


def test_sampling_vocabularies_must_match():
    with pytest.raises(ValueError, match="same vocabulary"):
        ah.speculative.emitted_distribution([F(1, 2), F(1, 2)], Q3)


def test_mixed_draft_runs_from_uniform_through_q_to_p():
    assert ah.speculative.mixed_draft(P3, Q3, -1) == [F(1, 3)] * 3
    assert ah.speculative.mixed_draft(P3, Q3, 0) == Q3 and ah.speculative.mixed_draft(P3, Q3, 1) == P3
    half = ah.speculative.mixed_draft(P3, Q3, 0.5)
    assert half == [(a + b) / 2 for a, b in zip(P3, Q3, strict=True)]
    assert sum(ah.speculative.mixed_draft(P3, Q3, 0.35)) == 1  # the decimal 0.35, exactly: the sum stays 1
    with pytest.raises(ValueError, match="mix"):
        ah.speculative.mixed_draft(P3, Q3, -1.5)
    with pytest.raises(ValueError, match="same vocabulary"):
        ah.speculative.mixed_draft([F(1, 2), F(1, 2)], Q3, 0)


def test_plot_sampling_draws_the_overlap_and_one_curve_a_draft():
    import matplotlib.pyplot as plt

    fig = ah.speculative.plot_sampling(P3, Q3, mixes=(-1, 0), k_max=3)
    top, low = fig.axes
    shared = [patch.get_height() for patch in top.patches[:3]]  # the first bars: min(p, q)
    assert shared == [float(min(a, b)) for a, b in zip(P3, Q3, strict=True)]
    assert [len(line.get_xdata()) for line in low.get_lines()] == [4, 4]
    assert low.get_lines()[1].get_ydata()[-1] == float(ah.speculative.expected_tokens(P3, Q3, 3))
    plt.close(fig)
