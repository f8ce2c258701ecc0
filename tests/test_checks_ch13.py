"""Chapter 13's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import copy

import pytest
import torch
import torch.nn.functional as F

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


# ex-ch13-predict: the loss inside and past the trained window


def reference_inside_and_past(model, tokens):
    with torch.no_grad():
        logits, _ = model(tokens[:, :-1])
    per = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    return per[:, :64].mean().item(), per[:, 64:].mean().item()


def test_inside_and_past_accepts_reference(model, corpus, capsys):
    check.inside_and_past_function(reference_inside_and_past, model, corpus)
    assert "✓ inside_and_past: correct" in capsys.readouterr().out


def test_inside_and_past_accepts_a_pass_over_all_129_characters(model, corpus, capsys):
    def whole(model, tokens):  # the 129th position's logits are computed and not used
        with torch.no_grad():
            logits, _ = model(tokens)
        per = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        return per[:, :64].mean().item(), per[:, 64:].mean().item()

    check.inside_and_past_function(whole, model, corpus)
    assert "correct" in capsys.readouterr().out


def _halves(shift=1, two_passes=False, swapped=False, whole=False):
    def inside_and_past(model, tokens):
        x, y = tokens[:, :128], tokens[:, shift:128 + shift]
        with torch.no_grad():
            logits = torch.cat([model(x[:, :64])[0], model(x[:, 64:])[0]], 1) if two_passes else model(x)[0]
        per = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")
        inside, past = per[:, :64].mean().item(), per[:, 64:].mean().item()
        if whole:
            return per.mean().item(), per.mean().item()
        return (past, inside) if swapped else (inside, past)
    return inside_and_past


def _shortcut(model, tokens):
    per = lm_heads.loss_by_position(model, tokens)
    return per[:64].mean().item(), per[64:].mean().item()


@pytest.mark.parametrize("wrong, hint", [
    (_halves(swapped=True), "swapped"),
    (_halves(whole=True), "mean over the whole window"),
    (_halves(shift=0), "predict the character AFTER"),
    (_halves(two_passes=True), "window of its own"),
    (_shortcut, "loss_by_position"),
    (lambda model, tokens: lm_heads.copy_losses(model, tokens), "copy_losses"),
    (lambda model, tokens: 2.0, "two numbers"),
    (lambda model, tokens: (2.0, 3.0), "is not right"),
])
def test_inside_and_past_rejects_mistakes(model, corpus, wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.inside_and_past_function(wrong, model, corpus)


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


def _zeroing(part, rows, layer_from_zero=False, next_head=False, in_place=False, interleaved=False):
    def loss_without(model, corpus, layer, head):
        ablated = model if in_place else copy.deepcopy(model)
        attn = ablated.blocks[layer if layer_from_zero else layer - 1].attn
        d_k = attn.d_k
        h = head + 1 if next_head else head
        if part in ("W_k", "W_v"):
            h = head // (attn.num_heads // attn.num_kv_heads)
        block = slice(h, None, attn.num_heads) if interleaved else slice(h * d_k, (h + 1) * d_k)
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
    (_zeroing("W_o", rows=False, interleaved=True), "not interleaved"),
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


def _sampler(scale=lambda z, T: z / T, greedy=False, cached=True, extra_pass=False, one_short=False, dim=-1,
             position=-1):
    @torch.no_grad()
    def sample(model, prompt, n_new, temperature, generator):
        tokens = prompt
        logits, caches = model(prompt)
        for i in range(n_new - 1 if one_short else n_new):
            probs = torch.softmax(scale(logits[:, position], temperature), dim=dim)
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
    (_sampler(dim=0), "wrong dimension"),
    (_sampler(position=0), "FIRST position"),
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
