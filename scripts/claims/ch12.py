"""Chapter 12's trained claims: associative recall with softmax and linear attention, against the number of keys.

Each claim re-runs the chapter's recall experiment with another seed (one head per kind, 120 steps of
``ah.tasks.train_recall`` on n pairs whose keys come from a set of n) and returns the value the chapter's assert
compares. A head is trained once per seed and kernel set, and shared by the claims that need it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from margins import Claim

import attn_helpers as ah

N_VALUES = 10
KINDS = {"softmax, d_k = 8": ("softmax", 8), "linear, d_k = 8": ("linear", 8), "linear, d_k = 16": ("linear", 16),
         "linear, d_k = 32": ("linear", 32)}


@functools.cache
def _trained(name: str, n: int, seed: int) -> tuple[torch.nn.Module, float]:
    """The chapter's head `name`, trained on n pairs drawn from n keys with `seed`, and its held-out accuracy."""
    kind, d_k = KINDS[name]
    torch.manual_seed(seed)
    d_model = n + N_VALUES + 1
    head = ah.SelfAttentionHead(d_model, d_k, N_VALUES) if kind == "softmax" else \
        ah.linear_attention.LinearAttentionHead(d_model, d_k, N_VALUES)
    result = ah.tasks.train_recall(head, steps=120, n_pairs=n, n_keys=n, n_values=N_VALUES, seed=seed)
    return head, result.accuracy


def _accuracy(name: str, n: int) -> Callable[[int], float]:
    return lambda seed: _trained(name, n, seed)[1]


def _share_margin(seed: int) -> float:
    """The smallest step of the chapter's ranking of attention shares at 16 pairs (softmax > d_k 32 > 16 > 8)."""
    x, keys, _, query, _ = ah.tasks.recall_batch(2000, 16, 16, N_VALUES, torch.Generator().manual_seed(16))
    asked = keys == query[:, None]
    share = []
    with torch.no_grad():
        for name in ("softmax, d_k = 8", "linear, d_k = 32", "linear, d_k = 16", "linear, d_k = 8"):
            _, weights = _trained(name, 16, seed)[0](x)
            share.append(weights[:, -1, :-1][asked].mean().item())
    return min(a - b for a, b in zip(share, share[1:], strict=False))


CLAIMS = [
    Claim(12, "softmax head's recall with 4, 8 and 16 keys > 0.98",
          lambda seed: min(_trained("softmax, d_k = 8", n, seed)[1] for n in (4, 8, 16)), low=0.98),
    Claim(12, "linear head, d_k = 16, 8 keys > 0.98", _accuracy("linear, d_k = 16", 8), low=0.98),
    Claim(12, "linear head, d_k = 32, 16 keys > 0.98", _accuracy("linear, d_k = 32", 16), low=0.98),
    Claim(12, "linear head, d_k = 8, 8 keys < 0.97", _accuracy("linear, d_k = 8", 8), high=0.97),
    Claim(12, "linear head, d_k = 16, 16 keys < 0.97", _accuracy("linear, d_k = 16", 16), high=0.97),
    Claim(12, "linear head, d_k = 8, 16 keys < 0.7", _accuracy("linear, d_k = 8", 16), high=0.7),
    Claim(12, "attention share on the asked pair: softmax > linear 32 > 16 > 8 (smallest step > 0)", _share_margin,
          low=0.0),
]
