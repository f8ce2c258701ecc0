"""A task that one attention head cannot solve and two heads can (chapter 5).

Every token must name the token just before it *and* the one two places before it. The input is
chapter 4's: a one-hot token followed by a one-hot position (``attn_helpers.training``). A model
is one ``MultiHeadAttention`` layer and a linear read-out with two sets of scores over the
vocabulary, one per answer. One head has a single softmax row per token, so it must share one
budget of weight between the two neighbours and its output blurs them; two heads of half the
width can each look at one neighbour.

The task's inputs and models are float64 (``DTYPE``). Trained in float32, the scores and weights that chapter 5 shows
differed between the kernel sets of scripts/portability.py by up to 1e-5, as close as that to a rounding boundary of
their printed digits; in float64 they differ by about 1e-14 (scripts/rounding_room.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import validate
from .modules import MultiHeadAttention
from .training import IGNORE, TrainResult, copy_task_batch, copy_task_loss, fit, torch_threads

__all__ = [
    "DTYPE",
    "LOOKBACK",
    "ANSWERS",
    "two_back_batch",
    "TwoBackModel",
    "two_back_loss",
    "TwoBackAccuracy",
    "two_back_accuracy",
    "train_two_back",
    "train_head_counts",
]

DTYPE = torch.float64  # the precision of the task's inputs and models
LOOKBACK = (1, 2)  # answer k names the token LOOKBACK[k] places back
ANSWERS = ("previous token", "token two back")


def _check_sizes(seq_len: int, vocab_size: int) -> tuple[int, int]:
    seq_len = validate.integer(seq_len, "seq_len", minimum=3, why="a token two back needs it")
    return seq_len, validate.integer(vocab_size, "vocab_size", minimum=2)


def two_back_batch(
    batch_size: int, seq_len: int = 8, vocab_size: int = 8, generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the two-back task (chapter 5): ``(x, tokens, targets)``.

    ``x`` ``(b, t, vocab_size + seq_len)``, in ``DTYPE``: one-hot token then one-hot position; ``tokens`` ``(b, t)``;
    ``targets`` ``(b, t, 2)``: ``tokens[:, i - 1]`` and ``tokens[:, i - 2]``, and ``IGNORE`` at the
    first two positions, which lack a token two back.
    """
    seq_len, vocab_size = _check_sizes(seq_len, vocab_size)
    x, tokens, _ = copy_task_batch(batch_size, seq_len, vocab_size, -1, generator)
    targets = torch.full((*tokens.shape, len(LOOKBACK)), IGNORE, dtype=tokens.dtype)  # (b, t, 2)
    for k, back in enumerate(LOOKBACK):
        targets[:, back:, k] = tokens[:, :-back]
    targets[:, : max(LOOKBACK)] = IGNORE  # score only positions that have both answers
    return x.to(DTYPE), tokens, targets


class TwoBackModel(nn.Module):
    """One ``MultiHeadAttention`` layer and a linear read-out, for the two-back task (chapter 5).

    ``d_model = vocab_size + seq_len`` whatever ``num_heads`` is, so models with 1 and 2 heads have
    the same width and the same number of parameters, all in ``DTYPE``. ``forward(x)`` takes ``(b, t, d_model)`` and
    returns ``logits`` ``(b, t, 2, vocab_size)`` (scores for the token one back and two back) and
    the attention ``weights`` ``(b, h, t, t)``.
    """

    def __init__(self, num_heads: int, seq_len: int = 8, vocab_size: int = 8):
        super().__init__()
        self.seq_len, self.vocab_size = seq_len, vocab_size = _check_sizes(seq_len, vocab_size)
        self.d_model = vocab_size + seq_len
        self.attn = MultiHeadAttention(self.d_model, num_heads)
        self.readout = nn.Linear(self.d_model, len(LOOKBACK) * vocab_size)
        self.to(DTYPE)  # the initial weights drawn as in float32, then held in float64

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, weights = self.attn(x)  # (b, t, d_model), (b, h, t, t)
        b, t, _ = out.shape
        logits = self.readout(out).view(b, t, len(LOOKBACK), self.vocab_size)  # (b, t, 2, V)
        return logits, weights


def two_back_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``logits`` ``(b, t, 2, V)`` against ``targets`` ``(b, t, 2)``, skipping ``IGNORE``
    (chapter 5)."""
    if logits.dim() != 4 or logits.shape[:3] != targets.shape:
        raise ValueError(
            f"logits must be (b, t, 2, vocab_size) and targets (b, t, 2); got {tuple(logits.shape)} and "
            f"{tuple(targets.shape)}."
        )
    b, t, answers, vocab_size = logits.shape
    return copy_task_loss(logits.reshape(b, t * answers, vocab_size), targets.reshape(b, t * answers))


@dataclass
class TwoBackAccuracy:
    """Share of the scored positions where each answer is right, and where both are (chapter 5)."""

    previous: float
    two_back: float
    both: float


def two_back_accuracy(model: TwoBackModel, n: int = 2000, seed: int = 1234) -> TwoBackAccuracy:
    """Accuracy of ``model`` on ``n`` held-out sequences from a generator seeded with ``seed`` (chapter 5)."""
    _check_model(model)
    x, _, targets = two_back_batch(n, model.seq_len, model.vocab_size, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = model(x)
    scored = targets[:, max(LOOKBACK):]  # (n, t - 2, 2)
    right = logits.argmax(-1)[:, max(LOOKBACK):] == scored
    return TwoBackAccuracy(float(right[..., 0].float().mean()), float(right[..., 1].float().mean()),
                           float(right.all(-1).float().mean()))


def _check_model(model: object) -> None:
    if not isinstance(model, TwoBackModel):
        raise TypeError(
            f"expected an attn_helpers.heads_task.TwoBackModel, got {type(model).__name__}; "
            f"build one with TwoBackModel(num_heads)."
        )


def train_two_back(
    model: TwoBackModel, steps: int = 400, batch_size: int = 64, lr: float = 0.02, seed: int = 0,
) -> TrainResult:
    """Train ``model`` on the two-back task with Adam (chapter 5); ``accuracy`` is "both right".

    As ``attn_helpers.training.train_copy_task``: batches from a generator seeded with ``seed``, one CPU
    thread, so the same seed gives the same numbers run to run. Held-out accuracy comes from
    :func:`two_back_accuracy` on sequences the model never trained on.
    """
    _check_model(model)
    gen = torch.Generator().manual_seed(seed)

    def batch_loss() -> torch.Tensor:
        x, _, targets = two_back_batch(batch_size, model.seq_len, model.vocab_size, gen)
        logits, _ = model(x)  # (b, t, 2, V)
        return two_back_loss(logits, targets)

    with torch_threads():
        losses = fit(model, batch_loss, steps, lr)
        return TrainResult(losses, two_back_accuracy(model).both)


def train_head_counts(seed: int = 0, head_counts: tuple[int, ...] = (1, 2), steps: int = 200,
                      ) -> dict[int, tuple[TwoBackModel, TwoBackAccuracy]]:
    """``{heads: (model, held-out accuracy)}`` for each number of heads (chapter 5).

    Each ``TwoBackModel(num_heads=heads)`` is drawn after ``torch.manual_seed(seed)`` (the same width, so the same
    number of parameters) and trained ``steps`` steps on the same batches, seeded with ``seed``.
    """
    validate.integer(seed, "seed", minimum=0)
    trained = {}
    for heads in head_counts:
        torch.manual_seed(seed)
        model = TwoBackModel(num_heads=heads)
        train_two_back(model, steps=steps, seed=seed)
        trained[heads] = model, two_back_accuracy(model)
    return trained
