"""Word order for attention (chapter 8): sinusoidal encodings, rotary embeddings (RoPE), and a test of
permutation equivariance.

Attention by itself treats its input as a set: permuting the tokens only permutes the outputs.
Absolute encodings (learned or sinusoidal) are *added* to the token vectors; rotary embeddings
*rotate* each query and key by an angle proportional to its position, so that the score of a query
at position m for a key at position n depends on n - m only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from . import validate
from .validate import as_float_tensor

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = ["frequencies", "sinusoidal_encoding", "rope", "is_permutation_equivariant", "plot_score_by_offset"]


def _check_base(base: float) -> float:
    return validate.real(base, "base", above=1.0, why="the papers use 10000")


def frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """The d/2 angular frequencies ``θ_i = base^(-2i/d)``, i = 0 … d/2 - 1, shape ``(d/2,)`` (chapter 8)."""
    d = validate.even_int(d, "d")
    base = _check_base(base)
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)


def sinusoidal_encoding(t: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s sinusoidal position encodings, shape ``(t, d)`` (chapter 8).

    Row p holds ``sin(p θ_i)`` in column 2i and ``cos(p θ_i)`` in column 2i+1, with
    ``θ_i = base^(-2i/d)``. They are added to the token vectors: ``X + sinusoidal_encoding(t, d)``.
    """
    t = validate.integer(t, "t", minimum=1)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * frequencies(d, base)  # (t, d/2)
    pe = torch.empty(t, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(torch.get_default_dtype())


def _positions(positions: torch.Tensor | Sequence[int] | None, t: int) -> torch.Tensor:
    if positions is None:
        return torch.arange(t, dtype=torch.float64)
    p = torch.as_tensor(positions)
    if torch.is_complex(p) or p.dtype == torch.bool:
        raise TypeError(f"positions must be real numbers, one per token; got dtype {p.dtype}.")
    if p.dim() != 1 or len(p) != t:
        raise ValueError(
            f"positions must be a 1-D sequence of t={t} numbers, one per token; got "
            f"{tuple(p.shape)} of dtype {p.dtype}. For the usual 0, 1, …, t-1 leave it out."
        )
    return p.to(torch.float64)


def rope(x: torch.Tensor, positions: torch.Tensor | Sequence[int] | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (RoPE, Su et al.) of queries or keys (chapter 8).

    ``x`` has shape ``(..., t, d)`` with d even; ``positions`` (default ``0 … t-1``) gives each of the
    t rows its position p. Features 2i and 2i+1 of row p are rotated together by the angle
    ``p θ_i``, ``θ_i = base^(-2i/d)``. Returns a tensor of the same shape and dtype. Apply it to the
    queries and the keys (not the values): then ``rope(q, [m]) · rope(k, [n])`` depends on n - m only.
    """
    x = as_float_tensor(x, "x", min_dim=2)
    t, d = x.shape[-2], validate.even_int(x.shape[-1], "d, the last dimension of x")
    angles = _positions(positions, t)[:, None] * frequencies(d, base)  # (t, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., t, d/2): the two coordinates of each pair
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def is_permutation_equivariant(
    fn: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, generator: torch.Generator | None = None,
    trials: int = 3, atol: float = 1e-5,
) -> bool:
    """True if ``fn(X[perm])`` equals ``fn(X)[perm]`` for ``trials`` random permutations of the rows (chapter 8).

    ``fn`` maps a ``(t, d)`` sequence to a ``(t, d_out)`` one. A function that mixes tokens only by
    attention, without positions, passes; one that knows the positions fails.
    """
    X = as_float_tensor(X, "X", min_dim=2)
    if X.dim() != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be one sequence of shape (t, d) with t >= 2, got {tuple(X.shape)}.")
    trials = validate.integer(trials, "trials", minimum=1)
    Y = fn(X)
    if not isinstance(Y, torch.Tensor):
        raise TypeError(f"fn must return a tensor, got {type(Y).__name__}. If it returns (outputs, weights), wrap "
                        f"it: lambda X: f(X)[0].")
    if Y.shape[:1] != X.shape[:1]:
        raise ValueError(
            f"fn must return a tensor with one row per token, shape (t, ...) with t={X.shape[0]}; "
            f"got {getattr(Y, 'shape', type(Y).__name__)}. If it returns (outputs, weights), wrap it: "
            f"lambda X: f(X)[0]."
        )
    for _ in range(trials):
        perm = torch.randperm(X.shape[0], generator=generator)
        if not torch.allclose(fn(X[perm]), Y[perm], atol=atol):
            return False
    return True


def plot_score_by_offset(
    offsets: torch.Tensor, curves: dict[str, torch.Tensor], title: str, ax: plt.Axes | None = None,
) -> plt.Axes:
    """Line plot of attention scores against the offset n - m between key and query (chapter 8).

    ``curves`` maps a legend label to a tensor of scores, one per offset. Returns the Axes.
    """
    import matplotlib.pyplot as plt

    offsets = torch.as_tensor(offsets)
    if not curves:
        raise ValueError("curves is empty: give at least one {label: scores} entry.")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 3.2))
    for (label, scores), style in zip(curves.items(), ["-", "--", ":", "-."] * 3, strict=False):
        scores = torch.as_tensor(scores)
        if scores.shape != offsets.shape:
            raise ValueError(f"curve {label!r} has shape {tuple(scores.shape)}; it needs one score per offset "
                             f"{tuple(offsets.shape)}.")
        ax.plot(offsets.numpy(), scores.detach().double().numpy(), style, label=label, linewidth=1.8)
    ax.set_xlabel("offset n − m (key position minus query position)")
    ax.set_ylabel("score q·k")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9)
    return ax
