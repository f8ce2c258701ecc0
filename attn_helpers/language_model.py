"""A small decoder-only language model assembled from the book's parts, and its training (chapter 13).

Every line of the model is a piece an earlier chapter built and checked: the projections of queries, keys and values
(chapter 4) split into heads (chapter 5), RoPE (chapter 8), the causal mask (chapter 7), grouped-query attention and
its KV cache (chapter 9), pre-LayerNorm residual blocks with an MLP (chapter 8), tiled attention (chapter 10). It
generates with chapter 9's greedy decoding and works as a target or a draft for chapter 12's
:func:`~attn_helpers.speculative.speculative_generate`, since it takes and returns the caches as
:class:`~attn_helpers.inference.TinyDecoder` does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from . import validate
from .flash import flash_forward
from .inference import GroupedQueryAttention, KVCache, TinyDecoder, grouped_query_attention
from .masks import causal_mask
from .position import rope
from .speculative import speculative_generate
from .text import Corpus, batch
from .training import fit

__all__ = ["CONTEXT", "Attention", "Block", "CharLM", "LMResult", "val_loss", "split_loss", "train_lm", "train_draft",
           "closest_call", "PROMPT", "Speculation", "speculate"]

CONTEXT = 64  #: the characters of a training window: the positions the model is trained on (chapter 13)


class Attention(GroupedQueryAttention):
    """Chapter 9's causal grouped-query attention with RoPE, which also returns its weights and can compute them in
    tiles (chapter 13).

    ``forward(x, cache=None, tiled=False)`` takes ``x`` ``(b, t_new, d_model)``; returns ``(out (b, t_new, d_model),
    cache, weights (b, h, t_new, t) or None)``. With ``tiled=True`` chapter 10's
    :func:`~attn_helpers.flash.flash_forward` computes the heads in tiles of 16 × 16 scores, causal as the mask (bottom
    right), and no weights are returned.
    """

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, tiled: bool = False  # type: ignore[override]
                ) -> tuple[torch.Tensor, KVCache, torch.Tensor | None]:
        b, t_new, _ = x.shape
        h, g, d_k = self.num_heads, self.num_kv_heads, self.d_k
        start = 0 if cache is None else len(cache)
        positions = torch.arange(start, start + t_new)  # (t_new,): the new tokens come after the cached ones
        q = self.W_q(x).view(b, t_new, h, d_k).transpose(1, 2)  # (b, h, t_new, d_k): chapters 4 and 5
        k = self.W_k(x).view(b, t_new, g, d_k).transpose(1, 2)  # (b, g, t_new, d_k): g key heads, chapter 9
        v = self.W_v(x).view(b, t_new, g, d_k).transpose(1, 2)  # (b, g, t_new, d_k)
        q, k = rope(q, positions), rope(k, positions)  # chapter 8: rotated by position before caching
        cache = KVCache(k, v) if cache is None else cache.extend(k, v)  # (b, g, t, d_k) each: chapter 9
        if tiled:  # chapter 10: each query head meets its group's keys, 16 × 16 scores at a time
            shared_k, shared_v = (c.repeat_interleave(h // g, dim=1) for c in (cache.k, cache.v))  # (b, h, t, d_k)
            heads, weights = flash_forward(q, shared_k, shared_v, causal=True, block_q=16, block_k=16)[0], None
        else:
            mask = causal_mask(t_new, len(cache))  # (t_new, t): chapter 7, aligned bottom right as in chapter 9
            heads, weights = grouped_query_attention(q, cache.k, cache.v, mask)  # (b, h, t_new, d_k): chapter 9
        return self.W_o(heads.transpose(1, 2).reshape(b, t_new, h * d_k)), cache, weights  # chapter 5


class Block(nn.Module):
    """A pre-LayerNorm block as chapter 8's :class:`~attn_helpers.blocks.TransformerBlock`, with :class:`Attention`
    (chapter 13).

    ``forward(x, cache=None, tiled=False)`` returns ``(x (b, t_new, d_model), cache, weights)``.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, num_heads, num_kv_heads)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, tiled: bool = False
                ) -> tuple[torch.Tensor, KVCache, torch.Tensor | None]:
        out, cache, weights = self.attn(self.ln1(x), cache, tiled)
        x = x + out  # (b, t_new, d_model): the residual connection of chapter 8
        return x + self.mlp(self.ln2(x)), cache, weights  # each token on its own, again with a residual


class CharLM(nn.Module):
    """A decoder-only language model over ``vocab`` characters (chapter 13).

    ``forward(tokens, caches=None, tiled=False)`` takes ids ``(b, t_new)`` and optionally one
    :class:`~attn_helpers.inference.KVCache` per layer for the tokens before them; returns ``(logits (b, t_new, vocab),
    caches)``, as chapter 9's decoder does, so its ``generate`` and chapter 12's speculative decoding run it.
    :meth:`attention_weights` returns every layer's weights ``(b, h, t, t)``.
    """

    generate = TinyDecoder.generate  # chapter 9's greedy decoding, with or without the cache

    def __init__(self, vocab: int, d_model: int = 96, num_heads: int = 4, num_kv_heads: int = 2, n_layers: int = 2):
        super().__init__()
        self.vocab = validate.integer(vocab, "vocab", minimum=2)
        n_layers = validate.integer(n_layers, "n_layers", minimum=1)
        self.embed = nn.Embedding(vocab, d_model)  # no position embedding: RoPE inside attention gives positions
        self.blocks = nn.ModuleList(Block(d_model, num_heads, num_kv_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab, bias=False)  # one score per character

    def _run(self, tokens: torch.Tensor, caches: Sequence[KVCache] | None, tiled: bool
             ) -> tuple[torch.Tensor, list[KVCache], list[torch.Tensor | None]]:
        validate.token_ids(tokens, self.vocab)
        if caches is not None and len(caches) != len(self.blocks):
            raise ValueError(f"pass one cache per layer: {len(self.blocks)} layers, {len(caches)} caches.")
        x = self.embed(tokens)  # (b, t_new, d_model)
        new_caches, weights = [], []
        for i, block in enumerate(self.blocks):
            x, cache, w = block(x, None if caches is None else caches[i], tiled)
            new_caches.append(cache)
            weights.append(w)
        return self.out(self.ln(x)), new_caches, weights  # (b, t_new, vocab)

    def forward(self, tokens: torch.Tensor, caches: Sequence[KVCache] | None = None, tiled: bool = False
                ) -> tuple[torch.Tensor, list[KVCache]]:
        logits, caches, _ = self._run(tokens, caches, validate.flag(tiled, "tiled"))
        return logits, caches

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's attention weights ``(b, h, t, t)`` on ``tokens`` ``(b, t)``."""
        return self._run(tokens, None, False)[2]  # type: ignore[return-value]


@dataclass
class LMResult:
    """What :func:`train_lm` returns (chapter 13): the model, every step's training loss, and the validation loss
    (:func:`val_loss`) before training and every ``every`` steps (``val_losses[i]`` after step ``i · every``)."""

    model: CharLM
    losses: list[float] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    every: int = 0


@torch.no_grad()
def val_loss(model: nn.Module, corpus: Corpus, context: int = CONTEXT, n: int = 32, seed: int = 1234) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on ``n`` fixed windows of the validation text
    (chapter 13)."""
    x, y = batch(corpus.val, n, context, torch.Generator().manual_seed(seed))  # (n, t) each
    logits, _ = model(x)  # (n, t, vocab)
    return float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))


@torch.no_grad()
def split_loss(model: CharLM, ids: torch.Tensor, context: int = CONTEXT) -> float:
    """Mean cross-entropy (nats per character) of ``model`` over a whole split ``ids`` ``(n,)`` (``corpus.val``), read
    in non-overlapping windows of ``context`` characters (chapter 13).

    The split is cut into ``m = (n - 1) // context`` windows ``(m, t)``; each position predicts the character after
    it, so each of the characters ``ids[1 : m · t + 1]`` is scored once (the fewer than ``t`` left at the end are not).
    """
    m, context = _windows(ids, model.vocab, context)
    x = ids[:m * context].view(m, context)  # (m, t): the windows
    y = ids[1:m * context + 1].view(m, context)  # (m, t): the character after each position
    total = sum(F.cross_entropy(model(xs)[0].flatten(0, 1), ys.flatten(), reduction="sum")  # 128 windows a pass
                for xs, ys in zip(x.split(128), y.split(128), strict=True))
    return float(total) / y.numel()


def _windows(ids: object, vocab: int, context: int) -> tuple[int, int]:
    """Check a split of character ids ``(n,)`` and a window length; return ``(m, context)``, ``m`` windows."""
    if isinstance(ids, torch.Tensor) and ids.dim() != 1:
        raise ValueError(f"ids must be one split of the text, a 1-D tensor (n,) such as corpus.val, got shape "
                         f"{tuple(ids.shape)}.")
    validate.token_ids(ids[None] if isinstance(ids, torch.Tensor) else ids, vocab)
    context = validate.integer(context, "context", minimum=1, maximum=len(ids) - 1,  # type: ignore[arg-type]
                               why="a window and the character after it must fit in the split")
    return (len(ids) - 1) // context, context  # type: ignore[arg-type]


def train_lm(corpus: Corpus, seed: int = 0, steps: int = 600, context: int = CONTEXT, batch_size: int = 32,
             lr: float = 3e-3, every: int = 50, progress: bool = False, **sizes: int) -> LMResult:
    """Train a :class:`CharLM` (``sizes``: its keyword arguments) to predict each next character of random windows
    of ``corpus.train`` (chapter 13).

    Adam through :func:`~attn_helpers.training.fit` (one thread); ``seed`` fixes the initial weights and the
    batches. The validation loss (:func:`val_loss`) is measured before the first step and every ``every`` steps. With
    ``progress``, a tqdm bar counts the steps.
    """
    every = validate.integer(every, "every", minimum=1)
    torch.manual_seed(seed)
    model = CharLM(corpus.vocab, **sizes)
    result, gen = LMResult(model, [], [val_loss(model, corpus, context)], every), torch.Generator().manual_seed(seed)

    def batch_loss() -> torch.Tensor:
        x, y = batch(corpus.train, batch_size, context, gen)  # (b, t) each
        return F.cross_entropy(model(x)[0].flatten(0, 1), y.flatten())  # mean over b · t next characters

    def after_step(step: int, loss: float) -> None:
        if step % every == 0:
            result.val_losses.append(val_loss(model, corpus, context))
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        bar.update()

    with tqdm(total=validate.integer(steps, "steps", minimum=1), desc="training", file=sys.stdout,
              disable=not validate.flag(progress, "progress"), ncols=80, mininterval=0.5) as bar:
        result.losses = fit(model, batch_loss, steps, lr, after_step)
    return result


def train_draft(corpus: Corpus, seed: int = 0, steps: int = 300, d_model: int = 32, n_layers: int = 1,
                progress: bool = False) -> LMResult:
    """A draft model for speculative decoding (chapter 13): a :class:`CharLM` of one narrow layer, trained as
    :func:`train_lm` trains the target, for fewer steps."""
    return train_lm(corpus, seed=seed, steps=steps, d_model=d_model, n_layers=n_layers, progress=progress)


def closest_call(logits: torch.Tensor) -> float:
    """How near greedy decoding came to another choice (chapter 13): the smallest, over the steps of ``logits``
    ``(b, n, vocab)``, of the highest logit minus the second highest.

    Two computations whose logits differ by less than half of it choose the same character at every step.
    """
    best_two = validate.as_float_tensor(logits, "logits", min_dim=1).topk(2, dim=-1).values  # (..., 2)
    return float((best_two[..., 0] - best_two[..., 1]).min())


PROMPT = "ROMEO:\n"  #: the prompt chapter 13 generates from: a speaker's name opens a speech (chapter 13)


@dataclass(frozen=True)
class Speculation:
    """What :func:`speculate` measured (chapter 13): how many characters of the speculative text differ from the
    target's own greedy text (``same`` when none), the share of drafted characters kept (over every drafted character,
    also those after a rejection, which the target never judges), the target's passes with and without a draft, and
    the draft's passes."""

    differing: int
    kept: float
    target_passes: int
    greedy_passes: int
    draft_passes: int

    @property
    def same(self) -> bool:
        """Whether speculative decoding wrote exactly the target's greedy text."""
        return self.differing == 0


def speculate(target: CharLM, draft: CharLM, corpus: Corpus, prompt: str = PROMPT, n_new: int | None = None,
              k: int = 4) -> Speculation:
    """Chapter 12's greedy speculative decoding of ``n_new`` characters after ``prompt`` (by default up to the
    ``CONTEXT`` positions the models were trained on), ``k`` drafts a round, compared with the target's own greedy
    decoding, which runs one pass per new character (chapter 13)."""
    ids = corpus.encode(prompt)[None]  # (1, t)
    n_new = CONTEXT - ids.shape[1] if n_new is None else validate.integer(n_new, "n_new", minimum=1)
    run = speculative_generate(target, draft, ids, n_new, k)
    greedy, _ = target.generate(ids, n_new)  # (1, t + n_new)
    return Speculation(int((run.tokens != greedy).sum()), sum(run.accepted) / (k * len(run.accepted)),
                       run.target_passes, n_new, run.draft_passes)
