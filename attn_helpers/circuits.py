"""A circuit you can read (chapter 8): a tiny attention-only model that learns an induction head.

The task: each sequence of ``seq_len`` tokens ends with a block of n random tokens shown twice,
``… a b c d | a b c d``, after a prefix of random tokens; n varies from sequence to sequence, so
the position alone does not say where the repeat starts. All tokens in a sequence are distinct,
so each token of the repeat has exactly one earlier occurrence. Predicting the next token inside
the repeat needs two steps (Olsson et al. 2022): layer 1 copies each token's predecessor into it
(a previous-token head), and layer 2 looks for the position whose predecessor is the current
token and copies that position's token (an induction head). ``measure_heads`` says how far both heads
have formed, and ``train_induction(..., log_every=k)`` records it every k steps of training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .masks import causal_mask
from .modules import MultiHeadAttention
from .training import fit, torch_threads

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = [
    "induction_batch",
    "AttentionOnly",
    "InductionResult",
    "induction_accuracy",
    "HeadMeasures",
    "measure_heads",
    "train_induction",
    "qk_circuit",
    "plot_formation",
]


def _check_task(vocab_size: int, seq_len: int, min_repeat: int) -> tuple[int, int, int]:
    """The task's sizes as ints, after checking they describe a task that can be built."""
    seq_len = validate.integer(seq_len, "seq_len", minimum=4)
    min_repeat = validate.integer(min_repeat, "min_repeat", minimum=2)
    if 2 * min_repeat > seq_len:
        raise ValueError(f"min_repeat={min_repeat} is too long: the block and its repeat must fit in "
                         f"seq_len={seq_len}.")
    vocab_size = validate.integer(vocab_size, "vocab_size", minimum=2)
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
    batch_size = validate.integer(batch_size, "batch_size", minimum=1)
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
        self.vocab_size = vocab_size = validate.integer(vocab_size, "vocab_size", minimum=2)
        self.seq_len = seq_len = validate.integer(seq_len, "seq_len", minimum=2)
        self.d_model = d_model = validate.integer(d_model, "d_model", minimum=1)
        n_layers = validate.integer(n_layers, "n_layers", minimum=1)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)  # learned absolute positions
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads=1) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("mask", causal_mask(seq_len), persistent=False)

    def forward(self, tokens: torch.Tensor, skip: set[int] | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``(b, t, vocab_size)`` and weights ``[(b, 1, t, t)] * n_layers``; layers in ``skip`` are left out."""
        _, t = validate.token_ids(tokens, self.vocab_size)
        if t > self.seq_len:
            raise ValueError(f"the model takes up to seq_len={self.seq_len} tokens, got {t}.")
        x = self.embed(tokens) + self.pos.weight[:t]  # (b, t, d_model)
        weights = []
        for i, layer in enumerate(self.layers):
            out, w = layer(x, mask=self.mask[:t, :t])  # (b, t, d_model), (b, 1, t, t)
            weights.append(w)
            if i not in (skip or set()):
                x = x + out  # the residual stream
        return self.unembed(x), weights


@dataclass
class HeadMeasures:
    """How far the two heads of a two-layer model have formed, three numbers from 0 to 1 (chapter 8)."""

    previous_token: float  # layer 1's mean weight on the previous position
    induction: float  # layer 2's mean weight, inside the repeat, on the position after the earlier copy
    diagonal: float  # share of the QK circuit's rows whose largest entry is on the diagonal


@dataclass
class InductionResult:
    """What ``train_induction`` returns (chapter 8): the loss of every step, the held-out copying accuracy, and
    ``measured``, the ``HeadMeasures`` after every ``log_every`` steps (step 0 is before training)."""

    losses: list[float] = field(default_factory=list)
    accuracy: float = 0.0
    measured: dict[int, HeadMeasures] = field(default_factory=dict)


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


@torch.no_grad()
def measure_heads(model: AttentionOnly, n: int = 200, seed: int = 5) -> HeadMeasures:
    """The previous-token weight, the induction weight and the QK circuit's diagonal share of a two-layer
    ``model``, measured on ``n`` fresh sequences (chapter 8).

    Layer 1 is scored at the positions j = 1 … seq_len - 5 that layer 2 may need as keys (the first copy
    of a block of at least 4 tokens ends there), by its weight on j - 1; layer 2 at the positions of the
    repeat, by its weight on the position after the earlier copy of the current token.
    """
    _check_model(model)
    if len(model.layers) < 2:
        raise ValueError("measure_heads needs a model with at least two layers (a previous-token head and an "
                         "induction head).")
    tokens, scored = induction_batch(n, model.vocab_size, model.seq_len, generator=torch.Generator().manual_seed(seed))
    _, (w1, w2, *_) = model(tokens)
    w1, w2 = w1[:, 0], w2[:, 0]  # (b, t, t): the one head of each layer
    j = torch.arange(1, model.seq_len - 4)  # (t - 5,): the positions layer 2 may read as keys
    previous = w1[:, j, j - 1].mean()
    n_block = scored.sum(dim=1, keepdim=True) + 1  # (b, 1): the block's length
    after_copy = (torch.arange(model.seq_len) - n_block + 1).clamp(min=0)  # (b, t): after the earlier copy
    induction = w2.gather(2, after_copy[..., None])[..., 0][scored].mean()
    C = qk_circuit(model)  # (V, V)
    diagonal = (C.argmax(dim=-1) == torch.arange(model.vocab_size)).float().mean()
    return HeadMeasures(float(previous), float(induction), float(diagonal))


def train_induction(model: AttentionOnly, steps: int = 300, batch_size: int = 64, lr: float = 0.01,
                    seed: int = 0, log_every: int | None = None) -> InductionResult:
    """Train ``model`` with Adam on the repeated-tokens task (chapter 8).

    The loss is the cross-entropy of the next token at the predictable positions of the repeat. Batches
    come from a generator seeded with ``seed`` and training runs on one CPU thread, so a run is repeatable.
    Returns the loss of every step and ``induction_accuracy`` on 1,000 held-out sequences. With
    ``log_every`` = k, it also records ``measure_heads(model)`` before training and after every k steps in
    ``measured`` (held-out sequences of their own: the training batches and the losses stay the same).
    """
    _check_model(model)
    batch_size = validate.integer(batch_size, "batch_size", minimum=1)
    log_every = validate.integer(log_every, "log_every", minimum=1, none_ok=True)
    gen = torch.Generator().manual_seed(seed)
    result = InductionResult()

    def batch_loss() -> torch.Tensor:
        tokens, scored = induction_batch(batch_size, model.vocab_size, model.seq_len, generator=gen)  # (b, t) each
        logits, _ = model(tokens)  # (b, t, vocab_size)
        where = scored[:, :-1]  # position j predicts token j + 1
        return F.cross_entropy(logits[:, :-1][where], tokens[:, 1:][where])

    def measure(step: int, _: float) -> None:
        if log_every and step % log_every == 0:
            result.measured[step] = measure_heads(model)

    with torch_threads():
        if log_every:
            result.measured[0] = measure_heads(model)
        result.losses = fit(model, batch_loss, validate.integer(steps, "steps", minimum=1), lr, after_step=measure)
        result.accuracy = induction_accuracy(model)
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
    layer = validate.integer(layer, "layer", minimum=1, maximum=len(model.layers) - 1,
                             why="it reads the layer before it")
    E = model.embed.weight  # (V, d_model)
    prev, head = model.layers[layer - 1], model.layers[layer]
    written = E @ prev.W_v.weight.T @ prev.W_o.weight.T  # (V, d_model): what the previous-token head copies
    q = E @ head.W_q.weight.T  # (V, d_k)
    k = written @ head.W_k.weight.T  # (V, d_k)
    return q @ k.T / head.d_k ** 0.5  # (V, V)


def plot_formation(losses: dict[str, list[float]], measured: dict[int, HeadMeasures], title: str) -> plt.Figure:
    """Two stacked panels sharing the step axis (chapter 8): the training losses ``{label: losses}`` (log
    scale), and the three ``HeadMeasures`` recorded during training, ``{step: measures}``."""
    import matplotlib.pyplot as plt

    if not losses or not measured:
        raise ValueError("give at least one loss curve and one measured step (train with log_every).")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 6.4), sharex=True)
    for (label, values), style in zip(losses.items(), ["-", "--", ":"] * 2, strict=False):
        top.plot(range(1, len(values) + 1), values, style, label=label, linewidth=1.6)
    top.set_yscale("log")
    top.set_ylabel("loss (log scale)")
    top.set_title(title)
    steps = list(measured)
    for name, style, label in (("previous_token", "o-", "layer 1: weight on the previous token"),
                               ("induction", "s--", "layer 2: weight after the earlier copy"),
                               ("diagonal", "^:", "QK circuit: rows with the diagonal largest")):
        bottom.plot(steps, [getattr(m, name) for m in measured.values()], style, label=label, markersize=3.5,
                    linewidth=1.6)
    bottom.set_ylim(-0.03, 1.03)
    bottom.set_xlabel("training step")
    bottom.set_ylabel("share (0 to 1)")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig
