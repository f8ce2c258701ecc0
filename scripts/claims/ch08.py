"""Chapter 8's trained claims: the two-layer induction model and its one-layer control (attn_helpers.induction).

Each claim is an assert of the chapter; its names are computed by the functions the chapter's cells call, on the
pair that ``induction.train_pair(seed=seed)`` trains (cached: one training of each model per seed).
"""

from __future__ import annotations

from functools import cache

from attn_helpers import circuits, induction
from claims import Claim

pair = cache(lambda seed: induction.train_pair(seed=seed))
formation = cache(lambda seed: induction.formation(pair(seed)))
_positions = cache(lambda seed: induction.one_layer_positions(pair(seed).one_layer))
heads = cache(lambda seed: circuits.measure_heads(pair(seed).two_layer))
knocked_out = cache(lambda seed: induction.knockouts(pair(seed).two_layer))


def one_layer(seed: int) -> dict[str, object]:
    """The names of the chapter's one-layer cell: its table by position and its summary."""
    positions, one_summary = _positions(seed)
    return {"positions": positions, "one_summary": one_summary}


CLAIMS = [
    Claim(8, "result_two.accuracy > 0.85", lambda seed: {"result_two": pair(seed).two}),
    Claim(8, 'one_summary["seen"] > 0.98', one_layer),
    Claim(8, 'one_summary["rule"] < one_summary["accuracy"] < one_summary["rule"] + 0.1', one_layer),
    Claim(8, 'positions.loc[10, "model right"] > 0.95', one_layer),
    Claim(8, 'positions.loc[[16, 17, 18], "model right"].max() < 0.25', one_layer),
    Claim(8, "heads.previous_token > 0.4", lambda seed: {"heads": heads(seed)}),
    Claim(8, "heads.induction > 0.75", lambda seed: {"heads": heads(seed)}),
    Claim(8, 'knocked_out["layer 2"] < 0.2', lambda seed: {"knocked_out": knocked_out(seed)}),
    Claim(8, '2 / 24 < knocked_out["layer 1"] < 0.3', lambda seed: {"knocked_out": knocked_out(seed)}),
    Claim(8, "heads.diagonal > 0.9", lambda seed: {"heads": heads(seed)}),
    Claim(8, "alone > 0.85", lambda seed: {"alone": induction.circuit_alone(pair(seed).two_layer)}),
    Claim(8, "form.start_loss > form.uniform", lambda seed: {"form": formation(seed)}),
    Claim(8, "form.fall > 0.3", lambda seed: {"form": formation(seed)}),
    Claim(8, "form.one_fall / form.fall > 0.5", lambda seed: {"form": formation(seed)}),
    Claim(8, "form.one_below_uniform / form.below_uniform > 0.25", lambda seed: {"form": formation(seed)}),
    Claim(8, "form.diagonal_before > form.diagonal_start", lambda seed: {"form": formation(seed)}),
    Claim(8, 'form.steps["QK circuit complete"] < form.steps["either weight above 0.8"]',
          lambda seed: {"form": formation(seed)}),
]
