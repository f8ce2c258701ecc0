"""attn_helpers.language_model and lm_heads: chapter 13's model assembled from the book's parts, and its heads."""

import pytest
import torch
from messages import TOKEN_RANGE, raises_saying

import attn_helpers as ah
from attn_helpers import language_model as lm
from attn_helpers import lm_heads, text


@pytest.fixture(scope="module")
def corpus():
    return text.load_shakespeare()


@pytest.fixture(scope="module")
def model(corpus):
    torch.manual_seed(0)
    return lm.CharLM(corpus.vocab)


def test_the_cache_and_the_tiles_compute_the_plain_pass(model, corpus):
    tokens = lm_heads.held_out(corpus, n=2)  # (2, 64)
    with torch.no_grad():
        plain, caches = model(tokens)
        first, early = model(tokens[:, :40])
        rest, _ = model(tokens[:, 40:], early)
        tiled, _ = model(tokens, tiled=True)
    assert [len(c) for c in caches] == [64, 64]
    assert torch.allclose(torch.cat([first, rest], dim=1), plain, atol=1e-5)
    assert torch.allclose(tiled, plain, atol=1e-5)


def test_the_attention_layer_is_chapter_9s_with_weights(model):
    attn = model.blocks[0].attn
    x = torch.randn(2, 10, 96, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out, cache, weights = attn(x)
        reference, _ = ah.inference.GroupedQueryAttention.forward(attn, x)
    assert torch.allclose(out, reference, atol=1e-6) and weights.shape == (2, 4, 10, 10)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 10)) and (weights.triu(1) == 0).all()


def test_generation_and_speculation_give_the_greedy_text(model, corpus):
    prompt = corpus.encode(lm.PROMPT)[None]
    cached, _ = model.generate(prompt, 20)
    uncached, _ = model.generate(prompt, 20, use_cache=False)
    assert torch.equal(cached, uncached)
    torch.manual_seed(1)
    draft = lm.CharLM(corpus.vocab, d_model=32, n_layers=1)
    spec = lm.speculate(model, draft, corpus, n_new=20)
    assert spec.same and spec.differing == 0 and 0 <= spec.kept <= 1 and spec.greedy_passes == 20
    assert 5 <= spec.target_passes <= 20 and spec.draft_passes == 4 * (spec.target_passes - 1)


def test_bad_input_is_refused(model):
    with raises_saying(ValueError, TOKEN_RANGE, "0"):
        model(torch.tensor([[70]]))
    with pytest.raises(ValueError, match="one cache per layer"):
        model(torch.tensor([[1]]), caches=[])


def test_training_lowers_the_loss_and_is_repeatable(corpus):
    a = lm.train_lm(corpus, seed=3, steps=20, every=10, d_model=32, n_layers=1)
    b = lm.train_lm(corpus, seed=3, steps=20, every=10, d_model=32, n_layers=1)
    assert a.losses == b.losses and len(a.val_losses) == 3  # before training, after steps 10 and 20
    assert a.losses[-1] < a.losses[0] - 0.5


def test_head_measures_read_the_weights(model, corpus):
    windows = lm_heads.held_out(corpus, n=4)
    weights = torch.stack(model.attention_weights(windows))  # (2, 4, 4, 64, 64)
    previous = lm_heads.previous_token_scores(model, windows)
    expected = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3))
    assert previous.shape == (2, 4) and torch.allclose(torch.tensor(previous.values), expected.double(), atol=1e-7)
    twice = lm_heads.repeated(corpus, n=4)
    assert torch.equal(twice[:, :32], twice[:, 32:])
    induction = lm_heads.induction_scores(model, twice)
    w = torch.stack(model.attention_weights(twice))
    i = torch.arange(31)
    assert torch.allclose(torch.tensor(induction.values), w[..., 32 + i, i + 1].mean(dim=(1, 3)).double(), atol=1e-7)
    with pytest.raises(ValueError, match="written twice"):
        lm_heads.induction_scores(model, windows)
    first, second = lm_heads.copy_losses(model, twice)
    assert first > 0 and second > 0


def test_without_head_zeroes_one_heads_columns_in_a_copy(model, corpus):
    before = model.blocks[1].attn.W_o.weight.clone()
    ablated = lm_heads.without_head(model, 2, 3)
    assert torch.equal(model.blocks[1].attn.W_o.weight, before)
    w = ablated.blocks[1].attn.W_o.weight
    assert (w[:, 72:96] == 0).all() and torch.equal(w[:, :72], before[:, :72])
    with pytest.raises(ValueError, match="layer"):
        lm_heads.without_head(model, 0, 0)
    rises = lm_heads.ablation_losses(model, corpus)
    assert rises.shape == (2, 4)
    assert abs(rises.loc[2, "head 3"] - (lm.split_loss(ablated, corpus.val) - lm.split_loss(model, corpus.val))) < 1e-9


def test_split_loss_scores_every_character_of_the_split_once(model, corpus):
    ids = corpus.val[:1000]  # 15 windows of 64, and 39 characters left over
    x, y = ids[:960].view(15, 64), ids[1:961].view(15, 64)
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(x)[0].flatten(0, 1), y.flatten())
    assert abs(lm.split_loss(model, ids) - float(expected)) < 1e-6
    with torch.no_grad():
        short = torch.nn.functional.cross_entropy(model(ids[:-1].view(-1, 999))[0][0], ids[1:])
    assert abs(lm.split_loss(model, ids, context=999) - float(short)) < 1e-6


def test_split_loss_refuses_what_is_not_a_split(model, corpus):
    with pytest.raises(ValueError, match="1-D tensor"):
        lm.split_loss(model, corpus.val[:128].view(2, 64))
    with raises_saying(ValueError, TOKEN_RANGE, "0"):
        lm.split_loss(model, torch.tensor([1, 2, 70, 3]), context=2)
    with pytest.raises(ValueError, match="must fit in the split"):
        lm.split_loss(model, corpus.val[:10], context=10)


def test_closest_call_is_the_least_lead_of_the_best_logit():
    logits = torch.tensor([[[3.0, 1.0, 2.5], [0.0, 4.0, 1.0]]])  # leads 0.5 and 3
    assert lm.closest_call(logits) == 0.5
    with pytest.raises(TypeError, match="logits must be a torch.Tensor"):
        lm.closest_call([[3.0, 1.0]])
