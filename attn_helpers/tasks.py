"""Associative recall, the only task in this module: a query must find a key by what it is, not where it is.

Chapter 4 trains a head on it and chapter 12 compares softmax and linear attention on it; the module keeps
the general name ``tasks`` because both chapters import it so. Chapter 4's other task, copying a neighbour,
is in ``attn_helpers.training``, chapter 5's in ``attn_helpers.heads_task``.

A sequence holds ``n_pairs`` key–value pairs, each one token, and ends with a query token that names
one of the keys; the answer is that key's value. Keys are letters (``A``, ``B``, …), all different
within a sequence; values are digits (``0``–``9``), which may repeat. Each token is a vector of
``n_keys + n_values + 1`` features: the one-hot code of its key, the one-hot code of its value (all
zero for the query token), and a last feature that is 1 only for the query token. There are no
position features: the pairs come in a random order, so only their content can tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .training import LETTERS, TrainResult, fit, torch_threads

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "recall_features",
    "encode_recall",
    "recall_batch",
    "recall_labels",
    "recall_logits",
    "recall_accuracy",
    "train_recall",
    "RecallComparison",
    "compare_recall",
]


def _check_task(n_pairs: int, n_keys: int, n_values: int) -> None:
    validate.integer(n_pairs, "n_pairs", minimum=1)
    validate.integer(n_keys, "n_keys", minimum=1)
    validate.integer(n_values, "n_values", minimum=2)
    if n_keys > len(LETTERS):
        raise ValueError(f"n_keys={n_keys} is larger than the {len(LETTERS)} letters used as key names.")
    if n_values > 10:
        raise ValueError(f"n_values={n_values} is larger than the 10 digits used as value names.")
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs={n_pairs} pairs need n_pairs different keys, but there are only n_keys={n_keys}: "
            f"use n_pairs <= n_keys."
        )


def recall_features(n_keys: int = 8, n_values: int = 10) -> list[str]:
    """Names of the ``n_keys + n_values + 1`` input features: ``"key A"`` …, ``"value 0"`` …, ``"query"``
    (chapter 4)."""
    _check_task(1, n_keys, n_values)
    return [f"key {LETTERS[i]}" for i in range(n_keys)] + [f"value {i}" for i in range(n_values)] + ["query"]


def encode_recall(
    keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor, n_keys: int = 8, n_values: int = 10,
) -> torch.Tensor:
    """The input ``x`` ``(b, n_pairs + 1, n_keys + n_values + 1)`` of pairs ``(keys[:, i], values[:, i])``
    ``(b, n_pairs)`` followed by a query token for key ``query`` ``(b,)`` (chapter 4)."""
    if keys.dim() != 2 or values.shape != keys.shape or query.shape != keys.shape[:1]:
        raise ValueError(
            f"keys and values must be (b, n_pairs) and query (b,); got {tuple(keys.shape)}, "
            f"{tuple(values.shape)} and {tuple(query.shape)}."
        )
    if keys.min() < 0 or keys.max() >= n_keys or query.min() < 0 or query.max() >= n_keys:
        raise ValueError(f"key ids must lie in 0 … n_keys - 1 = {n_keys - 1}.")
    if values.min() < 0 or values.max() >= n_values:
        raise ValueError(f"value ids must lie in 0 … n_values - 1 = {n_values - 1}.")
    b, n_pairs = keys.shape
    pairs = torch.cat([F.one_hot(keys, n_keys), F.one_hot(values, n_values),
                       torch.zeros(b, n_pairs, 1, dtype=torch.long)], dim=-1)  # (b, n_pairs, d)
    asking = torch.cat([F.one_hot(query, n_keys), torch.zeros(b, n_values, dtype=torch.long),
                        torch.ones(b, 1, dtype=torch.long)], dim=-1)  # (b, d)
    return torch.cat([pairs, asking[:, None]], dim=1).float()  # (b, t, d) with t = n_pairs + 1


def recall_batch(
    batch_size: int, n_pairs: int = 6, n_keys: int = 8, n_values: int = 10, generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of associative recall (chapter 4): ``(x, keys, values, query, target)``.

    ``x`` ``(b, t, n_keys + n_values + 1)`` with ``t = n_pairs + 1`` (see :func:`encode_recall`);
    ``keys``, ``values`` ``(b, n_pairs)``: the pairs, keys all different; ``query`` ``(b,)``: one of
    the sequence's keys; ``target`` ``(b,)``: its value. ``generator`` makes the batch reproducible.
    """
    _check_task(n_pairs, n_keys, n_values)
    validate.integer(batch_size, "batch_size", minimum=1)
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=-1)[:, :n_pairs]  # distinct keys
    values = torch.randint(0, n_values, (batch_size, n_pairs), generator=generator)
    asked = torch.randint(0, n_pairs, (batch_size,), generator=generator)  # which pair the query names
    rows = torch.arange(batch_size)
    query, target = keys[rows, asked], values[rows, asked]
    return encode_recall(keys, values, query, n_keys, n_values), keys, values, query, target


def recall_labels(keys: torch.Tensor, values: torch.Tensor, query: int | torch.Tensor) -> list[str]:
    """Axis labels ``"C=7"``, …, ``"C?"`` for one sequence (chapter 4): pairs ``keys``, ``values``
    ``(n_pairs,)``, then its query."""
    if keys.dim() != 1 or values.shape != keys.shape:
        raise ValueError(f"recall_labels takes one sequence: keys and values of shape (n_pairs,); got "
                         f"{tuple(keys.shape)} and {tuple(values.shape)}.")
    return [f"{LETTERS[int(k)]}={int(v)}" for k, v in zip(keys, values, strict=True)] + [f"{LETTERS[int(query)]}?"]


def _check_model(model: nn.Module, n_keys: int, n_values: int) -> None:
    d_model, d_v = getattr(model, "d_model", None), getattr(model, "d_v", None)
    if (d_model, d_v) != (n_keys + n_values + 1, n_values):
        raise ValueError(
            f"the model must be an attn_helpers.SelfAttentionHead that takes n_keys + n_values + 1 = "
            f"{n_keys + n_values + 1} features and returns n_values = {n_values} scores, e.g. "
            f"SelfAttentionHead({n_keys + n_values + 1}, 8, d_v={n_values}); got d_model={d_model}, d_v={d_v}."
        )


def recall_logits(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's scores for the answer at the query token ``(b, n_values)``, and its weights ``(b, t, t)``
    (chapter 4)."""
    out, weights = model(x)  # (b, t, n_values), (b, t, t)
    return out[:, -1], weights


def recall_accuracy(
    model: nn.Module, n: int = 2000, seed: int = 4321, n_pairs: int = 6, n_keys: int = 8, n_values: int = 10,
) -> float:
    """Share of ``n`` fresh sequences (drawn with ``seed``) whose value ``model`` recalls right (chapter 4)."""
    _check_model(model, n_keys, n_values)
    x, _, _, _, target = recall_batch(n, n_pairs, n_keys, n_values, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = recall_logits(model, x)
    return float((logits.argmax(-1) == target).float().mean())


def train_recall(
    model: nn.Module, steps: int = 300, batch_size: int = 64, lr: float = 0.05, seed: int = 0,
    n_pairs: int = 6, n_keys: int = 8, n_values: int = 10,
) -> TrainResult:
    """Train ``model`` (an ``attn_helpers.SelfAttentionHead``) on associative recall with Adam (chapter 4).

    Only the query token's output ``(b, n_values)`` is scored, with cross-entropy against the value.
    Batches come from a generator seeded with ``seed`` and training runs on one CPU thread, so a seed
    gives the same numbers on every run. Silent. Returns the loss of every step and the accuracy on
    2,000 held-out sequences (a different seed from any training batch's generator).
    """
    _check_model(model, n_keys, n_values)
    _check_task(n_pairs, n_keys, n_values)
    gen = torch.Generator().manual_seed(seed)

    def batch_loss() -> torch.Tensor:
        x, _, _, _, target = recall_batch(batch_size, n_pairs, n_keys, n_values, gen)
        logits, _ = recall_logits(model, x)  # (b, n_values)
        return F.cross_entropy(logits, target)

    with torch_threads():
        losses = fit(model, batch_loss, steps, lr)
        return TrainResult(losses, recall_accuracy(model, n_pairs=n_pairs, n_keys=n_keys, n_values=n_values))



@dataclass
class RecallComparison:
    """What :func:`compare_recall` returns (chapter 12).

    ``accuracy``: held-out accuracy, one row per number of keys, one column per head (``"linear, d_k = 8"``);
    ``share``: for each head trained on the most keys, the weight its query gives the pair it names, on average;
    ``heads``: those heads, trained.
    """

    accuracy: pd.DataFrame
    share: dict[str, float]
    heads: dict[str, nn.Module]



def compare_recall(
    seed: int = 0, keys: tuple[int, ...] = (4, 8, 16), d_k: int = 8, linear_d_k: tuple[int, ...] = (8, 32),
    steps: int = 120, n_values: int = 10, held_out_seed: int = 16,
) -> RecallComparison:
    """A softmax head of width ``d_k`` and linear attention heads of widths ``linear_d_k``, each trained on recall
    of n pairs whose keys are all n keys, for each n of ``keys`` (chapter 12).

    The heads are ``attn_helpers.SelfAttentionHead`` and ``linear_attention.LinearAttentionHead``; each starts
    from weights seeded with ``seed`` and trains on the same batches, :func:`train_recall` with ``seed``, for
    ``steps`` steps. Accuracy is on 2,000 held-out sequences; the shares on 2,000 more of the most keys, drawn
    with ``held_out_seed``.
    """
    import pandas as pd

    from .linear_attention import LinearAttentionHead
    from .modules import SelfAttentionHead

    validate.integer(seed, "seed")
    keys = validate.sizes_list(keys, "keys", why="a number of keys for each run")
    widths = validate.sizes_list(linear_d_k, "linear_d_k", why="the linear heads' d_k")
    heads = {f"softmax, d_k = {d_k}": lambda d: SelfAttentionHead(d, d_k, n_values)}
    heads |= {f"linear, d_k = {w}": lambda d, w=w: LinearAttentionHead(d, w, n_values) for w in widths}
    accuracy: dict[str, dict[int, float]] = {}
    trained: dict[str, nn.Module] = {}
    for n in keys:
        for name, make in heads.items():
            with torch.random.fork_rng():  # seeded initial weights, without touching the global generator
                torch.manual_seed(seed)
                trained[name] = make(n + n_values + 1)  # chapter 4's one-hot features of n keys and the values
            result = train_recall(trained[name], steps, n_pairs=n, n_keys=n, n_values=n_values, seed=seed)
            accuracy.setdefault(name, {})[n] = result.accuracy
    n = keys[-1]  # the heads kept are those trained on the most keys
    x, pair_keys, _, query, _ = recall_batch(2000, n, n, n_values, torch.Generator().manual_seed(held_out_seed))
    asked = pair_keys == query[:, None]  # (b, n): the pair the query names
    share = {}
    with torch.no_grad():
        for name, head in trained.items():
            _, weights = head(x)  # (b, n + 1, n + 1)
            share[name] = weights[:, -1, :-1][asked].mean().item()  # the query's weight on the pair it names
    return RecallComparison(pd.DataFrame(accuracy), share, trained)
