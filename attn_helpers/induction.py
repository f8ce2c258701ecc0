"""Chapter 8's experiment in one place: an induction head trained, knocked out, read and watched forming.

``train_pair`` trains the two-layer attention-only model of ``attn_helpers.circuits`` and, as its control, a
one-layer model of the same width, both from one seed. The other functions measure what the chapter shows:
each layer knocked out (``knockouts``), layer 2's QK circuit on its own (``circuit_alone``), the formation
table (``formation``) and the one-layer model position by position (``one_layer_positions``). The chapter's
cells and its trained claims (``scripts/claims/ch08.py``) call the same functions, so every setting of the
experiment (sizes, steps, held-out sequences) is typed once, here, as a default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from . import validate
from .circuits import AttentionOnly, InductionResult, induction_accuracy, induction_batch, qk_circuit, train_induction
from .training import torch_threads

__all__ = ["Pair", "train_pair", "knockouts", "circuit_alone", "Formation", "formation", "one_layer_positions"]


@dataclass
class Pair:
    """What ``train_pair`` returns (chapter 8): the two trained models and their ``InductionResult``."""

    two_layer: AttentionOnly
    one_layer: AttentionOnly
    two: InductionResult  # losses, held-out accuracy, and the HeadMeasures every log_every steps
    one: InductionResult  # losses and held-out accuracy


def train_pair(seed: int = 0, steps: int = 250, vocab_size: int = 24, seq_len: int = 20, d_model: int = 32,
               log_every: int = 5) -> Pair:
    """Train a two-layer ``AttentionOnly`` model and a one-layer one of the same width, ``steps`` steps each
    (chapter 8).

    Both start from weights drawn after ``torch.manual_seed(seed)`` and train on the batches of
    ``train_induction(..., seed=seed)``; the two-layer run records ``measure_heads`` every ``log_every`` steps.
    The global random state is left as it was.
    """
    seed = validate.integer(seed, "seed", minimum=0)

    def trained(n_layers: int, log: int | None) -> tuple[AttentionOnly, InductionResult]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AttentionOnly(vocab_size, seq_len, d_model, n_layers)
        return model, train_induction(model, steps=steps, seed=seed, log_every=log)

    two_layer, two = trained(2, log_every)
    one_layer, one = trained(1, None)
    return Pair(two_layer, one_layer, two, one)


def knockouts(model: AttentionOnly) -> dict[str, float]:
    """``induction_accuracy`` of a two-layer ``model`` with each layer's output left out in turn (chapter 8):
    ``{"layer 1": …, "layer 2": …}`` (layers counted from 1, ``skip`` from 0)."""
    _check_model(model)
    with torch_threads():
        return {f"layer {layer + 1}": induction_accuracy(model, skip={layer}) for layer in range(len(model.layers))}


def _check_model(model: object) -> None:
    if not isinstance(model, AttentionOnly):
        raise TypeError(f"expected an attn_helpers.circuits.AttentionOnly model, got {type(model).__name__}.")


@torch.no_grad()
def circuit_alone(model: AttentionOnly, n: int = 200, seed: int = 5) -> float:
    """Layer 2's mean weight on the position after the earlier copy when its scores are the QK circuit's entries
    alone (chapter 8), on the scored positions of ``n`` held-out sequences (those of ``measure_heads``).

    Query i, key j >= 1 scores ``C[token_i, token_{j-1}]``, as if layer 1 attended to the previous token only
    and every other term of the scores were zero; key 0 has no previous token and gets no weight.
    """
    C = qk_circuit(model)  # (V, V); refuses a model that is not a two-layer AttentionOnly
    tokens, scored = induction_batch(n, model.vocab_size, model.seq_len, generator=torch.Generator().manual_seed(seed))
    t = model.seq_len
    previous = tokens.roll(1, dims=1)  # (b, t): the token before each key position (wrapped at key 0, masked)
    scores = C[tokens[:, :, None], previous[:, None, :]]  # (b, t, t): C[token_i, token_{j-1}]
    allowed = torch.ones(t, t, dtype=torch.bool).tril()  # (t, t): causal
    allowed[1:, 0] = False  # key 0 has no previous token (query 0 keeps it: it has no other key)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)  # (b, t, t)
    n_block = scored.sum(dim=1, keepdim=True) + 1  # (b, 1): the block's length
    after_copy = (torch.arange(t) - n_block + 1).clamp(min=0)  # (b, t): the position after the earlier copy
    return float(weights.gather(2, after_copy[..., None])[..., 0][scored].mean())


@dataclass
class Formation:
    """The formation table's events and numbers (chapter 8). Losses are means of the five steps up to a step.

    ``steps`` maps each event to its logged step (None if it never happens in the run): "start" (5), "curves
    part" (the first step from which the two-layer loss stays more than ``part_gap`` below the one-layer loss
    up to the next event), "weights at most 0.25" (the last step before either head weight first reaches 0.25:
    both below it, at most 0.25 as the table rounds them), "QK circuit complete" (the first with every row's
    largest entry on the diagonal), "either weight above 0.8" and "both weights above 0.8". ``table`` shows
    them, one row each, but for "either weight above 0.8".
    """

    steps: dict[str, int | None]
    table: pd.DataFrame
    uniform: float  # ln V: the loss of the same probability for every token
    start_loss: float  # two layers, steps 1-5
    fall: float  # two layers: from the start to "weights at most 0.25"
    one_fall: float  # one layer, over the same steps
    below_uniform: float  # two layers: how far below ln V the loss is at "weights at most 0.25"
    one_below_uniform: float  # one layer, at the same step
    diagonal_start: float  # QK circuit's rows with the diagonal largest, at step 5
    diagonal_before: float  # the same, at "weights at most 0.25"


def formation(pair: Pair, part_gap: float = 0.1) -> Formation:
    """The events of the two-layer run's formation, and both runs' losses at them (chapter 8)."""
    part_gap = validate.real(part_gap, "part_gap", above=0)
    measured = pair.two.measured
    if 5 not in measured:
        raise ValueError("the two-layer run has no measures at step 5: train it with log_every=5 (train_pair's "
                         "default).")
    logged = [step for step in measured if step]

    def mean_loss(losses: list[float], step: int) -> float:
        return sum(losses[step - 5:step]) / 5

    two = {step: mean_loss(pair.two.losses, step) for step in logged}
    one = {step: mean_loss(pair.one.losses, step) for step in logged}
    weights = {step: (measured[step].previous_token, measured[step].induction) for step in logged}
    reached = min((step for step in logged if max(weights[step]) >= 0.25), default=logged[-1] + 1)
    before = max(step for step in logged if step < reached)  # the last step before either weight reaches 0.25
    parted = [step for step in logged if step <= before and
              all(one[s] - two[s] > part_gap for s in logged if step <= s <= before)]
    steps = {
        "start": 5,
        "curves part": min(parted, default=None),
        "weights at most 0.25": before,
        "QK circuit complete": min((s for s in logged if measured[s].diagonal == 1.0), default=None),
        "either weight above 0.8": min((s for s in logged if max(weights[s]) > 0.8), default=None),
        "both weights above 0.8": min((s for s in logged if min(weights[s]) > 0.8), default=None),
    }
    rows = {name: {"step": step, "loss": round(two[step], 2), "previous-token": round(weights[step][0], 2),
                   "induction": round(weights[step][1], 2), "diagonal": round(measured[step].diagonal, 2),
                   "one layer's loss": round(one[step], 2)}
            for name, step in steps.items() if step is not None and name != "either weight above 0.8"}
    uniform = math.log(pair.two_layer.vocab_size)
    return Formation(
        steps=steps, table=pd.DataFrame.from_dict(rows, orient="index").rename_axis("event"), uniform=uniform,
        start_loss=two[5], fall=two[5] - two[before], one_fall=one[5] - one[before],
        below_uniform=uniform - two[before], one_below_uniform=uniform - one[before],
        diagonal_start=measured[5].diagonal, diagonal_before=measured[before].diagonal,
    )


@torch.no_grad()
def one_layer_positions(model: AttentionOnly, n: int = 1000, seed: int = 999,
                        min_repeat: int = 4) -> tuple[pd.DataFrame, dict[str, float]]:
    """A model's predictions in the repeat, position by position, against a rule that reads positions only
    (chapter 8), on the ``n`` held-out sequences of ``induction_accuracy`` (blocks of ``min_repeat`` tokens or more).

    The rule copies the token one block back, for the shortest block that puts the position in the repeat.
    Returns a table (one row per position that can lie in the repeat: the block lengths that fit, the share
    the model gets right, the share the rule gets right) and ``{"accuracy", "rule", "seen"}``: the model's and
    the rule's share right over every scored position, and the share of the model's predictions that are
    tokens already in the sequence.
    """
    _check_model(model)
    t = model.seq_len
    tokens, scored = induction_batch(n, model.vocab_size, t, min_repeat, generator=torch.Generator().manual_seed(seed))
    with torch_threads():
        predicted = model(tokens)[0][:, :-1].argmax(-1)  # (n, t - 1): the token predicted after each position
    target, marked = tokens[:, 1:], scored[:, :-1]  # (n, t - 1) each
    right = predicted == target
    earlier = torch.ones(t, t - 1, dtype=torch.bool).triu()  # (t, t - 1): [k, j] = token k stands at or before j
    seen = ((tokens[:, :, None] == predicted[:, None, :]) & earlier).any(dim=1)  # (n, t - 1)
    j = torch.arange(t // 2, t - 1)  # the positions that can be in the repeat
    shortest = (t - j).clamp(min=min_repeat)  # the shortest block that puts j in it
    rule_right = tokens[:, j + 1 - shortest] == target[:, j]  # (n, len(j)): copy from one such block back
    longest = t // 2
    table = pd.DataFrame({
        "position": j.tolist(),
        "block lengths that fit": (longest - shortest + 1).tolist(),
        "model right": [float(right[marked[:, p], p].float().mean()) for p in j.tolist()],
        "rule right": [float(rule_right[marked[:, p], i].float().mean()) for i, p in enumerate(j.tolist())],
    }).set_index("position")
    summary = {"accuracy": float(right[marked].float().mean()), "rule": float(rule_right[marked[:, j]].float().mean()),
               "seen": float(seen[marked].float().mean())}
    return table, summary
