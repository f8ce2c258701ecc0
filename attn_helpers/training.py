"""A small synthetic task that one attention head can learn, and the book's one training loop (chapter 4).

The task: every token must output a copy of the token ``offset`` places away (``offset=-1``: the
previous token). Each input vector is the concatenation of two one-hot codes, the token's
identity (``vocab_size`` features) and its position (``seq_len`` features), so a head can learn
to find the right neighbour from the position part and to copy the identity part.

:func:`fit` is the loop every model of the book trains with, and :func:`torch_threads` the one place
that sets PyTorch's thread count for a block (training on one thread, timings on a chosen number).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from . import validate
from .modules import SelfAttentionHead

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = [
    "IGNORE",
    "LETTERS",
    "TrainResult",
    "torch_threads",
    "fit",
    "copy_task_batch",
    "token_labels",
    "copy_task_loss",
    "copy_task_accuracy",
    "copy_task_head",
    "train_copy_task",
    "plot_losses",
]

IGNORE = -100  # target of positions with no neighbour at the offset; cross_entropy skips them
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass
class TrainResult:
    """What the training functions return (chapters 4 and 5): the loss of every step and the final test accuracy."""

    losses: list[float] = field(default_factory=list)
    accuracy: float = 0.0


@contextmanager
def torch_threads(threads: int | None = 1) -> Iterator[None]:
    """Run the block on ``threads`` CPU threads (``None``: as many as now), then restore the count
    (chapter 4 onwards).

    One thread (the default) gives a fixed summation order, so training gives the same numbers on every run
    and machine with the same PyTorch; chapters 7 and 9 time attention on a chosen number of threads.
    """
    threads = validate.integer(threads, "threads", minimum=1, none_ok=True)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit(model: nn.Module, batch_loss: Callable[[], torch.Tensor], steps: int, lr: float,
        after_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Adam on ``model``'s parameters for ``steps`` steps, on one thread; returns every step's loss (chapter 4 onwards).

    Each step computes ``batch_loss()`` (a 0-d tensor: the loss of a fresh batch), back-propagates it and
    updates the weights, then calls ``after_step(step, loss)`` if given (steps count from 1). The one
    training loop of the book: chapters 4, 5, 8, 9, 10, 11 and 12 train their models with it.
    """
    steps = validate.integer(steps, "steps", minimum=1)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    with torch_threads():  # a fixed summation order: the same losses on every run
        for step in range(1, steps + 1):
            loss = batch_loss()  # 0-d
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
            if after_step is not None:
                after_step(step, losses[-1])
    return losses


def _check_task(seq_len: int, vocab_size: int, offset: int) -> None:
    validate.integer(seq_len, "seq_len", minimum=2)
    validate.integer(vocab_size, "vocab_size", minimum=2)
    if vocab_size > len(LETTERS):
        raise ValueError(f"vocab_size={vocab_size} is larger than the {len(LETTERS)} letters used as token names.")
    if validate.integer(offset, "offset") == 0 or abs(offset) >= seq_len:
        raise ValueError(
            f"offset must be a non-zero integer with |offset| < seq_len={seq_len}, got {offset!r}: "
            f"-1 copies the previous token, +1 the next one."
        )


def copy_task_batch(
    batch_size: int, seq_len: int = 8, vocab_size: int = 10, offset: int = -1,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the copy task (chapter 4): ``(x, tokens, targets)``.

    ``x`` ``(b, t, vocab_size + seq_len)``: one-hot token then one-hot position;
    ``tokens`` ``(b, t)``: random token ids; ``targets`` ``(b, t)``: ``tokens[:, i + offset]``,
    or ``IGNORE`` where ``i + offset`` falls outside the sequence.
    """
    _check_task(seq_len, vocab_size, offset)
    validate.integer(batch_size, "batch_size", minimum=1)
    tokens = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    positions = torch.eye(seq_len).expand(batch_size, seq_len, seq_len)
    x = torch.cat([F.one_hot(tokens, vocab_size).float(), positions], dim=-1)  # (b, t, V + t)
    targets = torch.full_like(tokens, IGNORE)
    source = torch.arange(seq_len) + offset
    valid = (source >= 0) & (source < seq_len)
    targets[:, valid] = tokens[:, source[valid]]
    return x, tokens, targets


def token_labels(tokens: torch.Tensor) -> list[str]:
    """Axis labels ``"0:C", "1:A", …`` (position:letter) for one sequence of token ids ``(t,)`` (chapter 4)."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"token_labels takes one sequence of ids, a tensor of shape (t,); got {type(tokens).__name__}.")
    if tokens.dim() != 1:
        raise ValueError(f"token_labels takes one sequence of ids, shape (t,); got {getattr(tokens, 'shape', tokens)}.")
    return [f"{i}:{LETTERS[int(k)]}" for i, k in enumerate(tokens)]


def copy_task_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``logits`` ``(b, t, vocab_size)`` against ``targets`` ``(b, t)``, skipping ``IGNORE``
    (chapter 4)."""
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(
            f"logits must be (b, t, vocab_size) and targets (b, t); got {tuple(logits.shape)} and "
            f"{tuple(targets.shape)}. Did the head's d_v differ from vocab_size?"
        )
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)


def copy_task_accuracy(
    model: nn.Module, n: int = 1000, offset: int = -1, seed: int = 1234, seq_len: int = 8, vocab_size: int = 10,
) -> float:
    """Share of the scored positions of ``n`` fresh sequences that ``model`` copies right (chapter 4)."""
    _check_model(model, seq_len, vocab_size)
    x, _, targets = copy_task_batch(n, seq_len, vocab_size, offset, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = model(x)
    scored = targets != IGNORE
    return float((logits.argmax(-1)[scored] == targets[scored]).float().mean())


def _check_model(model: nn.Module, seq_len: int, vocab_size: int) -> None:
    """The model must take vocab_size + seq_len features and return vocab_size scores per token."""
    _check_task(seq_len, vocab_size, -1)
    d_model, d_v = getattr(model, "d_model", None), getattr(model, "d_v", None)
    if (d_model, d_v) != (vocab_size + seq_len, vocab_size):
        raise ValueError(
            f"the model must be an attn_helpers.SelfAttentionHead that takes vocab_size + seq_len = "
            f"{vocab_size + seq_len} features and returns vocab_size = {vocab_size} scores per token, e.g. "
            f"SelfAttentionHead({vocab_size} + {seq_len}, 8, d_v={vocab_size}); got d_model={d_model}, d_v={d_v}."
        )


def copy_task_head(seed: int = 0, d_k: int = 8, seq_len: int = 8, vocab_size: int = 10) -> SelfAttentionHead:
    """The untrained head for the copy task (chapter 4), its weights drawn after ``torch.manual_seed(seed)``.

    It takes ``vocab_size + seq_len`` features (a one-hot letter, then a one-hot position) and returns
    ``vocab_size`` scores per token: ``SelfAttentionHead(d_model=18, d_k=8, d_v=10)`` at the defaults.
    """
    torch.manual_seed(validate.integer(seed, "seed", minimum=0))
    return SelfAttentionHead(d_model=vocab_size + seq_len, d_k=d_k, d_v=vocab_size)


def train_copy_task(
    model: nn.Module, steps: int = 200, batch_size: int = 64, lr: float = 0.02, offset: int = -1,
    seed: int = 0, progress: bool = True, seq_len: int = 8, vocab_size: int = 10,
) -> TrainResult:
    """Train ``model`` (an ``attn_helpers.SelfAttentionHead``) on the copy task with Adam (chapter 4).

    The head's output ``(b, t, vocab_size)`` is read directly as scores over the vocabulary.
    Batches come from a generator seeded with ``seed``; training runs on one CPU thread, so the
    same seed gives the same numbers run after run (another CPU's kernels can move the last bits). Shows a tqdm bar
    when ``progress``. Returns the loss of every step and the accuracy on 1,000 fresh sequences.
    """
    _check_model(model, seq_len, vocab_size)
    _check_task(seq_len, vocab_size, offset)
    gen = torch.Generator().manual_seed(seed)

    def batch_loss() -> torch.Tensor:
        x, _, targets = copy_task_batch(batch_size, seq_len, vocab_size, offset, gen)
        logits, _ = model(x)  # (b, t, vocab_size)
        return copy_task_loss(logits, targets)

    def show(_: int, loss: float) -> None:
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        bar.update()

    with tqdm(total=validate.integer(steps, "steps", minimum=1), desc="training", file=sys.stdout, disable=not progress,
              ncols=80, mininterval=0.5) as bar, torch_threads():
        losses = fit(model, batch_loss, steps, lr, after_step=show)
        return TrainResult(losses, copy_task_accuracy(model, offset=offset, seq_len=seq_len, vocab_size=vocab_size))


def plot_losses(losses: list[float], title: str = "Training loss", ax: plt.Axes | None = None) -> plt.Axes:
    """Line plot of the loss at every training step (chapter 4). Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    if len(losses) == 0:
        raise ValueError("losses is empty: train for at least one step first.")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(range(1, len(losses) + 1), losses)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss (log scale)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return ax
