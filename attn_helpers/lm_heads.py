"""Reading the heads of chapter 13's trained language model: what each head looks at, and what it is worth.

Chapter 8 asked of a two-layer model whether one head looks at the previous token and another at the token after an
earlier copy of the current one (an induction head). :func:`previous_token_scores`, :func:`recent_weight` and
:func:`induction_scores` ask the same of every head of a :class:`~attn_helpers.language_model.CharLM`, on held-out
text; :func:`copy_losses` asks whether a passage is easier the second time; :func:`without_head` and
:func:`ablation_losses` measure what the validation loss loses when one head's output is removed;
:func:`loss_by_position` on :func:`long_windows` measures the model past the length it was trained on.
"""

from __future__ import annotations

import copy

import pandas as pd
import torch
import torch.nn.functional as F

from . import validate
from .language_model import CONTEXT, CharLM, split_loss
from .text import Corpus, batch

__all__ = ["held_out", "previous_token_scores", "recent_weight", "repeated", "after_another", "induction_scores",
           "loss_by_position", "copy_losses", "every_head", "without_head", "ablation_losses", "long_windows"]


def held_out(corpus: Corpus, n: int = 16, context: int = CONTEXT, seed: int = 99) -> torch.Tensor:
    """``n`` fixed windows ``(n, context)`` of the validation text (chapter 13)."""
    return batch(corpus.val, n, context, torch.Generator().manual_seed(seed))[0]


def _table(scores: torch.Tensor) -> pd.DataFrame:
    """A ``(layers, heads)`` tensor as a table: rows layers 1 …, columns "head 0" …"""
    index = pd.Index(range(1, scores.shape[0] + 1), name="layer")
    return pd.DataFrame(scores.double().numpy(), index=index, columns=[f"head {j}" for j in range(scores.shape[1])])


def previous_token_scores(model: CharLM, tokens: torch.Tensor) -> pd.DataFrame:
    """Each head's mean weight from a query to the key just before it, over queries 1 … t-1 of ``tokens`` ``(b, t)``
    (chapter 13). Rows are layers, columns heads; a head that only looks back one place scores 1."""
    weights = torch.stack(model.attention_weights(tokens))  # (layers, b, h, t, t)
    return _table(weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3)))  # (layers, h)


def recent_weight(model: CharLM, tokens: torch.Tensor, k: int = 8) -> pd.DataFrame:
    """Each head's mean weight on the last ``k`` characters (the query's own and the ``k - 1`` before it), over the
    queries ``k`` … t-1 of ``tokens`` ``(b, t)``, which see more than ``k`` (chapter 13). Rows are layers, columns
    heads; a head that looks no further back than ``k - 1`` characters scores 1."""
    _, t = validate.token_ids(tokens, model.vocab)
    k = validate.integer(k, "k", minimum=1, maximum=t - 1, why="some query must see more than k keys")
    weights = torch.stack(model.attention_weights(tokens))  # (layers, b, h, t, t)
    distance = torch.arange(t)[:, None] - torch.arange(t)  # (t, t): how far back key j is from query i
    recent = ((distance >= 0) & (distance < k)).to(weights.dtype)  # (t, t): 1 on the last k keys of each query
    return _table((weights * recent).sum(dim=-1)[..., k:].mean(dim=(1, 3)))  # (layers, h)


def repeated(corpus: Corpus, n: int = 16, m: int = CONTEXT // 2, seed: int = 99) -> torch.Tensor:
    """``n`` fixed passages of ``m`` validation characters, each written twice: ``(n, 2m)`` (chapter 13)."""
    passages = held_out(corpus, n, m, seed)  # (n, m)
    return torch.cat([passages, passages], dim=1)  # (n, 2m)


def after_another(corpus: Corpus, n: int = 16, m: int = CONTEXT // 2, seed: int = 99) -> torch.Tensor:
    """The passages of :func:`repeated`, each after another of them rather than after itself: ``(n, 2m)``, the
    control of the copy test (chapter 13)."""
    passages = held_out(corpus, n, m, seed)  # (n, m)
    return torch.cat([passages.roll(1, dims=0), passages], dim=1)  # (n, 2m): passage i - 1, then passage i


def induction_scores(model: CharLM, tokens: torch.Tensor) -> pd.DataFrame:
    """Each head's mean weight, in the second copy of a passage written twice, on the character after the current
    character's earlier copy (chapter 13).

    ``tokens`` ``(b, 2m)``: passages of m characters, each written twice (:func:`repeated`). Query ``m + i`` (the copy
    of character i) is scored on key ``i + 1``, for i = 0 … m-2: where an induction head looks.
    """
    b, t = validate.token_ids(tokens, model.vocab)
    m = t // 2
    if not torch.equal(tokens[:, :m], tokens[:, m:]):  # an odd t splits into halves of different lengths: False
        raise ValueError("tokens must be passages written twice, (b, 2m) with tokens[:, :m] == tokens[:, m:]; "
                         "make them with repeated(corpus).")
    weights = torch.stack(model.attention_weights(tokens))  # (layers, b, h, t, t)
    i = torch.arange(m - 1)
    return _table(weights[..., m + i, i + 1].mean(dim=(1, 3)))  # (layers, h)


@torch.no_grad()
def loss_by_position(model: CharLM, tokens: torch.Tensor) -> torch.Tensor:
    """The model's loss (nats) at each position of ``tokens`` ``(b, t)``, averaged over the b rows: ``(t - 1,)``,
    entry i the loss of predicting character i + 1 from characters 0 … i, in one pass (chapter 13)."""
    validate.token_ids(tokens, model.vocab)
    logits, _ = model(tokens[:, :-1])  # (b, t - 1, vocab): the prediction of characters 1 … t-1
    return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(dim=0)  # (t - 1,)


def copy_losses(model: CharLM, tokens: torch.Tensor) -> tuple[float, float]:
    """The model's mean loss on the first and on the second half of passages ``(b, 2m)`` (chapter 13): a passage
    written twice (:func:`repeated`), or one after another (:func:`after_another`).

    The first half's loss is over characters 1 … m-1 (the first has nothing before it), the second's over characters
    m+1 … 2m-1 (the second half's first character cannot be known from the first's).
    """
    m = tokens.shape[1] // 2
    per_char = loss_by_position(model, tokens)  # (2m - 1,): entry i predicts character i + 1
    return per_char[:m - 1].mean().item(), per_char[m:].mean().item()


def every_head(model: CharLM) -> list[tuple[int, int]]:
    """Every ``(layer, head)`` of ``model``, layers counted from 1 and heads from 0, as the tables count them
    (chapter 13)."""
    return [(layer, head) for layer, block in enumerate(model.blocks, start=1) for head in range(block.attn.num_heads)]


def without_head(model: CharLM, layer: int, head: int) -> CharLM:
    """A copy of ``model`` whose head ``head`` of layer ``layer`` (counted from 1, as the tables do) adds nothing:
    its columns of ``W_o`` are zero (chapter 13). The model itself is unchanged."""
    layer = validate.integer(layer, "layer", minimum=1, maximum=len(model.blocks))
    attn = model.blocks[layer - 1].attn
    head = validate.integer(head, "head", minimum=0, maximum=attn.num_heads - 1)
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        ablated.blocks[layer - 1].attn.W_o.weight[:, head * attn.d_k:(head + 1) * attn.d_k] = 0  # (d_model, d_k)
    return ablated


def ablation_losses(model: CharLM, corpus: Corpus) -> pd.DataFrame:
    """The loss of the model without each head over the whole validation text
    (:func:`~attn_helpers.language_model.split_loss`), minus the loss with all of them (chapter 13): rows layers,
    columns heads; larger means the head mattered more."""
    full = split_loss(model, corpus.val)
    rise = [[split_loss(without_head(model, layer + 1, head), corpus.val) - full
             for head in range(block.attn.num_heads)] for layer, block in enumerate(model.blocks)]
    return _table(torch.tensor(rise, dtype=torch.float64))


def long_windows(corpus: Corpus, n: int = 64, seed: int = 99) -> torch.Tensor:
    """``n`` fixed windows of the validation text, each twice the trained ``CONTEXT`` and one character more:
    ``(n, 2 · CONTEXT + 1)``, so that a pass over the first ``2 · CONTEXT`` predicts every character after the first
    (chapter 13)."""
    return held_out(corpus, n, 2 * CONTEXT + 1, seed)
