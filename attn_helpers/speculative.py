"""Checking many draft tokens at once: the verification step of speculative decoding (chapter 12).

A small draft model guesses ``k`` tokens; the large target model scores all of them in one pass over
its KV cache (the bottom-right causal mask of chapter 9) and keeps the longest prefix it agrees with,
plus its own next token. With greedy decoding the result is exactly the target's own output.
:func:`tree_mask` lets one pass check a tree of guesses; :func:`rollback` drops the cached keys and
values of rejected tokens. The models are chapter 9's :class:`~attn_helpers.inference.TinyDecoder`.
With sampling, :func:`sampling_rule` keeps a draft token with probability ``min(1, p/q)`` and otherwise draws
from ``max(0, p - q)`` normalised; :func:`emitted_distribution` and :func:`expected_tokens` enumerate what
it emits, exactly, in fractions; :func:`mixed_draft` moves a draft towards the uniform distribution or towards
``p``, and :func:`plot_sampling` draws what the rule does with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

from . import validate
from .inference import KVCache, TinyDecoder

__all__ = ["tree_mask", "rollback", "draft_model", "SpeculativeRun", "speculative_generate", "sampling_rule",
           "emitted_distribution", "expected_tokens", "mixed_draft", "plot_sampling"]

_Rule = Callable[[Sequence[Fraction], Sequence[Fraction], int], tuple[Fraction, Sequence[Fraction]]]


def tree_mask(parents: Sequence[int]) -> torch.Tensor:
    """``(n, n)`` bool mask of a tree of ``n`` draft tokens (chapter 12): token i sees token j iff j is i
    or an ancestor.

    ``parents[i]`` is the index of token i's parent, smaller than i, or -1 for a token that follows the
    already accepted text directly (chapter 12). A chain, ``parents = [-1, 0, 1, …]``, gives the causal mask.
    """
    n = len(parents)
    mask = torch.eye(n, dtype=torch.bool)  # (n, n): every token sees itself
    for i, p in enumerate(parents):
        p = validate.integer(p, f"parents[{i}]", minimum=-1, maximum=i - 1,
                             why="a token's parent comes before it; -1 for a token after the accepted text")
        if p >= 0:
            mask[i] = mask[i] | mask[p]  # its parent's ancestors are its own
    return mask


def rollback(caches: Sequence[KVCache], n: int) -> list[KVCache]:
    """The caches of the first ``n`` tokens only: what is left after rejecting the later ones (chapter 12)."""
    n = validate.integer(n, "n", minimum=1)
    if any(n > len(c) for c in caches):
        raise ValueError(f"cannot keep {n} tokens of a cache that holds {min(len(c) for c in caches)}.")
    return [dataclasses.replace(c, k=c.k[:, :, :n], v=c.v[:, :, :n]) for c in caches]  # (b, g, n, d_k) each


def draft_model(target: TinyDecoder, n_layers: int) -> TinyDecoder:
    """A smaller decoder: ``target``'s embedding, its first ``n_layers`` layers and its output map (chapter 12).

    Layer skipping: the draft is the target cut short, so it needs no training of its own.
    """
    n_layers = validate.integer(n_layers, "n_layers", minimum=1)
    if n_layers >= len(target.layers):
        raise ValueError(f"a draft needs fewer layers than the target's {len(target.layers)}, got {n_layers}.")
    first = target.layers[0]
    draft = TinyDecoder(vocab=target.vocab, d_model=first.d_model, num_heads=first.num_heads,
                        num_kv_heads=first.num_kv_heads, n_layers=n_layers)
    draft.embed, draft.out = target.embed, target.out  # shared with the target, not copied
    draft.layers = nn.ModuleList(target.layers[:n_layers])
    return draft


@dataclass
class SpeculativeRun:
    """What :func:`speculative_generate` did: the tokens, and per round how many drafts the target accepted
    (chapter 12)."""

    tokens: torch.Tensor
    accepted: list[int] = field(default_factory=list)
    target_passes: int = 0
    draft_passes: int = 0


@torch.no_grad()
def speculative_generate(target: TinyDecoder, draft: TinyDecoder, prompt: torch.Tensor, n_new: int, k: int
                         ) -> SpeculativeRun:
    """Greedy speculative decoding of ``n_new`` tokens after ``prompt`` ``(1, t)``, ``k`` drafts a round (chapter 12).

    Each round the draft proposes ``k`` tokens, one cached step each; the target scores them in one
    pass and keeps the drafts up to the first it would not have chosen, then its own token there.
    Both caches are rolled back to the kept tokens. The tokens are those of ``target.generate``.
    """
    n_new, k = validate.integer(n_new, "n_new", minimum=1), validate.integer(k, "k", minimum=1)
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"prompt must be one sequence of shape (1, t), got {tuple(prompt.shape)}: "
                         f"each sequence accepts a different number of drafts.")
    if draft.vocab != target.vocab:
        raise ValueError(f"the draft's vocabulary ({draft.vocab}) must be the target's ({target.vocab}): it guesses "
                         f"the target's tokens. Make the draft with draft_model(target, n_layers).")
    logits, t_caches = target(prompt)  # (1, t, vocab): the prompt's pass gives the first new token
    run = SpeculativeRun(torch.cat([prompt, logits[:, -1:].argmax(-1)], dim=1), target_passes=1)
    d_caches, d_seen = None, 0  # the draft has seen no token yet
    while run.tokens.shape[1] < prompt.shape[1] + n_new:
        seq = run.tokens  # (1, n): the last token is not in the target's cache yet
        drafts = []
        for _ in range(k):  # the draft guesses k tokens, one cached step each
            new = drafts[-1] if drafts else seq[:, d_seen:]  # (1, ·): what the draft has not seen yet
            d_logits, d_caches = draft(new, d_caches)
            d_seen += new.shape[1]
            drafts.append(d_logits[:, -1:].argmax(-1))  # (1, 1)
            run.draft_passes += 1
        guess = torch.cat(drafts, dim=1)  # (1, k)
        logits, t_caches = target(torch.cat([seq[:, -1:], guess], dim=1), t_caches)  # (1, k + 1, vocab): one pass
        run.target_passes += 1
        choice = logits.argmax(-1)  # (1, k + 1): the target's token after the last one and after each draft
        agree = int((guess == choice[:, :k]).int().cumprod(dim=1).sum())  # drafts kept: the leading matches
        run.accepted.append(agree)
        run.tokens = torch.cat([seq, guess[:, :agree], choice[:, agree:agree + 1]], dim=1)
        keep = run.tokens.shape[1] - 1  # every token but the newest is now in the caches
        t_caches = rollback(t_caches, keep)
        d_seen = min(d_seen, keep)
        d_caches = rollback(d_caches, d_seen)
    run.tokens = run.tokens[:, :prompt.shape[1] + n_new]
    return run


def sampling_rule(p: Sequence[Fraction], q: Sequence[Fraction], x: int) -> tuple[Fraction, list[Fraction]]:
    """Speculative sampling's verdict on a draft token ``x`` drawn from ``q`` (chapter 12).

    ``p``, ``q``: the target's and the draft's next-token probabilities (exact fractions, one per token).
    Returns ``(accept, resample)``: keep ``x`` with probability ``min(1, p[x] / q[x])``; otherwise draw the
    token from ``resample = max(0, p - q)`` normalised.
    """
    accept = min(Fraction(1), p[x] / q[x])
    excess = [max(Fraction(0), a - b) for a, b in zip(p, q, strict=True)]  # where the target wants more than q gives
    total = sum(excess)
    return accept, [e / total for e in excess] if total else list(p)  # p = q: never rejected


def emitted_distribution(p: Sequence, q: Sequence, rule: _Rule = sampling_rule) -> list[Fraction]:
    """The exact distribution of the token one speculative step emits: ``x ~ q``, then ``rule`` (chapter 12).

    Enumerates every draft token ``x``: it is kept with probability ``accept``, else replaced by a draw from
    ``resample``. With :func:`sampling_rule` the result is ``p`` itself.
    """
    p, q = validate.probabilities(p, "p"), validate.probabilities(q, "q")
    if len(p) != len(q):
        raise ValueError(f"p and q must cover the same vocabulary, got {len(p)} and {len(q)} probabilities.")
    out = [Fraction(0)] * len(p)
    for x, qx in enumerate(q):
        if qx == 0:
            continue  # the draft never proposes x
        accept, resample = rule(p, q, x)
        out[x] += qx * accept  # proposed and kept
        for y, r in enumerate(resample):
            out[y] += qx * (1 - accept) * r  # proposed, rejected, replaced by y
    return out


def expected_tokens(p: Sequence, q: Sequence, k: int, rule: _Rule = sampling_rule) -> Fraction:
    """Expected tokens one round emits with ``k`` drafts, each ``x ~ q`` judged by ``rule`` (chapter 12).

    The accepted drafts, then one token from the target: the replacement of the first rejected draft, or its
    own next token after all ``k``. Enumerated exactly, for a draft and a target whose ``p``, ``q`` do not
    depend on the context.
    """
    p, q, k = validate.probabilities(p, "p"), validate.probabilities(q, "q"), validate.integer(k, "k", minimum=0)
    kept = sum((qx * rule(p, q, x)[0] for x, qx in enumerate(q) if qx), Fraction(0))  # P(a draft is accepted)
    tokens = Fraction(1)  # k = 0: the target's own token
    for _ in range(k):
        tokens = 1 + kept * tokens  # the first draft, kept (then as with one draft fewer) or replaced
    return tokens


def mixed_draft(p: Sequence, q: Sequence, mix: float) -> list[Fraction]:
    """The draft ``q`` moved towards the uniform distribution (``mix`` < 0) or towards the target ``p`` (``mix``
    > 0), exactly (chapter 12).

    ``mix`` in [-1, 1], read as the decimal it is written as (0.35 is 7/20): -1 gives the uniform distribution,
    0 gives ``q``, 1 gives ``p``; in between, ``(1 - |mix|) q + |mix|`` times the other end.
    """
    p, q = validate.probabilities(p, "p"), validate.probabilities(q, "q")
    if len(p) != len(q):
        raise ValueError(f"p and q must cover the same vocabulary, got {len(p)} and {len(q)} probabilities.")
    mix = validate.real(mix, "mix", at_least=-1, at_most=1, why="-1 is the uniform draft, 0 is q, 1 is p")
    m = Fraction(repr(float(mix)))  # 0.35 as 7/20, not as the binary float nearest to it
    end = p if m > 0 else [Fraction(1, len(q))] * len(q)
    return [(1 - abs(m)) * b + abs(m) * e for b, e in zip(q, end, strict=True)]


def plot_sampling(p: Sequence, q: Sequence, mixes: Sequence[float] = (-1.0, 0.0, 0.5), k_max: int = 8
                  ) -> plt.Figure:
    """Speculative sampling's rule at a glance (chapter 12): ``p`` and ``q`` with min(p, q) shaded, the residual
    max(p - q, 0) normalised, and the expected tokens a round over k = 0 … ``k_max`` for drafts
    ``mixed_draft(p, q, mix)`` at each of ``mixes``."""
    import matplotlib.pyplot as plt

    p, q = validate.probabilities(p, "p"), validate.probabilities(q, "q")
    k_max = validate.integer(k_max, "k_max", minimum=1)
    x = range(len(p))
    fig, (top, low) = plt.subplots(2, 1, figsize=(6.4, 6.4))
    shared = [float(min(a, b)) for a, b in zip(p, q, strict=True)]
    _, residual = sampling_rule(p, q, next(i for i, b in enumerate(q) if b))
    top.bar(x, shared, width=0.8, color="#a1d99b", label="min(p, q): kept drafts")
    top.bar([i - 0.19 for i in x], [float(a) for a in p], width=0.34, fill=False, edgecolor="#1f77b4", linewidth=2,
            label="target p")
    top.bar([i + 0.19 for i in x], [float(b) for b in q], width=0.34, fill=False, edgecolor="#ff7f0e", linewidth=2,
            linestyle="--", label="draft q")
    top.plot(list(x), [float(r) for r in residual], "D", color="#9467bd", label="residual max(p − q, 0) / Σ")
    alpha = sum(shared)
    top.set(xticks=list(x), xlabel="token", ylabel="probability", ylim=(0, 1.05),
            title=f"One draft token: accepted with probability α = Σ min(p, q) = {alpha:.3f}")
    top.legend(fontsize="small")
    ks = list(range(k_max + 1))
    for mix in mixes:
        draft = mixed_draft(p, q, mix)
        a = float(sum(min(u, v) for u, v in zip(p, draft, strict=True)))
        name = {-1: "uniform draft", 0: "draft q", 1: "draft p"}.get(mix, f"q moved {abs(mix):g} of the way to "
                                                                         f"{'p' if mix > 0 else 'uniform'}")
        low.plot(ks, [float(expected_tokens(p, draft, k)) for k in ks], marker="o", label=f"{name}: α = {a:.3f}")
    low.set(xlabel="drafts k a round", ylabel="expected tokens a round", title="(1 − α^(k+1)) / (1 − α)")
    low.grid(True, alpha=0.3)
    low.legend(fontsize="small")
    fig.tight_layout()
    return fig
