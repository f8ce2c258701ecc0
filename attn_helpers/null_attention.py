"""When no key is relevant: a toy retrieval task, a null key, and a softmax with 1 added below (chapter 9).

A softmax's weights sum to one, so a query must spend all its attention on *some* key even when none
is relevant. :func:`retrieval_task` builds a task in which half the queries have no matching key and
the right answer is then the zero vector. :class:`RetrievalAttention` is one attention layer with a
choice of ``normaliser``: ``"softmax"``; ``"null_key"``, a learned extra key whose value is zero;
``"softmax_plus_one"``, :func:`softmax_plus_one`, which is a null key whose score is fixed at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .plotting import plot_attention
from .training import fit

__all__ = [
    "NORMALISERS",
    "softmax_plus_one",
    "RetrievalTask",
    "retrieval_task",
    "RetrievalAttention",
    "train_retrieval",
    "retrieval_errors",
    "NullKeyExperiment",
    "null_key_experiment",
    "plot_null_weights",
]

NORMALISERS = ("softmax", "null_key", "softmax_plus_one")


def softmax_plus_one(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(s_j) / (1 + Σ_k exp(s_k))`` along ``dim`` (chapter 9): the weights may sum to less than one.

    The same as a softmax over the scores and one extra score of 0 whose weight is dropped: a zero key with a
    zero value, which is what ``nn.MultiheadAttention(add_zero_attn=True)`` appends to every head.
    Computed stably, with the maximum of the scores and 0 subtracted first. Same shape as ``scores``.
    """
    if not isinstance(scores, torch.Tensor) or not torch.is_floating_point(scores):
        raise TypeError(f"scores must be a floating-point tensor, got {type(scores).__name__}.")
    if torch.isnan(scores).any():
        raise ValueError("scores contain NaN; find where it comes from before taking a softmax.")
    m = scores.amax(dim=dim, keepdim=True).clamp(min=0.0)  # ≥ 0, so exp(-m) ≤ 1 never overflows
    e = torch.exp(scores - m)
    return e / (torch.exp(-m) + e.sum(dim=dim, keepdim=True))


@dataclass
class RetrievalTask:
    """A batch of the toy task: look up the value stored under the query's symbol, or answer 0 (chapter 9).

    ``query`` (n,) symbols; ``keys`` (n, t) distinct symbols; ``values`` (n, t, d_v);
    ``target`` (n, d_v) the value under the query's symbol, zero if absent; ``present`` (n,) bool.
    """

    query: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    target: torch.Tensor
    present: torch.Tensor


def retrieval_task(n: int, t: int = 6, n_symbols: int = 16, d_v: int = 8, p_absent: float = 0.5,
                   seed: int = 0) -> RetrievalTask:
    """``n`` examples of :class:`RetrievalTask`: ``t`` distinct key symbols out of ``n_symbols``, each
    holding a random value in R^``d_v``; a fraction ``p_absent`` of the queries match no key (chapter 9)."""
    n, t, n_symbols, d_v = (validate.integer(value, name, minimum=1) for name, value in
                            (("n", n), ("t", t), ("n_symbols", n_symbols), ("d_v", d_v)))
    if n_symbols <= t:
        raise ValueError(f"n_symbols={n_symbols} must exceed t={t}, or no query could miss every key.")
    p_absent = validate.real(p_absent, "p_absent", at_least=0, at_most=1, why="a probability")
    gen = torch.Generator().manual_seed(seed)
    order = torch.rand(n, n_symbols, generator=gen).argsort(dim=1)  # a random permutation per example
    keys = order[:, :t]  # (n, t): distinct symbols
    present = torch.rand(n, generator=gen) >= p_absent  # (n,)
    slot = torch.randint(t, (n,), generator=gen)  # which key the query matches, if present
    absent_symbol = order[:, t]  # a symbol that is not among the keys
    query = torch.where(present, keys.gather(1, slot[:, None])[:, 0], absent_symbol)
    values = torch.randn(n, t, d_v, generator=gen)
    target = values[torch.arange(n), slot] * present[:, None]
    return RetrievalTask(query, keys, values, target, present)


class RetrievalAttention(nn.Module):
    """One attention layer for :func:`retrieval_task` (chapter 9).

    The query is the embedding of the query symbol through ``W_q``, keys are key symbols' embeddings
    through ``W_k``, values are the stored vectors through ``W_v``, then ``W_o``. ``normaliser`` is
    ``"softmax"``, ``"null_key"`` (an extra learned key with a zero value) or ``"softmax_plus_one"``.
    ``forward(task)`` returns ``(out (n, d_v), weights (n, t + 1))``; the last column is the weight on
    "nothing" (the null key, or what softmax + 1 leaves out), always 0 for ``"softmax"``.
    """

    def __init__(self, normaliser: str = "softmax", n_symbols: int = 16, d: int = 16, d_v: int = 8, seed: int = 0):
        super().__init__()
        if normaliser not in NORMALISERS:
            raise ValueError(f"normaliser must be one of {NORMALISERS}, got {normaliser!r}.")
        self.normaliser = normaliser
        with torch.random.fork_rng():  # seeded initial weights, without touching the global generator
            torch.manual_seed(seed)
            self.embed = nn.Embedding(n_symbols, d)
            self.W_q, self.W_k = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.W_v, self.W_o = nn.Linear(d_v, d_v, bias=False), nn.Linear(d_v, d_v, bias=False)
        self.null_key = nn.Parameter(torch.zeros(d)) if normaliser == "null_key" else None

    def forward(self, task: RetrievalTask) -> tuple[torch.Tensor, torch.Tensor]:
        n_symbols = self.embed.num_embeddings  # one-hot rows times the table: the embedding, with a fast backward
        q = self.W_q(F.one_hot(task.query, n_symbols).float() @ self.embed.weight)  # (n, d)
        k = self.W_k(F.one_hot(task.keys, n_symbols).float() @ self.embed.weight)  # (n, t, d)
        v = self.W_v(task.values)  # (n, t, d_v)
        s = (k @ q[:, :, None])[..., 0] / math.sqrt(q.shape[-1])  # (n, t)
        if self.normaliser == "softmax":
            w = torch.softmax(s, dim=-1)
        elif self.normaliser == "softmax_plus_one":
            w = softmax_plus_one(s)
        else:
            s_null = q @ self.null_key / math.sqrt(q.shape[-1])  # (n,)
            w = torch.softmax(torch.cat([s, s_null[:, None]], dim=-1), dim=-1)[:, :-1]  # null value is 0
        out = self.W_o((w[:, :, None] * v).sum(dim=1))  # (n, d_v)
        nothing = torch.zeros_like(w[:, :1]) if self.normaliser == "softmax" else 1 - w.sum(dim=-1, keepdim=True)
        return out, torch.cat([w, nothing], dim=-1)  # (n, t + 1)


def train_retrieval(model: RetrievalAttention, task: RetrievalTask, steps: int = 100, lr: float = 0.05) -> list[float]:
    """Full-batch Adam on the mean squared error; returns the loss at every step (chapter 9).

    Runs on one thread: the tensors are so small that a second thread only adds waiting.
    """

    def batch_loss() -> torch.Tensor:
        out, _ = model(task)  # (n, d_v): the whole task is the batch
        return ((out - task.target) ** 2).mean()

    return fit(model, batch_loss, steps, lr)


@torch.no_grad()
def retrieval_errors(model: RetrievalAttention, task: RetrievalTask) -> dict[str, float]:
    """Mean squared error on the queries with a matching key (``present``) and without (``absent``) (chapter 9).

    Also: the mean weight on "nothing" for both kinds of query; ``length_present``, the mean of
    ``|output| / |target|`` over the queries with a matching key (1 for answers of the right length); and
    ``top_absent``, the mean over the queries without one of the largest weight on a real key.
    """
    out, w = model(task)  # (n, d_v), (n, t + 1)
    err = ((out - task.target) ** 2).mean(dim=-1)  # (n,)
    p = task.present
    return {"present": float(err[p].mean()), "absent": float(err[~p].mean()),
            "length_present": float((out[p].norm(dim=-1) / task.target[p].norm(dim=-1)).mean()),
            "null_weight_absent": float(w[~p, -1].mean()), "null_weight_present": float(w[p, -1].mean()),
            "top_absent": float(w[~p, :-1].amax(dim=-1).mean())}


@dataclass
class NullKeyExperiment:
    """What :func:`null_key_experiment` returns (chapter 9).

    ``table``: one row per normaliser (index :data:`NORMALISERS`) with the columns ``key present`` and
    ``key absent`` (mean squared error per number), ``nothing (absent)`` and ``nothing (present)`` (mean weight
    on "nothing"), ``length (present)`` (mean ``|output| / |target|`` with the key present) and
    ``largest weight (absent)`` (mean largest weight on a real key with the key absent);
    ``models``: the three trained :class:`RetrievalAttention`; ``test``: the held-out :class:`RetrievalTask`.
    """

    table: pd.DataFrame
    models: dict[str, RetrievalAttention]
    test: RetrievalTask


def null_key_experiment(seed: int = 0, n: int = 512, steps: int = 200, lr: float = 0.05, train_seed: int = 0,
                        test_seed: int = 1) -> NullKeyExperiment:
    """Chapter 9's experiment: one :class:`RetrievalAttention` per normaliser, all three started from the same
    weights (``seed``), trained with :func:`train_retrieval` on ``n`` examples and measured with
    :func:`retrieval_errors` on ``n`` others; the tasks come from ``train_seed`` and ``test_seed`` (chapter 9).
    """
    train, test = retrieval_task(n, seed=train_seed), retrieval_task(n, seed=test_seed)
    models, rows = {}, {}
    for name in NORMALISERS:
        models[name] = RetrievalAttention(name, seed=seed)
        train_retrieval(models[name], train, steps=steps, lr=lr)  # full-batch Adam on the squared error
        r = retrieval_errors(models[name], test)
        rows[name] = {"key present": r["present"], "key absent": r["absent"],
                      "nothing (absent)": r["null_weight_absent"], "nothing (present)": r["null_weight_present"],
                      "length (present)": r["length_present"], "largest weight (absent)": r["top_absent"]}
    return NullKeyExperiment(pd.DataFrame.from_dict(rows, orient="index"), models, test)


def plot_null_weights(weights: dict[str, torch.Tensor], title: str = "Where absent queries put their weight"
                      ) -> plt.Figure:
    """One heatmap per normaliser, stacked: rows are examples, columns the keys and "nothing" (chapter 9).

    ``weights`` maps a name to a ``(rows, t + 1)`` tensor as returned by :class:`RetrievalAttention`.
    """
    if not weights:
        raise ValueError("weights is empty: pass {name: (rows, t + 1) tensor}.")
    n_rows, n_cols = next(iter(weights.values())).shape
    fig, axes = plt.subplots(len(weights), 1, figsize=(6.4, (0.55 * n_rows + 1.3) * len(weights)), squeeze=False)
    keys = [f"key {j}" for j in range(n_cols - 1)] + ["nothing"]
    for ax, (name, w) in zip(axes[:, 0], weights.items(), strict=True):
        plot_attention(w, [f"example {i}" for i in range(n_rows)], keys, title=name, ax=ax)
        for text in ax.texts:  # the weights written in the cells: legible on a phone too
            text.set_fontsize(9)
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
