"""Reading the heads of chapter 13's trained language model: what each head looks at, and what it is worth.

Chapter 8 asked of a two-layer model whether one head looks at the previous token and another at the token after an
earlier copy of the current one (an induction head). :func:`previous_token_scores` and :func:`induction_scores` ask the
same of every head of a :class:`~attn_helpers.language_model.CharLM`, on held-out text; :func:`without_head` and
:func:`ablation_losses` measure what the validation loss loses when one head's output is removed.
"""

from __future__ import annotations

import copy

import pandas as pd
import torch
import torch.nn.functional as F

from . import validate
from .language_model import CONTEXT, CharLM, val_loss
from .text import Corpus, batch

__all__ = ["held_out", "previous_token_scores", "repeated", "induction_scores", "copy_losses", "without_head",
           "ablation_losses"]


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


def repeated(corpus: Corpus, n: int = 16, m: int = CONTEXT // 2, seed: int = 99) -> torch.Tensor:
    """``n`` fixed passages of ``m`` validation characters, each written twice: ``(n, 2m)`` (chapter 13)."""
    passages = held_out(corpus, n, m, seed)  # (n, m)
    return torch.cat([passages, passages], dim=1)  # (n, 2m)


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
def copy_losses(model: CharLM, tokens: torch.Tensor) -> tuple[float, float]:
    """The model's mean loss on the first and on the second copy of passages written twice (chapter 13).

    ``tokens`` ``(b, 2m)`` as :func:`repeated` makes them. The first copy's loss is over characters 1 … m-1 (the first
    has nothing before it), the second's over characters m+1 … 2m-1 (the copy's first character cannot be known).
    """
    m = tokens.shape[1] // 2
    logits, _ = model(tokens[:, :-1])  # (b, 2m - 1, vocab): the prediction of characters 1 … 2m-1
    per_char = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (b, 2m - 1)
    return per_char[:, :m - 1].mean().item(), per_char[:, m:].mean().item()


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
    """The validation loss (:func:`~attn_helpers.language_model.val_loss`) of the model without each head, minus the
    loss with all of them (chapter 13): rows layers, columns heads; larger means the head mattered more."""
    full = val_loss(model, corpus)
    rise = [[val_loss(without_head(model, layer + 1, head), corpus) - full for head in range(block.attn.num_heads)]
            for layer, block in enumerate(model.blocks)]
    return _table(torch.tensor(rise))
