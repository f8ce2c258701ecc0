"""Tests for chapter 12's speculative verification: tree masks, cache rollback, and exact greedy output."""

import pytest
import torch

import attn_helpers as ah
from attn_helpers.speculative import draft_model, rollback, speculative_generate, tree_mask


def test_chain_is_causal():
    assert torch.equal(tree_mask([-1, 0, 1, 2, 3]), ah.causal_mask(5))


def test_tree_mask_sees_ancestors_only():
    m = tree_mask([-1, 0, 0, 1, -1])
    assert m[3].tolist() == [True, True, False, True, False]  # 3 → 1 → 0
    assert m[2].tolist() == [True, False, True, False, False]
    assert m[4].tolist() == [False, False, False, False, True]


@pytest.mark.parametrize("parents, match", [([-1, 1], "before"), ([-1, 0, 5], "before"), ([-2], "parents"),
                                            ([-1, 0.0], "parents")])
def test_bad_tree(parents, match):
    with pytest.raises(ValueError, match=match):
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
