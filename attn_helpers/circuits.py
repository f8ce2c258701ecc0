"""A circuit you can read (chapter 8): a tiny attention-only model that learns an induction head.

The task: each sequence of ``seq_len`` tokens ends with a block of n random tokens shown twice,
``… a b c d | a b c d``, after a prefix of random tokens; n varies from sequence to sequence, so
the position alone does not say where the repeat starts. All tokens in a sequence are distinct,
so each token of the repeat has exactly one earlier occurrence. Predicting the next token inside
the repeat needs two steps (Olsson et al. 2022): layer 1 copies each token's predecessor into it
(a previous-token head), and layer 2 looks for the position whose predecessor is the current
token and copies that position's token (an induction head).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .masks import causal_mask
from .modules import MultiHeadAttention

__all__ = [
    "induction_batch",
    "AttentionOnly",
    "InductionResult",
    "induction_accuracy",
    "train_induction",
    "qk_circuit",
]


def _check_task(vocab_size: int, seq_len: int, min_repeat: int) -> tuple[int, int, int]:
    """The task's sizes as ints, after checking they describe a task that can be built."""
    seq_len = validate.positive_int(seq_len, "seq_len", 4)
    min_repeat = validate.positive_int(min_repeat, "min_repeat", 2)
    if 2 * min_repeat > seq_len:
        raise ValueError(f"min_repeat={min_repeat} is too long: the block and its repeat must fit in seq_len={seq_len}.")
    vocab_size = validate.positive_int(vocab_size, "vocab_size", 2)
    if vocab_size < seq_len - min_repeat:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a sequence holds up to seq_len - min_repeat = "
            f"{seq_len - min_repeat} distinct tokens. Use a vocab_size of at least that."
        )
    return vocab_size, seq_len, min_repeat


def induction_batch(
    batch_size: int, vocab_size: int = 24, seq_len: int = 20, min_repeat: int = 4,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the repeated-tokens task (chapter 8): ``(tokens, scored)``, both ``(b, seq_len)``.

    Sequence k is a prefix of ``seq_len - 2n`` distinct random tokens, then a block of n more, then the
    block again, with n drawn from ``min_repeat … seq_len // 2``. ``scored[k, j]`` is True where position j
    lies in the repeat and its next token j + 1 can be predicted by copying: j = seq_len - n … seq_len - 2.
    """
    batch_size = validate.positive_int(batch_size, "batch_size")
    vocab_size, seq_len, min_repeat = _check_task(vocab_size, seq_len, min_repeat)
    lengths = torch.randint(min_repeat, seq_len // 2 + 1, (batch_size, 1), generator=generator)  # n, (b, 1)
    perms = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=-1)  # distinct tokens per row
    pos = torch.arange(seq_len)  # (t,)
    in_repeat = pos >= seq_len - lengths  # (b, t): the second copy of the block
    tokens = perms.gather(1, pos - lengths * in_repeat)  # (b, t): position p of the repeat copies p - n
    scored = in_repeat & (pos < seq_len - 1)  # the last position has no next token
    return tokens, scored


class AttentionOnly(nn.Module):
    """A causal, attention-only transformer with one head per layer and no MLP or LayerNorm (chapter 8).

    ``x = token_embedding + position_embedding``, then ``x = x + attention_l(x)`` for every layer
    (``attn_helpers.MultiHeadAttention`` with one head and a causal mask), and the logits are
    ``unembed(x)``. ``forward(tokens)`` takes ids ``(b, t)`` and returns logits ``(b, t, vocab_size)``
    and the attention weights of every layer, a list of ``(b, 1, t, t)`` tensors.
    """

    def __init__(self, vocab_size: int, seq_len: int, d_model: int, n_layers: int):
        super().__init__()
        self.vocab_size = vocab_size = validate.positive_int(vocab_size, "vocab_size", 2)
        self.seq_len = seq_len = validate.positive_int(seq_len, "seq_len", 2)
        self.d_model = d_model = validate.positive_int(d_model, "d_model")
        n_layers = validate.positive_int(n_layers, "n_layers")
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)  # learned absolute positions
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads=1) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("mask", causal_mask(seq_len), persistent=False)

    def forward(self, tokens: torch.Tensor, skip: set[int] | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``(b, t, vocab_size)`` and weights ``[(b, 1, t, t)] * n_layers``; layers in ``skip`` are left out."""
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long or tokens.dim() != 2:
            raise ValueError(
                f"tokens must be a (b, t) tensor of integer ids (torch.long); got "
                f"{getattr(tokens, 'shape', type(tokens).__name__)} {getattr(tokens, 'dtype', '')}."
            )
        t = tokens.shape[1]
        if t > self.seq_len or tokens.min() < 0 or tokens.max() >= self.vocab_size:
            raise ValueError(
                f"the model takes up to seq_len={self.seq_len} tokens with ids 0 … {self.vocab_size - 1}; "
                f"got {t} tokens with ids {int(tokens.min())} … {int(tokens.max())}."
            )
        x = self.embed(tokens) + self.pos.weight[:t]  # (b, t, d_model)
        weights = []
        for i, layer in enumerate(self.layers):
            out, w = layer(x, mask=self.mask[:t, :t])  # (b, t, d_model), (b, 1, t, t)
            weights.append(w)
            if i not in (skip or set()):
                x = x + out  # the residual stream
        return self.unembed(x), weights


@dataclass
class InductionResult:
    """What ``train_induction`` returns: the loss of every step and the held-out copying accuracy."""

    losses: list[float] = field(default_factory=list)
    accuracy: float = 0.0


def induction_accuracy(model: AttentionOnly, n: int = 1000, seed: int = 999, skip: set[int] | None = None) -> float:
    """Share of the predictable positions of ``n`` fresh sequences whose next token ``model`` gets right (chapter 8)."""
    _check_model(model)
    tokens, scored = induction_batch(n, model.vocab_size, model.seq_len, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = model(tokens, skip=skip)
    right = logits[:, :-1].argmax(-1) == tokens[:, 1:]  # (n, t - 1): position j predicts token j + 1
    return float(right[scored[:, :-1]].float().mean())


def _check_model(model: object) -> None:
    if not isinstance(model, AttentionOnly):
        raise TypeError(f"expected an attn_helpers.circuits.AttentionOnly model, got {type(model).__name__}.")


def train_induction(model: AttentionOnly, steps: int = 300, batch_size: int = 64, lr: float = 0.01,
                    seed: int = 0) -> InductionResult:
    """Train ``model`` with Adam on the repeated-tokens task (chapter 8).

    The loss is the cross-entropy of the next token at the predictable positions of the repeat. Batches
    come from a generator seeded with ``seed`` and training runs on one CPU thread, so a run is repeatable.
    Returns the loss of every step and ``induction_accuracy`` on 1,000 held-out sequences.
    """
    _check_model(model)
    steps = validate.positive_int(steps, "steps")
    batch_size = validate.positive_int(batch_size, "batch_size")
    gen = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    result = InductionResult()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a fixed summation order: the same losses on every run
    try:
        for _ in range(steps):
            tokens, scored = induction_batch(batch_size, model.vocab_size, model.seq_len, generator=gen)
            logits, _ = model(tokens)  # (b, t, vocab_size)
            where = scored[:, :-1]
            loss = F.cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            result.losses.append(loss.item())
        result.accuracy = induction_accuracy(model)
    finally:
        torch.set_num_threads(threads)
    return result


@torch.no_grad()
def qk_circuit(model: AttentionOnly, layer: int = 1) -> torch.Tensor:
    """The token-to-token QK circuit of ``layer`` read through the previous layer's OV circuit, ``(V, V)`` (chapter 8).

    Row i: the current token i, as the query reads it from the token embedding E. Column j: a key position
    whose *previous* token is j, as layer ``layer - 1`` writes it there when it attends to that previous
    token, ``E W_Vᵀ W_Oᵀ``. Entry (i, j) is the score ``(E W_Qᵀ)(E W_Vᵀ W_Oᵀ W_Kᵀ)ᵀ / √d_k``. An induction
    head has its largest entries on the diagonal: it looks for the position that follows its own token.
    """
    _check_model(model)
    if len(model.layers) < 2:
        raise ValueError(f"qk_circuit reads a layer through the layer before it, so the model needs two layers or "
                         f"more; this one has {len(model.layers)}.")
    layer = validate.positive_int(layer, "layer", maximum=len(model.layers) - 1, why="it reads the layer before it")
    E = model.embed.weight  # (V, d_model)
    prev, head = model.layers[layer - 1], model.layers[layer]
    written = E @ prev.W_v.weight.T @ prev.W_o.weight.T  # (V, d_model): what the previous-token head copies
    q = E @ head.W_q.weight.T  # (V, d_k)
    k = written @ head.W_k.weight.T  # (V, d_k)
    return q @ k.T / head.d_k ** 0.5  # (V, V)
