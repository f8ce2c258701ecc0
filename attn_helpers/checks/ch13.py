"""Self-checks for the exercises of chapter 13 (chapter 13; see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable

import torch

from ..language_model import CharLM, val_loss
from ..lm_heads import ablation_losses, without_head
from ..text import Corpus
from . import CheckFailed, Watch, call, check_value, correct

__all__ = ["CONTEXT", "cache_bytes", "loss_without_function", "sample_function"]

CONTEXT = 64  #: exercise ex-ch13-predict: the characters whose keys and values the cache holds (chapter 13)


def cache_bytes(answer: object) -> None:
    """Exercise ex-ch13-predict: bytes of the KV cache of the chapter's model after ``CONTEXT`` characters, float32."""
    model = CharLM(2)  # the chapter's sizes: CharLM's defaults
    layers, g, d_k, per = len(model.blocks), model.blocks[0].attn.num_kv_heads, model.blocks[0].attn.d_k, 4
    right = 2 * layers * g * d_k * per * CONTEXT
    check_value(answer, right, "cache_bytes", {
        "twice the answer: the query heads share key/value heads (grouped-query attention), so the cache holds "
            "g heads of keys and values, not h; or a float32 number was counted as 8 bytes.": 2 * right,
        "half the answer: the cache holds keys AND values, in every layer, each number 4 bytes (float32).": right // 2,
        "eight times the answer: that counts bits, not bytes.": 8 * right,
        "a quarter of the answer: that counts numbers, where a float32 number takes 4 bytes; or it leaves out "
            "the values and one of the layers.": right // 4,
        "that is one character's share: the cache holds every character seen so far.": right // CONTEXT,
    }, atol=0.5, rtol=0)


# ------------------------------------------------------------------ ex-ch13-ablate

_ABLATIONS = [(1, 0), (2, 3), (1, 2)]  # (layer, head), layers counted from 1 as the chapter's tables count them


def _zeroed(model: CharLM, layer: int, part: str, rows: slice | None, cols: slice | None) -> CharLM:
    """A copy of ``model`` with a block of one weight of layer ``layer`` (from 0) set to zero."""
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        weight = getattr(ablated.blocks[layer].attn, part).weight
        weight[rows if rows is not None else slice(None), cols if cols is not None else slice(None)] = 0
    return ablated


def _ablation_mistakes(model: CharLM, corpus: Corpus, layer: int, head: int) -> dict[str, float]:
    attn = model.blocks[layer - 1].attn
    d_k, group = attn.d_k, attn.num_heads // attn.num_kv_heads
    cols = slice(head * d_k, (head + 1) * d_k)
    kv = slice(head // group * d_k, (head // group + 1) * d_k)
    mistakes = {
        "W_o's ROWS are its output features; a head's output enters W_o through d_k of its COLUMNS (nn.Linear "
        "computes x @ W.T).": _zeroed(model, layer - 1, "W_o", cols, None),
        "zeroing a head's queries does not remove it: with all scores 0 it attends uniformly and still adds the "
        "mean of its values. Remove what the head adds to the residual stream.": _zeroed(model, layer - 1, "W_q", cols,
                                                                                         None),
        "the key/value heads are shared by a group of query heads (grouped-query attention): zeroing one removes "
        "more than one head, and only partly. Remove the one head's output.": _zeroed(model, layer - 1, "W_v", kv,
                                                                                      None),
        "layers count from 1 in the chapter's tables, as in the exercise, but model.blocks counts from 0.":
            _zeroed(model, layer % len(model.blocks), "W_o", None, cols),
    }
    if head + 1 < attn.num_heads:
        mistakes["heads count from 0: head i owns the columns i·d_k … (i+1)·d_k - 1 of W_o."] = _zeroed(
            model, layer - 1, "W_o", None, slice((head + 1) * d_k, (head + 2) * d_k))
    return {hint: val_loss(m, corpus) for hint, m in mistakes.items()}


def loss_without_function(fn: Callable[[CharLM, Corpus, int, int], float], model: CharLM, corpus: Corpus) -> None:
    """Exercise ex-ch13-ablate: ``fn(model, corpus, layer, head)`` is the validation loss without that head."""
    before = {name: p.detach().clone() for name, p in model.state_dict().items()}
    for layer, head in _ABLATIONS:
        given = f"layer={layer}, head={head}"
        with Watch({without_head: "ah.lm_heads.without_head", ablation_losses: "ah.lm_heads.ablation_losses"}
                   ) as watch:
            answer = call(fn, model, corpus, layer, head, name="loss_without", given=given)
        if watch.called:
            raise CheckFailed(f"loss_without calls {', '.join(sorted(watch.called))}, which removes the head for you: "
                              f"the exercise asks you not to. Hint: find the head's part of the output projection.")
        if any(not torch.equal(p, before[name]) for name, p in model.state_dict().items()):
            model.load_state_dict(before)
            raise CheckFailed("loss_without changed the model it was given (the check has put its weights back). "
                              "Hint: remove the head from a copy (copy.deepcopy), so the model stays whole for the "
                              "next question.")
        expected = val_loss(without_head(model, layer, head), corpus)
        with contextlib.redirect_stdout(io.StringIO()):  # one line for all the heads, printed below
            check_value(answer, expected, f"loss_without(model, corpus, {given})",
                        _ablation_mistakes(model, corpus, layer, head), atol=1e-5, rtol=0)
    correct("loss_without")


# ------------------------------------------------------------------ ex-ch13-sample

_TEMPERATURES, _N_NEW = (1.0, 0.3, 3.0), 40


def _sampler(scale: Callable[[torch.Tensor, float], torch.Tensor], greedy: bool = False):
    @torch.no_grad()
    def sample(model: CharLM, prompt: torch.Tensor, n_new: int, temperature: float,
               generator: torch.Generator) -> torch.Tensor:
        logits, caches = model(prompt)
        tokens = prompt
        for i in range(n_new):
            p = torch.softmax(scale(logits[:, -1], temperature), dim=-1)  # (1, vocab)
            new = p.argmax(-1, keepdim=True) if greedy else torch.multinomial(p, 1, generator=generator)  # (1, 1)
            tokens = torch.cat([tokens, new], dim=1)
            if i + 1 < n_new:
                logits, caches = model(new, caches)
        return tokens
    return sample


_REFERENCE = _sampler(lambda z, T: z / T)
_MISTAKES = {
    "the temperature divides the logits (a low temperature sharpens the distribution); multiplying by it does the "
    "opposite.": _sampler(lambda z, T: z * T),
    "the temperature is not used: divide the logits by it before the softmax (dividing the probabilities after "
    "it, which are normalised again, changes nothing).": _sampler(lambda z, T: z),
    "that is greedy decoding: draw the character from the distribution instead of taking its most likely one.":
        _sampler(lambda z, T: z / T, greedy=True),
}


def sample_function(fn: Callable[..., torch.Tensor], model: CharLM, prompt: torch.Tensor) -> None:
    """Exercise ex-ch13-sample: ``fn(model, prompt, n_new, temperature, generator)`` samples through the cache."""
    lengths: list[int] = []
    hook = model.register_forward_pre_hook(lambda _, args: lengths.append(args[0].shape[1]))
    try:
        for temperature in _TEMPERATURES:
            given = f"a prompt of {prompt.shape[1]} characters, {_N_NEW} new ones, at temperature {temperature}"
            lengths.clear()
            answer = call(fn, model, prompt, _N_NEW, temperature, torch.Generator().manual_seed(7), name="sample",
                          given=given)
            passes = list(lengths)
            hook.remove()
            expected = _REFERENCE(model, prompt, _N_NEW, temperature, torch.Generator().manual_seed(7))
            _check_sample(answer, expected, model, prompt, temperature, passes)
            hook = model.register_forward_pre_hook(lambda _, args: lengths.append(args[0].shape[1]))
    finally:
        hook.remove()
    correct("sample")


def _check_sample(answer: object, expected: torch.Tensor, model: CharLM, prompt: torch.Tensor, temperature: float,
                  passes: list[int]) -> None:
    name = f"sample at temperature {temperature}"
    if not isinstance(answer, torch.Tensor) or answer.dtype != torch.long:
        raise CheckFailed(f"{name} should return a tensor of character ids (torch.long), got "
                          f"{getattr(answer, 'dtype', type(answer).__name__)}.")
    if answer.shape != expected.shape:
        raise CheckFailed(f"{name} returned shape {tuple(answer.shape)}, expected {tuple(expected.shape)}: the prompt "
                          f"followed by the n_new sampled characters. Hint: count the characters you append.")
    if passes[:1] != [prompt.shape[1]] or any(n != 1 for n in passes[1:]):
        raise CheckFailed(f"{name} passed {passes} characters to the model, pass by pass: after the prompt's pass, "
                          f"each pass should take only the newest character. Hint: keep the caches the model "
                          f"returns and give them back with the new character.")
    if len(passes) > _N_NEW:
        raise CheckFailed(f"{name} ran the model {len(passes)} times for {_N_NEW} characters. Hint: the prompt's pass "
                          f"gives the first character's logits; the last character needs no pass after it.")
    for hint, wrong in _MISTAKES.items():
        made = wrong(model, prompt, _N_NEW, temperature, torch.Generator().manual_seed(7))
        if torch.equal(answer, made) and not torch.equal(made, expected):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if not torch.equal(answer, expected):
        raise CheckFailed(f"{name} drew other characters than the check did with the same generator. Hint: draw one "
                          f"character per step, with torch.multinomial and the generator you were given, from the "
                          f"softmax of the last position's logits divided by the temperature.")
