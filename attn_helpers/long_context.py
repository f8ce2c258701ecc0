"""Positions past the trained length (chapter 11): RoPE's two layouts, ALiBi, and stretching RoPE's frequencies.

RoPE rotates pairs of features. RoFormer, GPT-J and Meta's LLaMA code pair neighbours ``(2i, 2i+1)``
(``ah.position.rope``); GPT-NeoX and Hugging Face's port of LLaMA pair the two halves ``(i, i + d/2)``
(:func:`rope_halves`), so converting Meta's checkpoints reorders rows of W_Q and W_K. The two are one rotation
seen through a permutation of the features (:func:`halves_order`). ALiBi adds ``-m_h · distance`` to
the scores of head h (:func:`alibi_bias`). Position interpolation, NTK-aware scaling and YaRN change
RoPE's frequencies ``θ_i`` so that a model trained on L tokens can read s · L.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from . import validate
from .masks import causal_mask
from .position import frequencies

__all__ = [
    "halves_order",
    "rope_halves",
    "rope_with_frequencies",
    "alibi_slopes",
    "alibi_bias",
    "interpolation",
    "ntk_aware",
    "yarn",
    "yarn_attention_factor",
]


def halves_order(d: int) -> torch.Tensor:
    """The feature order that turns the interleaved layout into the halves layout, shape ``(d,)`` (chapter 11).

    ``x[..., halves_order(d)]`` puts features 0, 2, 4, … first and 1, 3, 5, … second, so that the
    interleaved pair ``(2i, 2i+1)`` becomes the halves pair ``(i, i + d/2)``.
    """
    d = validate.even_int(d, "d")
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # (d,)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)  # (..., t, d/2) each
    return torch.cat([-x2, x1], dim=-1)  # (..., t, d)


def rope_halves(x: torch.Tensor, positions: torch.Tensor | Sequence[int] | None = None,
                base: float = 10000.0) -> torch.Tensor:
    """RoPE in the halves layout of GPT-NeoX and Hugging Face's LLaMA: feature i turns with feature i + d/2
    (chapter 11). Meta's own LLaMA code is interleaved, as ``ah.position.rope``.

    ``x`` ``(..., t, d)``, ``positions`` ``(t,)`` (default ``0 … t-1``). The pair ``(i, i + d/2)`` of row p is
    rotated by ``p θ_i``, ``θ_i = base^(-2i/d)``: ``x cos + rotate_half(x) sin``. Same shape and dtype as ``x``.
    """
    angles = _angles(x, positions, frequencies(validate.even_int(x.shape[-1], "d"), base))  # (t, d/2)
    cos = torch.cos(angles).repeat(1, 2).to(x.dtype)  # (t, d): the angle of pair i, twice
    sin = torch.sin(angles).repeat(1, 2).to(x.dtype)
    return x * cos + _rotate_half(x) * sin


def rope_with_frequencies(x: torch.Tensor, theta: torch.Tensor,
                          positions: torch.Tensor | Sequence[int] | None = None) -> torch.Tensor:
    """Interleaved RoPE with the frequencies ``theta`` ``(d/2,)`` given, e.g. stretched ones (chapter 11).

    ``x`` ``(..., t, d)``. With ``theta = ah.position.frequencies(d)`` it is ``ah.position.rope(x, positions)``.
    """
    angles = _angles(x, positions, theta)  # (t, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., t, d/2): the two coordinates of each pair
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)  # (..., t, d)


def _angles(x: torch.Tensor, positions: torch.Tensor | Sequence[int] | None, theta: torch.Tensor) -> torch.Tensor:
    """``p θ_i`` for every row p of ``x`` and pair i, ``(t, d/2)``, after checking the inputs."""
    t, d = _rope_inputs(x, positions, theta)
    p = torch.arange(t, dtype=torch.float64) if positions is None else torch.as_tensor(positions).double()
    return p[:, None] * theta.double()  # (t, d/2)


def _rope_inputs(x: object, positions: object, theta: object) -> tuple[int, int]:
    """The checks of RoPE with given frequencies: ``x`` ``(..., t, d)``, positions ``(t,)`` or None, theta ``(d/2,)``.

    Returns ``(t, d)`` (chapter 11).
    """
    validate.as_float_tensor(x, "x", min_dim=2)
    t, d = x.shape[-2], validate.even_int(x.shape[-1], "the last dimension of x")
    if not isinstance(theta, torch.Tensor) or not torch.is_floating_point(theta):
        raise TypeError(f"theta must be a float tensor of d/2 = {d // 2} frequencies, one per pair of features, "
                        f"got {getattr(theta, 'dtype', type(theta).__name__)}.")
    if theta.shape != (d // 2,):
        raise ValueError(f"theta must hold d/2 = {d // 2} frequencies, one per pair of features, got shape "
                         f"{tuple(theta.shape)}.")
    if positions is not None:
        p = torch.as_tensor(positions)
        if p.dtype == torch.bool or torch.is_complex(p):
            raise TypeError(f"positions must be numbers, one per row of x, got dtype {p.dtype}.")
        if p.shape != (t,):
            raise ValueError(f"positions must hold t = {t} numbers, one per row of x, got shape {tuple(p.shape)}. "
                             f"For 0, 1, …, t-1 leave it out.")
    return t, d


def alibi_slopes(h: int) -> torch.Tensor:
    """ALiBi's slope ``m`` of each of ``h`` heads, ``(h,)`` (chapter 11; Press et al., 2022).

    For h a power of 2 the slopes are ``2^(-8/h), 2^(-16/h), …, 2^(-8)``: a geometric sequence from
    ``2^(-8/h)`` down to ``1/256``. Otherwise the paper takes the slopes of the power of two n just below h
    and adds every other slope of 2n.
    """
    h = validate.integer(h, "h", minimum=1)
    n = 2 ** math.floor(math.log2(h))
    slopes = 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)  # (n,)
    extra = 2.0 ** (-8.0 * torch.arange(1, 2 * n + 1, 2, dtype=torch.float64) / (2 * n))  # every other slope of 2n
    return torch.cat([slopes, extra[: h - n]]).float()  # (h,)


def alibi_bias(h: int, t_q: int, t_k: int | None = None) -> torch.Tensor:
    """ALiBi as an additive float mask ``(h, t_q, t_k)`` for causal attention (chapter 11).

    Entry ``(head, i, j)`` is ``-m_head · (p_i - j)`` for a key at or before the query's position
    ``p_i = t_k - t_q + i`` (the queries are the last ``t_q`` positions, as in ``ah.causal_mask``), and
    ``-inf`` after it. Add it to the scores, or pass it as ``attn_mask`` to ``scaled_dot_product_attention``.
    """
    allowed = causal_mask(t_q, t_k)  # (t_q, t_k), checks the sizes
    t_q, t_k = allowed.shape
    distance = torch.arange(t_k - t_q, t_k)[:, None] - torch.arange(t_k)  # (t_q, t_k): p_i - j
    bias = alibi_slopes(h)[:, None, None] * -distance  # (h, t_q, t_k); -distance, so that 0 stays +0
    return bias.masked_fill(~allowed, -math.inf)


def _stretch(s: object) -> float:
    """The factor ``s`` as a float after checking it is at least 1: how many times longer than trained."""
    return validate.real(s, "s", at_least=1, why="the new length over the trained one, e.g. 4 for 4 times longer")


def interpolation(theta: torch.Tensor, s: float) -> torch.Tensor:
    """Position interpolation (Chen et al., 2023): ``θ_i / s``, so position s·p turns as far as p did (chapter 11)."""
    return theta / _stretch(s)  # (d/2,)


def ntk_aware(d: int, s: float, base: float = 10000.0) -> torch.Tensor:
    """NTK-aware scaling: RoPE's frequencies with the base raised to ``base · s^(d/(d-2))``, ``(d/2,)`` (chapter 11).

    The highest frequency ``θ_0 = 1`` is unchanged and the lowest, ``θ_{d/2-1}``, is divided by s. It needs
    at least two pairs (``d >= 4``): with one, the fastest pair is also the slowest.
    """
    s = _stretch(s)
    if validate.even_int(d, "d") < 4:
        raise ValueError(f"d must be at least 4 for NTK-aware scaling, got {d}: it keeps the fastest pair and divides "
                         f"the slowest by s, and with d = 2 there is one pair, both at once. Use position "
                         f"interpolation (long_context.interpolation) for a single pair.")
    return frequencies(d, base * s ** (d / (d - 2)))  # (d/2,)


def yarn(d: int, s: float, trained_len: int, base: float = 10000.0, alpha: float = 1.0,
         beta: float = 32.0, rounded: bool = False) -> torch.Tensor:
    """YaRN's frequencies (Peng et al., 2023), ``(d/2,)`` (chapter 11).

    ``r_i = L θ_i / 2π`` counts the turns pair i makes over the trained length L. Pairs with
    ``r_i > β`` keep ``θ_i``, pairs with ``r_i < α`` are interpolated, ``θ_i / s``, and in between the ramp
    ``γ_i = (r_i - α) / (β - α)`` mixes the two: ``(1 - γ_i) θ_i / s + γ_i θ_i``. The defaults α = 1, β = 32
    are the paper's for LLaMA. The bounds count turns, so on a model with a short L no pair may reach β, and
    the formula as printed then interpolates even the fastest pair nearly as much as the others.

    ``rounded=True`` computes it as the authors' code (and the libraries that copy it) does: the pair indices
    where ``r = β`` and ``r = α`` are rounded outward (down and up), the first clipped at 0 and the second at
    ``d - 1`` (that code's limit, past the last pair), and the ramp runs linearly over pair indices between
    them; when the two indices coincide, the upper one moves up by 0.001, the code's guard against a ramp of
    zero width. Then a β that no pair reaches still keeps the fastest pair whenever it turns more than α times
    (chapter 11's model, ``d = 8``, ``L = 16``: the printed formula with β = 2).
    """
    s = _stretch(s)
    alpha = validate.real(alpha, "alpha", above=0, why="the turns below which a pair is interpolated")
    beta = validate.real(beta, "beta", above=alpha, why="the turns above which a pair is kept")
    theta = frequencies(d, base)  # (d/2,)
    trained_len = validate.integer(trained_len, "trained_len", minimum=1)
    if rounded:
        def pair_at(r: float) -> float:  # the pair index i (not rounded) at which r_i = r
            return d * math.log(trained_len / (2 * math.pi * r)) / (2 * math.log(base))

        low, high = max(math.floor(pair_at(beta)), 0), min(math.ceil(pair_at(alpha)), d - 1)
        high = high + 0.001 if high == low else high  # the authors' guard against a ramp of zero width
        gamma = 1 - ((torch.arange(d // 2, dtype=theta.dtype) - low) / (high - low)).clamp(0.0, 1.0)
    else:
        turns = trained_len * theta / (2 * math.pi)  # r_i
        gamma = ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0)  # (d/2,): 0 = interpolate, 1 = keep
    return (1 - gamma) * theta / s + gamma * theta


def yarn_attention_factor(s: float) -> float:
    """YaRN's factor ``0.1 ln s + 1`` (chapter 11). It multiplies the queries *and* the keys (in practice
    RoPE's cos and sin), so the scores are multiplied by its square."""
    return 0.1 * math.log(_stretch(s)) + 1.0
