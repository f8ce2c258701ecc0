"""Self-checks for the exercises of chapter 13 (chapter 13; see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable

import torch

from ..language_model import CONTEXT, CharLM, val_loss
from ..lm_heads import ablation_losses, copy_losses, long_windows, loss_by_position, without_head
from ..text import Corpus
from . import CheckFailed, Watch, call, check_value, correct

__all__ = ["inside_and_past_function", "loss_without_function", "sample_function"]


# ------------------------------------------------------------------ ex-ch13-predict

_WINDOWS = {"the chapter's 64 windows of 129 characters": {}, "8 other windows of 129 characters": {"n": 8, "seed": 5}}


@torch.no_grad()
def _halves(model: CharLM, tokens: torch.Tensor, shift: int = 1, one_pass: bool = True) -> tuple[float, float]:
    """Mean loss over positions 0 … CONTEXT-1 and CONTEXT … of ``tokens`` ``(b, 2 · CONTEXT + 1)``, each position
    scored on the character ``shift`` after it; with ``one_pass=False`` the second half runs as a window of its own."""
    x, y = tokens[:, :2 * CONTEXT], tokens[:, shift:2 * CONTEXT + shift]  # (b, 2 · CONTEXT) each
    if one_pass:
        logits, _ = model(x)  # (b, 2 · CONTEXT, vocab)
    else:
        logits = torch.cat([model(x[:, :CONTEXT])[0], model(x[:, CONTEXT:])[0]], dim=1)
    per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(dim=0)  # (2 · CONTEXT,)
    return per[:CONTEXT].mean().item(), per[CONTEXT:].mean().item()


def inside_and_past_function(fn: Callable[[CharLM, torch.Tensor], tuple[float, float]], model: CharLM,
                             corpus: Corpus) -> None:
    """Exercise ex-ch13-predict: ``fn(model, tokens)`` gives the mean loss inside the trained window (positions
    0 … CONTEXT-1 of windows ``(b, 2 · CONTEXT + 1)``) and past it (positions CONTEXT … 2 · CONTEXT - 1)."""
    for given, settings in _WINDOWS.items():
        tokens = long_windows(corpus, **settings)
        with Watch({loss_by_position: "ah.lm_heads.loss_by_position", copy_losses: "ah.lm_heads.copy_losses"}
                   ) as watch:
            answer = call(fn, model, tokens.clone(), name="inside_and_past", given=given)
        if watch.called:
            raise CheckFailed(f"inside_and_past calls {', '.join(sorted(watch.called))}, which scores every position "
                              f"for you: the exercise asks you to do it yourself. Hint: one pass of the model, then "
                              f"the cross-entropy of each position's logits against the character after it.")
        if not isinstance(answer, tuple | list) or len(answer) != 2:
            raise CheckFailed(f"inside_and_past should return two numbers, (inside, past), got {answer!r:.80}.")
        per = loss_by_position(model, tokens)  # (2 · CONTEXT,)
        inside, past = per[:CONTEXT].mean().item(), per[CONTEXT:].mean().item()
        whole = per.mean().item()
        unshifted = _halves(model, tokens, shift=0)  # each position scored on its own character
        two_passes = _halves(model, tokens, one_pass=False)
        mistakes = [
            ("the two numbers are swapped: the first is the loss inside the trained window, the second past it.",
             (past, inside)),
            ("each number is the mean over the whole window: average the first CONTEXT positions and the last "
             "CONTEXT positions separately.", (whole, whole)),
            ("each position is scored on its own character: the logits at position i predict the character AFTER "
             "it, so compare them with the ids shifted by one.", unshifted),
            ("the second half was run as a window of its own, so its positions start again at 0, inside the "
             "trained window: run all 2 · CONTEXT characters in one pass, so that the second half sits past it.",
             two_passes),
        ]
        for (name, value, expected, part) in (("inside", answer[0], inside, 0), ("past", answer[1], past, 1)):
            _check_value_quietly(value, expected, f"inside_and_past(model, tokens)[{part}] ({name}), on {given}",
                                {hint: wrong[part] for hint, wrong in mistakes})
    correct("inside_and_past")


def _check_value_quietly(answer: object, expected: float, name: str, mistakes: dict[str, float]) -> None:
    """:func:`check_value` without its line of praise: the exercise prints one line for all its values."""
    with contextlib.redirect_stdout(io.StringIO()):
        check_value(answer, expected, name, mistakes, atol=1e-5, rtol=0)


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
    interleaved = slice(head, None, attn.num_heads)  # columns head, head + h, head + 2h, …
    mistakes["the heads are not interleaved: splitting the features into heads (a view to (b, t, h, d_k)) keeps each "
             "head's d_k features side by side, one block of columns of W_o per head, not every h-th column."] = \
        _zeroed(model, layer - 1, "W_o", None, interleaved)
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
        _check_value_quietly(answer, expected, f"loss_without(model, corpus, {given})",  # one line for all heads
                            _ablation_mistakes(model, corpus, layer, head))
    correct("loss_without")


# ------------------------------------------------------------------ ex-ch13-sample

_TEMPERATURES, _N_NEW = (1.0, 0.3, 3.0), 40


def _scaled(logits: torch.Tensor, temperature: float, use: str) -> torch.Tensor:
    """The logits divided by the temperature, as they should be, or what a mistake does with it instead."""
    return {"divide": logits / temperature, "multiply": logits * temperature, "ignore": logits}[use]


def _sampler(use: str = "divide", greedy: bool = False, dim: int = -1, position: int = -1):
    @torch.no_grad()
    def sample(model: CharLM, prompt: torch.Tensor, n_new: int, temperature: float,
               generator: torch.Generator) -> torch.Tensor:
        logits, caches = model(prompt)
        tokens = prompt
        for i in range(n_new):
            p = torch.softmax(_scaled(logits[:, position], temperature, use), dim=dim)  # (1, vocab)
            new = p.argmax(-1, keepdim=True) if greedy else torch.multinomial(p, 1, generator=generator)  # (1, 1)
            tokens = torch.cat([tokens, new], dim=1)
            if i + 1 < n_new:
                logits, caches = model(new, caches)
        return tokens
    return sample


_REFERENCE = _sampler()
_MISTAKES = {
    "the temperature divides the logits (a low temperature sharpens the distribution); multiplying by it does the "
    "opposite.": _sampler("multiply"),
    "the temperature is not used: divide the logits by it before the softmax (dividing the probabilities after "
    "it, which are normalised again, changes nothing).": _sampler("ignore"),
    "that is greedy decoding: draw the character from the distribution instead of taking its most likely one.":
        _sampler(greedy=True),
    "the softmax ran over the wrong dimension: the logits of one position are (1, vocab), and the distribution is "
    "over the characters, the last dimension; over the batch's one row every probability is 1, a uniform draw.":
        _sampler(dim=0),
    "the first character was drawn from the prompt's FIRST position, whose logits predict the prompt's second "
    "character: the next character comes from the last position's logits.": _sampler(position=0),
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
