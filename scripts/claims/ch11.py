"""Chapter 11's trained claims: train short, test long; stretched RoPE; windows and sinks.

Each claim is an assert of the chapter's cells, computed from the same calls with another seed: five models trained
by ``extrapolation.train_schemes`` (one per position scheme), read at longer lengths by ``length_table``, the RoPE
model stretched by ``stretch_table`` and read through windows and sinks by ``window_table``. One training per seed
(and kernel set) serves every claim.
"""

from __future__ import annotations

import functools

from attn_helpers import extrapolation
from claims import Claim


@functools.cache
def _trained(seed: int) -> extrapolation.Trained:
    return extrapolation.train_schemes(seed=seed)


@functools.cache
def _lengths(seed: int) -> dict[str, object]:
    accuracy = extrapolation.length_table(_trained(seed))
    trained_len = _trained(seed).trained_len
    return {"accuracy": accuracy, "kept": accuracy.div(accuracy[trained_len], axis="index"), "TRAINED": trained_len}


@functools.cache
def _stretched(seed: int) -> dict[str, object]:
    return {"stretched": extrapolation.stretch_table(_trained(seed)), "TRAINED": _trained(seed).trained_len}


@functools.cache
def _windows(seed: int) -> dict[str, object]:
    first, even = extrapolation.first_token_weight(_trained(seed))
    return {"reading": extrapolation.window_table(_trained(seed)), "first": first, "even": even,
            "TRAINED": _trained(seed).trained_len}


CLAIMS = [
    Claim(11, 'accuracy.loc[["learned", "sinusoidal", "rope"], TRAINED].min() > 0.9', _lengths),
    Claim(11, 'accuracy.loc["alibi", TRAINED] > 0.6', _lengths),
    Claim(11, 'accuracy.loc["none", TRAINED] < 0.3', _lengths),
    Claim(11, 'accuracy.loc["rope", 2 * TRAINED] > accuracy[2 * TRAINED].drop("rope").max()', _lengths),
    Claim(11, 'accuracy.loc["alibi", 4 * TRAINED] > accuracy[4 * TRAINED].drop("alibi").max()', _lengths),
    Claim(11, 'kept.loc["alibi", 4 * TRAINED] > kept[4 * TRAINED].drop("alibi").max()', _lengths),
    Claim(11, '(stretched.loc["RoPE as trained"] - stretched.loc[["interpolation", "YaRN as printed, β = 32"]].max())'
              '.min() > 0', _stretched),
    Claim(11, '(stretched.loc["NTK-aware"] - stretched.loc["RoPE as trained"]).min() > 0', _stretched),
    Claim(11, '(stretched.loc["YaRN as coded"] - stretched.loc["RoPE as trained"]).min() > 0', _stretched),
    Claim(11, 'stretched.loc["YaRN as coded", 4 * TRAINED] - stretched[4 * TRAINED].drop("YaRN as coded").max() > 0.1',
          _stretched),
    Claim(11, 'first.max() < 2 * even', _windows),
    Claim(11, 'reading.loc["window of 16", 2 * TRAINED] > reading.loc["full causal attention", 2 * TRAINED]',
          _windows),
    Claim(11, 'reading.loc["window of 16", 4 * TRAINED] < 0.4', _windows),
    Claim(11, 'reading.loc["+ 4 sinks, cache positions", 4 * TRAINED] - reading.loc["+ 4 sinks, text positions", '
              '4 * TRAINED] > 0.1', _windows),
    Claim(11, 'reading.loc["window of 16", 4 * TRAINED] - reading.loc["+ 4 sinks, cache positions", 4 * TRAINED]'
              ' < 0.05', _windows),
]
