"""Chapter 13's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import copy

import pytest
import torch

from attn_helpers import language_model, lm_heads, text
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch13 as check


@pytest.fixture(scope="module")
def corpus():
    return text.load_shakespeare()


@pytest.fixture(scope="module")
def model(corpus):
    torch.manual_seed(0)
    return language_model.CharLM(corpus.vocab)  # untrained: its heads still differ, which is all the checks need


# ex-ch13-predict: the bytes of the cache of a full window

RIGHT = 2 * 2 * 2 * 24 * 4 * 64  # keys and values, layers, key/value heads, d_k, bytes, characters


def test_cache_bytes_accepts_reference(capsys):
    check.cache_bytes(RIGHT)
    assert "✓ cache_bytes: correct" in capsys.readouterr().out


def test_cache_bytes_accepts_the_measured_cache(model, capsys):
    with torch.no_grad():
        _, caches = model(torch.zeros(1, check.CONTEXT, dtype=torch.long))
    check.cache_bytes(sum(c.nbytes for c in caches))
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (2 * 2 * 4 * 24 * 4 * 64, "g heads of keys and values, not h"),  # a key and value head per query head
    (2 * 2 * 24 * 4 * 64, "keys AND values"),  # keys only, or one layer
    (2 * 2 * 2 * 24 * 4 * 64 * 8, "counts bits"),
    (2 * 2 * 24 * 4 * 64 // 2, "a quarter"),  # keys only, one layer
    (2 * 2 * 2 * 24 * 4, "one character's share"),
    (2 * 2 * 2 * 24 * 64, "counts numbers"),
    (12345, "is not right"),
    ("49152", "should be a number"),
])
def test_cache_bytes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.cache_bytes(wrong)


# ex-ch13-ablate: the loss without one head


def reference_loss_without(model, corpus, layer, head):
    ablated = copy.deepcopy(model)
    attn = ablated.blocks[layer - 1].attn
    with torch.no_grad():
        attn.W_o.weight[:, head * attn.d_k:(head + 1) * attn.d_k] = 0
    return language_model.val_loss(ablated, corpus)


def test_loss_without_accepts_reference(model, corpus, capsys):
    check.loss_without_function(reference_loss_without, model, corpus)
    assert "✓ loss_without: correct" in capsys.readouterr().out


def _zeroing(part, rows, layer_from_zero=False, next_head=False, in_place=False):
    def loss_without(model, corpus, layer, head):
        ablated = model if in_place else copy.deepcopy(model)
        attn = ablated.blocks[layer if layer_from_zero else layer - 1].attn
        d_k = attn.d_k
        h = head + 1 if next_head else head
        if part in ("W_k", "W_v"):
            h = head // (attn.num_heads // attn.num_kv_heads)
        block = slice(h * d_k, (h + 1) * d_k)
        with torch.no_grad():
            weight = getattr(attn, part).weight
            if rows:
                weight[block, :] = 0
            else:
                weight[:, block] = 0
        return language_model.val_loss(ablated, corpus)
    return loss_without


@pytest.mark.parametrize("wrong, hint", [
    (_zeroing("W_o", rows=True), "ROWS are its output features"),
    (_zeroing("W_q", rows=True), "zeroing a head's queries does not remove it"),
    (_zeroing("W_v", rows=True), "key/value heads are shared"),
    (_zeroing("W_o", rows=False, layer_from_zero=True), "model.blocks counts from 0|layer=2"),
    (_zeroing("W_o", rows=False, next_head=True), "heads count from 0|head=3"),
    (lambda model, corpus, layer, head: language_model.val_loss(model, corpus), "is not right"),
    (lambda model, corpus, layer, head: "1.9", "should be a number"),
])
def test_loss_without_rejects_mistakes(model, corpus, wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.loss_without_function(wrong, model, corpus)


def test_loss_without_rejects_changing_the_model_and_restores_it(model, corpus):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckFailed, match="changed the model"):
        check.loss_without_function(_zeroing("W_o", rows=False, in_place=True), model, corpus)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_loss_without_rejects_the_forbidden_shortcut(model, corpus):
    def shortcut(model, corpus, layer, head):
        return language_model.val_loss(lm_heads.without_head(model, layer, head), corpus)

    with pytest.raises(CheckFailed, match="without_head"):
        check.loss_without_function(shortcut, model, corpus)


# ex-ch13-sample: sampling through the cache


@torch.no_grad()
def reference_sample(model, prompt, n_new, temperature, generator):
    logits, caches = model(prompt)
    tokens = prompt
    for i in range(n_new):
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
        new = torch.multinomial(probs, 1, generator=generator)
        tokens = torch.cat([tokens, new], dim=1)
        if i < n_new - 1:
            logits, caches = model(new, caches)
    return tokens


@pytest.fixture(scope="module")
def prompt(corpus):
    return corpus.encode(language_model.PROMPT)[None]


def test_sample_accepts_reference(model, prompt, capsys):
    check.sample_function(reference_sample, model, prompt)
    assert "✓ sample: correct" in capsys.readouterr().out


def _sampler(scale=lambda z, T: z / T, greedy=False, cached=True, extra_pass=False, one_short=False):
    @torch.no_grad()
    def sample(model, prompt, n_new, temperature, generator):
        tokens = prompt
        logits, caches = model(prompt)
        for i in range(n_new - 1 if one_short else n_new):
            probs = torch.softmax(scale(logits[:, -1], temperature), dim=-1)
            new = probs.argmax(-1, keepdim=True) if greedy else torch.multinomial(probs, 1, generator=generator)
            tokens = torch.cat([tokens, new], dim=1)
            if i < n_new - 1 or extra_pass:
                logits, caches = model(new, caches) if cached else model(tokens)
        return tokens
    return sample


@pytest.mark.parametrize("wrong, hint", [
    (_sampler(scale=lambda z, T: z * T), "multiplying by it does the opposite"),
    (_sampler(scale=lambda z, T: z), "the temperature is not used"),
    (_sampler(greedy=True), "greedy decoding"),
    (_sampler(scale=lambda z, T: torch.log(torch.softmax(z, -1) * T)), "temperature is not used"),
    (_sampler(cached=False), "only the newest character"),  # the forbidden shortcut: no cache
    (_sampler(extra_pass=True), "needs no pass after it"),
    (_sampler(one_short=True), "count the characters you append"),
    (_sampler(scale=lambda z, T: z / (T + 0.3)), "drew other characters"),
    (lambda model, prompt, n_new, temperature, generator: prompt.float(), "torch.long"),
])
def test_sample_rejects_mistakes(model, prompt, wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.sample_function(wrong, model, prompt)
