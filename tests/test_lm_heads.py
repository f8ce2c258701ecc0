"""attn_helpers.lm_heads: the measures chapter 13 takes of its model's heads (the first ones are also tested in
test_language_model.py), on an untrained CharLM and on one whose heads spread their weight evenly."""

import copy

import pytest
import torch

from attn_helpers import language_model as lm
from attn_helpers import lm_heads, text


@pytest.fixture(scope="module")
def corpus():
    return text.load_shakespeare()


@pytest.fixture(scope="module")
def model(corpus):
    torch.manual_seed(0)
    return lm.CharLM(corpus.vocab)


@pytest.fixture(scope="module")
def even(model):
    """The model with W_q = 0: every score is 0, so every head spreads its weight evenly over what it sees."""
    flat = copy.deepcopy(model)
    with torch.no_grad():
        for block in flat.blocks:
            block.attn.W_q.weight.zero_()
    return flat


def test_an_even_head_scores_what_the_chapter_says(even, corpus):
    windows = lm_heads.held_out(corpus, n=2)  # (2, 64)
    harmonic = sum(1 / (i + 1) for i in range(1, 64)) / 63  # the mean of 1/2 … 1/64
    assert torch.allclose(torch.tensor(lm_heads.previous_token_scores(even, windows).values),
                          torch.full((2, 4), harmonic, dtype=torch.float64), atol=1e-6)
    assert abs(harmonic - 0.06) < 0.005
    recent = sum(8 / (i + 1) for i in range(8, 64)) / 56  # the mean of 8 / (i + 1) over queries 8 … 63
    assert torch.allclose(torch.tensor(lm_heads.recent_weight(even, windows).values),
                          torch.full((2, 4), recent, dtype=torch.float64), atol=1e-6)
    assert abs(recent - 0.29) < 0.005


def test_recent_weight_reads_the_last_k_keys(model, corpus):
    windows = lm_heads.held_out(corpus, n=3)
    w = torch.stack(model.attention_weights(windows))  # (2, 3, 4, 64, 64)
    k = 5
    expected = torch.stack([w[..., i, i - k + 1:i + 1].sum(-1) for i in range(k, 64)], dim=-1).mean(dim=(1, 3))
    assert torch.allclose(torch.tensor(lm_heads.recent_weight(model, windows, k=k).values), expected.double(),
                          atol=1e-6)
    last = lm_heads.recent_weight(model, windows, k=63).values  # query 63 alone: all its keys but key 0
    assert torch.allclose(torch.tensor(last), 1 - w[..., 63, 0].mean(dim=1).double(), atol=1e-6)
    with pytest.raises(ValueError, match="k"):
        lm_heads.recent_weight(model, windows, k=64)


def test_the_control_holds_the_same_passages_after_others(corpus):
    twice, control = lm_heads.repeated(corpus, n=4), lm_heads.after_another(corpus, n=4)
    assert torch.equal(control[:, 32:], twice[:, 32:]) and torch.equal(control[1:, :32], twice[:-1, :32])
    assert not torch.equal(control[:, :32], control[:, 32:])


def test_loss_by_position_is_the_cross_entropy_of_each_next_character(model, corpus):
    tokens = lm_heads.long_windows(corpus, n=3)
    assert tokens.shape == (3, 2 * lm.CONTEXT + 1)
    per = lm_heads.loss_by_position(model, tokens)
    assert per.shape == (2 * lm.CONTEXT,)
    with torch.no_grad():
        logits, _ = model(tokens[:, :-1])
    for i in (0, 63, 64, 127):
        expected = torch.nn.functional.cross_entropy(logits[:, i], tokens[:, i + 1])
        assert abs(per[i] - expected) < 1e-5
    first, second = lm_heads.copy_losses(model, tokens[:, :64])
    short = lm_heads.loss_by_position(model, tokens[:, :64])
    assert abs(first - short[:31].mean().item()) < 1e-6 and abs(second - short[32:].mean().item()) < 1e-6


def test_every_head_counts_layers_from_1_and_heads_from_0(model):
    assert lm_heads.every_head(model) == [(1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert lm_heads.every_head(lm.CharLM(5, n_layers=1, num_heads=2, num_kv_heads=1)) == [(1, 0), (1, 1)]
