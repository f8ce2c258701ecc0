"""Chapter 11's trained claims: train short, test long; stretched RoPE; windows and sinks.

Each claim re-runs the chapter's experiment with another seed (five models of 700 steps on 16 tokens, tested at
16, 32 and 64 tokens) and returns the margin the chapter asserts, e.g. RoPE's accuracy at 2x minus the best
other scheme's. The runs of one seed are shared by all the claims (one training per seed and kernel set).
"""

from __future__ import annotations

import functools

import torch
from margins import Claim

from attn_helpers import extrapolation, long_context, position, sliding_window

TRAINED, VOCAB = 16, 64
LENGTHS = (TRAINED, 2 * TRAINED, 4 * TRAINED)


@functools.cache
def _models(seed: int) -> dict[str, extrapolation.PositionModel]:
    models = {}
    for scheme in extrapolation.SCHEMES:
        torch.manual_seed(seed)
        models[scheme] = extrapolation.PositionModel(scheme, vocab_size=VOCAB, max_len=TRAINED)
        extrapolation.train(models[scheme], seq_len=TRAINED, steps=700, seed=seed)
    return models


@functools.cache
def _table(seed: int) -> dict[str, dict[int, float]]:
    """Accuracy of each scheme at each length (learned: the trained length only), as the chapter's table."""
    models = _models(seed)
    return {scheme: {n: extrapolation.accuracy(model, n) for n in (LENGTHS[:1] if scheme == "learned" else LENGTHS)}
            for scheme, model in models.items()}


@functools.cache
def _stretched(seed: int) -> dict[str, dict[int, float]]:
    rope = _models(seed)["rope"]
    theta, d = position.frequencies(rope.d_k), rope.d_k
    rows = {}
    for s in (2, 4):
        n, factor = s * TRAINED, long_context.yarn_attention_factor(s)
        rows.setdefault("rope", {})[n] = extrapolation.accuracy(rope, n)
        rows.setdefault("pi", {})[n] = extrapolation.accuracy(rope, n, theta=long_context.interpolation(theta, s))
        rows.setdefault("ntk", {})[n] = extrapolation.accuracy(rope, n, theta=long_context.ntk_aware(d, s))
        rows.setdefault("yarn32", {})[n] = extrapolation.accuracy(rope, n, theta=long_context.yarn(d, s, TRAINED),
                                                                 factor=factor)
        yarn2 = long_context.yarn(d, s, TRAINED, beta=2)
        rows.setdefault("yarn2", {})[n] = extrapolation.accuracy(rope, n, theta=yarn2, factor=factor)
    return rows


@functools.cache
def _windows(seed: int) -> dict[str, float]:
    rope = _models(seed)["rope"]
    found = {}
    for n in (2 * TRAINED, 4 * TRAINED):
        found[f"full{n}"] = extrapolation.accuracy(rope, n)
        found[f"window{n}"] = extrapolation.accuracy(rope, n, allowed=sliding_window.window_mask(n, window=16))
        found[f"text{n}"] = extrapolation.accuracy(rope, n, allowed=sliding_window.window_mask(n, window=16, sinks=4))
        found[f"cache{n}"] = extrapolation.accuracy(rope, n, ring={"window": 16, "sinks": 4, "numbering": "cache"})
    return found


def _best_at(seed: int, n: int, scheme: str) -> float:
    """`scheme`'s accuracy at n tokens minus the best other scheme's."""
    at_n = {s: row[n] for s, row in _table(seed).items() if n in row}
    return at_n[scheme] - max(v for s, v in at_n.items() if s != scheme)


def _keep(seed: int, scheme: str) -> float:
    return _table(seed)[scheme][4 * TRAINED] / _table(seed)[scheme][TRAINED]


def _first_token_share(seed: int) -> float:
    """The largest average weight a head gives position 0, over an even spread's."""
    from attn_helpers.circuits import induction_batch

    tokens, _ = induction_batch(200, VOCAB, TRAINED, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        _, weights = _models(seed)["rope"](tokens)
    first = torch.stack([w[:, :, 4:, 0].mean(dim=(0, 2)) for w in weights])  # (layers, h)
    even = (1 / torch.arange(5, TRAINED + 1)).mean()
    return float(first.max() / even)


def _stretch_margin(seed: int, better: str, worse: tuple[str, ...]) -> float:
    rows = _stretched(seed)
    return min(rows[better][n] - max(rows[w][n] for w in worse) for n in (2 * TRAINED, 4 * TRAINED))


CLAIMS = [
    Claim(11, "learned, sinusoidal and RoPE at 16 tokens: the lowest > 0.90",
          lambda seed: min(_table(seed)[s][TRAINED] for s in ("learned", "sinusoidal", "rope")), low=0.90),
    Claim(11, "ALiBi at 16 tokens > 0.60", lambda seed: _table(seed)["alibi"][TRAINED], low=0.60),
    Claim(11, "no positions at 16 tokens < 0.30", lambda seed: _table(seed)["none"][TRAINED], high=0.30),
    Claim(11, "RoPE at 2x minus the best other scheme > 0", lambda seed: _best_at(seed, 2 * TRAINED, "rope"), low=0.0),
    Claim(11, "ALiBi at 4x minus the best other scheme > 0", lambda seed: _best_at(seed, 4 * TRAINED, "alibi"),
          low=0.0),
    Claim(11, "ALiBi's share kept at 4x minus the best other's > 0",
          lambda seed: _keep(seed, "alibi") - max(_keep(seed, s) for s in ("sinusoidal", "rope", "none")), low=0.0),
    Claim(11, "NTK-aware minus RoPE as trained, at 2x and 4x > 0",
          lambda seed: _stretch_margin(seed, "ntk", ("rope",)), low=0.0),
    Claim(11, "RoPE as trained minus interpolation and YaRN as printed (beta = 32), at 2x and 4x > 0",
          lambda seed: _stretch_margin(seed, "rope", ("pi", "yarn32")), low=0.0),
    Claim(11, "YaRN as coded (= printed with beta = 2) minus RoPE as trained, at 2x and 4x > 0",
          lambda seed: _stretch_margin(seed, "yarn2", ("rope",)), low=0.0),
    Claim(11, "YaRN as coded (= printed with beta = 2) minus the best other stretched row, at 4x > 0.10",
          lambda seed: _stretched(seed)["yarn2"][4 * TRAINED]
          - max(_stretched(seed)[w][4 * TRAINED] for w in ("rope", "pi", "ntk", "yarn32")), low=0.10),
    Claim(11, "window of 16 minus full attention at 2x > 0",
          lambda seed: _windows(seed)["window32"] - _windows(seed)["full32"], low=0.0),
    Claim(11, "window of 16 at 4x < 0.40", lambda seed: _windows(seed)["window64"], high=0.40),
    Claim(11, "4 sinks at cache positions minus 4 sinks at text positions, at 4x > 0.10",
          lambda seed: _windows(seed)["cache64"] - _windows(seed)["text64"], low=0.10),
    Claim(11, "window of 16 minus 4 sinks at cache positions, at 4x < 0.05",
          lambda seed: _windows(seed)["window64"] - _windows(seed)["cache64"], high=0.05),
    Claim(11, "largest weight a head gives token 0, over an even spread's < 2",
          _first_token_share, high=2.0),
]
