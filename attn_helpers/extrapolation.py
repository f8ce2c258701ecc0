"""Train short, test long (chapter 11): chapter 8's induction model with five ways to know positions.

:class:`PositionModel` mirrors ``circuits.AttentionOnly`` (token embedding, causal attention layers
with residual connections, no MLP, an unembedding), with ``h`` heads per layer and one of five
position schemes: ``"learned"`` and ``"sinusoidal"`` add a vector per position to the tokens, ``"rope"``
rotates queries and keys, ``"alibi"`` adds a linear distance penalty to the scores, ``"none"`` relies
on the causal mask alone. :func:`train` fits it on ``circuits.induction_batch`` at one length;
:func:`accuracy` measures it at any length, in one pass or decoding through a ring buffer (:func:`decode`).

The chapter's experiment is four calls, each returning the table its cell shows: :func:`train_schemes` trains
one model per scheme, :func:`length_table` reads them at longer lengths, :func:`stretch_table` stretches the
RoPE model's frequencies and :func:`window_table` reads it through a window with sinks; :func:`first_token_weight`
looks for a sink. Every setting of the experiment is a default of these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .circuits import induction_batch
from .long_context import alibi_bias, interpolation, ntk_aware, rope_with_frequencies, yarn, yarn_attention_factor
from .masks import causal_mask
from .position import frequencies, sinusoidal_encoding
from .sliding_window import RingCache, window_mask
from .training import fit

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SCHEMES", "PositionModel", "train", "decode", "accuracy", "Trained", "train_schemes", "length_table",
           "stretch_table", "window_table", "first_token_weight"]

SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")


class PositionModel(nn.Module):
    """A causal attention-only model: ``n_layers`` layers of ``num_heads`` heads, one position ``scheme`` (chapter 11).

    ``forward(tokens, allowed=None, theta=None, factor=1.0)`` takes ids ``(b, t)`` and returns logits
    ``(b, t, vocab_size)`` and each layer's weights ``(b, h, t, t)``. ``allowed`` ``(t, t)`` (bool) narrows
    the causal mask, e.g. to a window; ``theta`` ``(d_k/2,)`` replaces RoPE's frequencies and ``factor``
    multiplies RoPE's queries and keys (YaRN). A ``"learned"`` model reads at most ``max_len`` tokens
    (chapter 11).
    """

    def __init__(self, scheme: str, vocab_size: int, d_model: int = 32, num_heads: int = 4, n_layers: int = 2,
                 max_len: int = 32):
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}.")
        self.scheme, self.vocab_size = scheme, validate.integer(vocab_size, "vocab_size", minimum=2)
        self.num_heads, self.max_len = validate.integer(num_heads, "num_heads", minimum=1), max_len
        d_k = validate.head_width(validate.integer(d_model, "d_model", minimum=1), self.num_heads)
        self.d_k = validate.even_int(d_k, "d_model / num_heads")  # RoPE turns pairs of features
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = None  # only the learned scheme has a position table, and checks its max_len
        if scheme == "learned":
            self.pos = nn.Embedding(validate.integer(max_len, "max_len", minimum=1), d_model)
        n_layers = validate.integer(n_layers, "n_layers", minimum=1)
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model, bias=False) for _ in range(n_layers))
        self.out = nn.ModuleList(nn.Linear(d_model, d_model, bias=False) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, allowed: torch.Tensor | None = None, theta: torch.Tensor | None = None,
                factor: float = 1.0) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``(b, t, vocab_size)`` and each layer's weights ``(b, h, t, t)`` for ids ``(b, t)``."""
        b, t = validate.token_ids(tokens, self.vocab_size)
        if self.scheme != "rope" and (theta is not None or factor != 1.0):
            raise ValueError(f"theta and factor change RoPE's rotation, and this model's scheme is {self.scheme!r}, "
                             f"which has none: drop them, or pass them to a 'rope' model.")
        if self.scheme == "learned" and t > self.max_len:
            raise ValueError(f"a learned position table has {self.max_len} rows: it cannot read {t} tokens.")
        x = self.embed(tokens)  # (b, t, d_model)
        if self.scheme == "learned":
            x = x + self.pos.weight[:t]
        elif self.scheme == "sinusoidal":
            x = x + sinusoidal_encoding(t, x.shape[-1])
        allowed = causal_mask(t) if allowed is None else causal_mask(t) & allowed  # (t, t)
        bias = alibi_bias(self.num_heads, t) if self.scheme == "alibi" else torch.zeros(t, t)  # (h or 1, t, t)
        bias = bias.masked_fill(~allowed, float("-inf"))  # an additive mask, as in chapter 7
        theta = frequencies(self.d_k) if theta is None else theta  # (d_k/2,)
        weights = []
        for qkv, out in zip(self.qkv, self.out, strict=True):
            q, k, v = qkv(x).view(b, t, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)  # (b, h, t, d_k) each
            if self.scheme == "rope":
                q, k = factor * rope_with_frequencies(torch.stack([q, k]), theta)  # both turned, and scaled
            w = torch.softmax(q @ k.transpose(-2, -1) / self.d_k ** 0.5 + bias, dim=-1)  # (b, h, t, t)
            x = x + out((w @ v).transpose(1, 2).reshape(b, t, -1))  # (b, t, d_model): the residual stream
            weights.append(w)
        return self.unembed(x), weights


def train(model: PositionModel, seq_len: int = 32, steps: int = 200, batch_size: int = 32, lr: float = 0.01,
          seed: int = 0) -> list[float]:
    """Adam on ``circuits.induction_batch`` sequences of ``seq_len`` tokens; returns every step's loss (chapter 11).

    The loss is the cross-entropy of the next token at the positions inside the repeat. Seeded, one thread.
    """
    batch_size = validate.integer(batch_size, "batch_size", minimum=1)
    gen = torch.Generator().manual_seed(seed)

    def batch_loss() -> torch.Tensor:
        tokens, scored = induction_batch(batch_size, model.vocab_size, seq_len, generator=gen)  # (b, t) each
        logits, _ = model(tokens)  # (b, t, vocab_size)
        where = scored[:, :-1]  # position j predicts token j + 1
        return F.cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])

    return fit(model, batch_loss, steps, lr)


@torch.no_grad()
def decode(model: PositionModel, tokens: torch.Tensor, window: int, sinks: int = 0,
           numbering: str = "text") -> torch.Tensor:
    """Logits ``(b, t, vocab_size)`` of a ``"rope"`` or ``"none"`` model decoding ids ``(b, t)`` one token at a
    time, each layer through a :class:`~attn_helpers.sliding_window.RingCache` of ``sinks + window`` slots (chapter 11).

    The keys are cached before their rotation and rotated at every step, as StreamingLLM does, by the position
    ``numbering`` gives: ``"text"``, the token's position in the text (then the result is the one-pass forward
    under ``window_mask(t, window=window, sinks=sinks)``), or ``"cache"``, its slot's position counted within
    the cache (:meth:`~attn_helpers.sliding_window.RingCache.cache_positions`), the query being the newest.
    """
    if model.scheme not in ("rope", "none"):
        raise ValueError(f"decode runs a 'rope' or a 'none' model, got scheme {model.scheme!r}: its positions are "
                         f"not rotations that a cache can renumber. Measure it in one pass with "
                         f"allowed=window_mask(...).")
    if numbering not in ("text", "cache"):
        raise ValueError(f"numbering must be 'text' (positions in the text) or 'cache' (positions within the cache), "
                         f"got {numbering!r}.")
    b, t = validate.token_ids(tokens, model.vocab_size)
    h, d_k, theta = model.num_heads, model.d_k, frequencies(model.d_k)
    caches = [RingCache.empty(b, h, d_k, window, sinks) for _ in model.qkv]
    logits = []
    for n in range(t):
        x = model.embed(tokens[:, n:n + 1])  # (b, 1, d_model): token n
        for layer, (qkv, out) in enumerate(zip(model.qkv, model.out, strict=True)):
            q, k, v = qkv(x).view(b, 1, 3, h, d_k).permute(2, 0, 3, 1, 4)  # (b, h, 1, d_k) each
            cache = caches[layer] = caches[layer].write(k, v, n)  # the key before its rotation
            keys = cache.k  # (b, h, slots, d_k)
            if model.scheme == "rope":
                where = cache.positions if numbering == "text" else cache.cache_positions()  # (slots,)
                keys = rope_with_frequencies(keys, theta, where.clamp(min=0))
                q = rope_with_frequencies(q, theta, [int(where.max())])  # the newest token's position
            scores = (q @ keys.transpose(-2, -1) / d_k ** 0.5).masked_fill(~cache.allowed(), float("-inf"))
            w = torch.softmax(scores, dim=-1)  # (b, h, 1, slots)
            x = x + out((w @ cache.v).transpose(1, 2).reshape(b, 1, -1))  # (b, 1, d_model)
        logits.append(model.unembed(x))
    return torch.cat(logits, dim=1)  # (b, t, vocab_size)


@torch.no_grad()
def accuracy(model: PositionModel, seq_len: int, n: int = 200, seed: int = 999, ring: dict | None = None,
             **forward: object) -> float:
    """Share of the predictable next tokens of ``n`` fresh sequences of ``seq_len`` tokens that ``model`` gets
    right (chapter 11); ``forward`` goes to the model (``allowed``, ``theta``, ``factor``), or ``ring``'s
    arguments (``window``, ``sinks``, ``numbering``) to :func:`decode`."""
    gen = torch.Generator().manual_seed(seed)
    tokens, scored = induction_batch(validate.integer(n, "n", minimum=1), model.vocab_size, seq_len, generator=gen)
    logits = decode(model, tokens, **ring) if ring is not None else model(tokens, **forward)[0]
    right = logits[:, :-1].argmax(-1) == tokens[:, 1:]  # (n, t - 1)
    return float(right[scored[:, :-1]].float().mean())


@dataclass(frozen=True)
class Trained:
    """One :class:`PositionModel` per scheme of :data:`SCHEMES`, all trained ``steps`` steps on batches of
    ``batch_size`` sequences of ``trained_len`` tokens (chapter 11)."""

    models: dict[str, PositionModel]
    trained_len: int
    steps: int
    batch_size: int


def train_schemes(seed: int = 0, trained_len: int = 16, vocab_size: int = 64, steps: int = 700,
                  batch_size: int = 32, lr: float = 0.01) -> Trained:
    """The five models of chapter 11's experiment (chapter 11): for each scheme, a :class:`PositionModel` initialised
    from ``seed`` and trained ``steps`` Adam steps (learning rate ``lr``) on batches of ``batch_size`` induction
    sequences of ``trained_len`` tokens from ``vocab_size`` ids (:func:`train`). The caller's random stream is left
    as it was."""
    models = {}
    for scheme in SCHEMES:
        with torch.random.fork_rng(devices=[]):  # the model's initial weights come from seed, the caller's stream
            torch.manual_seed(seed)  # is left as it was
            models[scheme] = PositionModel(scheme, vocab_size, max_len=trained_len)
        train(models[scheme], seq_len=trained_len, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
    return Trained(models, trained_len, steps, batch_size)


def length_table(trained: Trained, scales: tuple[int, ...] = (1, 2, 4)) -> pd.DataFrame:
    """Each scheme's :func:`accuracy` at ``s · trained_len`` tokens for each ``s`` of ``scales``: one row per scheme,
    one column per length in tokens; NaN where a learned table has no row for the length (chapter 11)."""
    import pandas as pd

    lengths = [s * trained.trained_len for s in scales]
    rows = {scheme: {n: math.nan if scheme == "learned" and n > model.max_len else accuracy(model, n)
                     for n in lengths} for scheme, model in trained.models.items()}
    return pd.DataFrame(rows).T.rename_axis("positions")  # (schemes, lengths)


def stretch_table(trained: Trained, scales: tuple[int, ...] = (2, 4)) -> pd.DataFrame:
    """The RoPE model's :func:`accuracy` at ``s · trained_len`` tokens with its frequencies as trained, interpolated,
    NTK-aware and YaRN's (as printed, β = 32, and as its code rounds it), without training (chapter 11).

    YaRN's rows scale the queries and keys by ``yarn_attention_factor(s)``. One row per method, one column per
    length in tokens."""
    import pandas as pd

    model, trained_len = trained.models["rope"], trained.trained_len
    d, theta = model.d_k, frequencies(model.d_k)
    table = {}
    for s in scales:
        n, factor = s * trained_len, yarn_attention_factor(s)
        table[n] = {
            "RoPE as trained": accuracy(model, n),
            "interpolation": accuracy(model, n, theta=interpolation(theta, s)),
            "NTK-aware": accuracy(model, n, theta=ntk_aware(d, s)),
            "YaRN as printed, β = 32": accuracy(model, n, theta=yarn(d, s, trained_len), factor=factor),
            "YaRN as coded": accuracy(model, n, theta=yarn(d, s, trained_len, rounded=True), factor=factor),
        }
    return pd.DataFrame(table).rename_axis("frequencies")  # (methods, lengths)


def window_table(trained: Trained, scales: tuple[int, ...] = (2, 4), sinks: int = 4) -> pd.DataFrame:
    """The RoPE model's :func:`accuracy` at ``s · trained_len`` tokens with full causal attention, a window of
    ``trained_len`` tokens, and that window with ``sinks`` sinks numbered by their positions in the text (one pass
    under the mask) or within the cache (decoding through a ring buffer) (chapter 11). One row per reading, one
    column per length in tokens."""
    import pandas as pd

    model, window = trained.models["rope"], trained.trained_len
    table = {}
    for n in (s * trained.trained_len for s in scales):
        table[n] = {
            "full causal attention": accuracy(model, n),
            f"window of {window}": accuracy(model, n, allowed=window_mask(n, window=window)),
            f"+ {sinks} sinks, text positions": accuracy(model, n, allowed=window_mask(n, window=window, sinks=sinks)),
            f"+ {sinks} sinks, cache positions": accuracy(
                model, n, ring={"window": window, "sinks": sinks, "numbering": "cache"}),
        }
    return pd.DataFrame(table).rename_axis("reading")  # (readings, lengths)


@torch.no_grad()
def first_token_weight(trained: Trained, after: int = 4, n: int = 200, seed: int = 5) -> tuple[torch.Tensor, float]:
    """The RoPE model's average weight on position 0, per layer and head ``(layers, h)``, over the queries at
    positions ``after … trained_len - 1`` of ``n`` fresh sequences; and what an even spread over the visible tokens
    would give it, averaged over the same queries (chapter 11)."""
    gen = torch.Generator().manual_seed(seed)
    tokens, _ = induction_batch(n, trained.models["rope"].vocab_size, trained.trained_len, generator=gen)
    _, weights = trained.models["rope"](tokens)  # per layer: (b, h, t, t)
    first = torch.stack([w[:, :, after:, 0].mean(dim=(0, 2)) for w in weights])  # (layers, h)
    even = (1 / torch.arange(after + 1, trained.trained_len + 1)).mean()  # query p sees p + 1 tokens
    return first, float(even)
