"""Chapter 8's trained claims: the two-layer induction model and its one-layer control, trained as the chapter
trains them.

Each measure re-runs the chapter's training with another seed (``torch.manual_seed(seed)`` before building each model,
``train_induction(..., seed=seed)``) and computes what the chapter's assert compares. A seed's two trainings are cached,
so the claims below cost one training of each model per seed.
"""

from __future__ import annotations

import math
from functools import cache

import torch
from margins import Claim

from attn_helpers import circuits

VOCAB, SEQ, WIDTH, STEPS = 24, 20, 32, 250


@cache
def _trained(
    seed: int,
) -> tuple[circuits.AttentionOnly, circuits.InductionResult, circuits.AttentionOnly, circuits.InductionResult]:
    torch.manual_seed(seed)
    two = circuits.AttentionOnly(vocab_size=VOCAB, seq_len=SEQ, d_model=WIDTH, n_layers=2)
    result_two = circuits.train_induction(two, steps=STEPS, seed=seed, log_every=5)
    torch.manual_seed(seed)
    one = circuits.AttentionOnly(vocab_size=VOCAB, seq_len=SEQ, d_model=WIDTH, n_layers=1)
    result_one = circuits.train_induction(one, steps=STEPS, seed=seed)
    return two, result_two, one, result_one


def two_layer_accuracy(seed: int) -> float:
    return _trained(seed)[1].accuracy


def knocked_out(layer: int):
    def measure(seed: int) -> float:
        return circuits.induction_accuracy(_trained(seed)[0], skip={layer})
    return measure


@torch.no_grad()
def _head_weights(seed: int) -> tuple[float, float]:
    """Layer 1's mean weight on the previous position and layer 2's on the token after the earlier copy (cell 22)."""
    tokens, scored = circuits.induction_batch(500, generator=torch.Generator().manual_seed(5))
    _, (w1, w2) = _trained(seed)[0](tokens)
    w1, w2 = w1[:, 0], w2[:, 0]  # (b, t, t)
    j = torch.arange(1, 16)
    n = scored.sum(dim=1, keepdim=True) + 1  # (b, 1): the block's length
    after_copy = (torch.arange(SEQ) - n + 1).clamp(min=0)  # (b, t)
    return float(w1[:, j, j - 1].mean()), float(w2.gather(2, after_copy[..., None])[..., 0][scored].mean())


def diagonal_share(seed: int) -> float:
    C = circuits.qk_circuit(_trained(seed)[0])
    return float((C.argmax(dim=-1) == torch.arange(VOCAB)).float().mean())


def _formation(seed: int) -> dict[str, float]:
    """The formation table's quantities (cell 26): means of the five steps up to a logged step."""
    result_two, result_one = _trained(seed)[1], _trained(seed)[3]
    measured = result_two.measured

    def mean_loss(losses, step):
        return sum(losses[step - 5:step]) / 5

    before = max(step for step, m in measured.items() if max(m.previous_token, m.induction) < 0.25)
    diagonal_at = min(step for step, m in measured.items() if m.diagonal == 1.0)
    either_08 = min(step for step, m in measured.items() if max(m.previous_token, m.induction) > 0.8)
    two_fall = mean_loss(result_two.losses, 5) - mean_loss(result_two.losses, before)
    one_fall = mean_loss(result_one.losses, 5) - mean_loss(result_one.losses, before)
    return {"start_above_uniform": mean_loss(result_two.losses, 5) - math.log(VOCAB), "fall_before": two_fall,
            "one_layer_share": one_fall / two_fall, "diagonal_lead": either_08 - diagonal_at}


@torch.no_grad()
def _one_layer(seed: int) -> dict[str, float]:
    """The one-layer model's predictions position by position (cell 19), against the rule that reads positions only."""
    one, result_one = _trained(seed)[2], _trained(seed)[3]
    tokens, marked = circuits.induction_batch(1000, generator=torch.Generator().manual_seed(999))
    predicted = one(tokens)[0][:, :-1].argmax(-1)  # (1000, 19)
    target, marked = tokens[:, 1:], marked[:, :-1]
    right = predicted == target
    seen = torch.stack([(tokens[:, :j + 1] == predicted[:, j, None]).any(-1) for j in range(19)], dim=1)
    j = torch.arange(10, 19)
    shortest = (20 - j).clamp(min=4)
    rule_right = tokens[:, j + 1 - shortest] == target[:, j]
    rule = float(rule_right[marked[:, j]].float().mean())
    return {"seen": float(seen[marked].float().mean()), "above_rule": result_one.accuracy - rule,
            "position_10": float(right[marked[:, 10], 10].float().mean()),
            "positions_16_18": max(float(right[marked[:, p], p].float().mean()) for p in (16, 17, 18))}


CLAIMS = [
    Claim(8, "two layers copy more than 85 % of the repeat", two_layer_accuracy, low=0.85),
    Claim(8, "layer 1 knocked out: above 2 in 24, below 25 %", knocked_out(0), low=2 / 24, high=0.25),
    Claim(8, "layer 2 knocked out: below 15 %", knocked_out(1), high=0.15),
    Claim(8, "layer 1's weight on the previous position > 0.5", lambda seed: _head_weights(seed)[0], low=0.5),
    Claim(8, "layer 2's weight after the earlier copy > 0.75", lambda seed: _head_weights(seed)[1], low=0.75),
    Claim(8, "QK circuit: rows with the diagonal largest > 0.9", diagonal_share, low=0.9),
    Claim(8, "mean loss of steps 1-5 above ln 24", lambda seed: _formation(seed)["start_above_uniform"], low=0.0),
    Claim(8, "loss falls > 0.3 before either weight reaches 0.25", lambda seed: _formation(seed)["fall_before"],
          low=0.3),
    Claim(8, "one layer's fall over those steps > half the two layers'",
          lambda seed: _formation(seed)["one_layer_share"], low=0.5),
    Claim(8, "diagonal complete before either weight > 0.8 (steps ahead)",
          lambda seed: _formation(seed)["diagonal_lead"], low=0),
    Claim(8, "one layer: predictions already seen > 99 %", lambda seed: _one_layer(seed)["seen"], low=0.99),
    Claim(8, "one layer minus the positional rule: between 0 and 0.1", lambda seed: _one_layer(seed)["above_rule"],
          low=0.0, high=0.1),
    Claim(8, "one layer at position 10 > 95 %", lambda seed: _one_layer(seed)["position_10"], low=0.95),
    Claim(8, "one layer at positions 16-18 < 20 %", lambda seed: _one_layer(seed)["positions_16_18"], high=0.2),
]
