"""Depth without help (chapter 8): stacked self-attention collapses every token to one vector.

Dong et al. (2021) showed that pure self-attention, layer after layer, drives the output towards a
matrix whose rows are all equal ("rank collapse"), doubly exponentially fast; a residual connection
stops it. ``collapse_residual`` measures the distance to that collapsed matrix, ``stack_attention``
applies plain attention (chapter 3's ``softmax(XXᵀ/√d) X``) layer after layer and records it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from .attention import attention
from .validate import as_float_tensor, positive_int

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = ["collapse_residual", "stack_attention", "plot_collapse"]


def collapse_residual(X: torch.Tensor) -> float:
    """``‖X − 1 x̄ᵀ‖_F / ‖X‖_F`` for a ``(t, d)`` sequence, x̄ its mean row (chapter 8).

    0 when every row (token) is the same vector; 1 when the rows average to zero. ``1 x̄ᵀ`` is the
    closest matrix with equal rows, so this is the relative distance to it (Dong et al.'s residual).
    """
    X = as_float_tensor(X, "X", min_dim=2).detach().double()
    if X.dim() != 2:
        raise ValueError(f"collapse_residual measures one sequence of shape (t, d); got {tuple(X.shape)}.")
    norm = X.norm()
    if norm == 0:
        raise ValueError("X is all zeros: the relative distance is undefined.")
    return float((X - X.mean(dim=0, keepdim=True)).norm() / norm)


def stack_attention(X: torch.Tensor, layers: int, residual: bool = False, layer_norm: bool = False) -> list[float]:
    """Apply plain self-attention ``layers`` times to ``X`` ``(t, d)`` and return the collapse residual
    before the first layer and after each one, ``layers + 1`` numbers (chapter 8).

    Each layer computes ``A(Z) = softmax(ZZᵀ/√d) Z`` with ``Z = LayerNorm(X)`` if ``layer_norm`` else
    ``Z = X``, and the new ``X`` is ``X + A(Z)`` if ``residual`` else ``A(Z)`` (the pre-LayerNorm
    arrangement). Computed in float64, so the collapse can be followed down to round-off.
    """
    X = as_float_tensor(X, "X", min_dim=2).detach().double()
    if X.dim() != 2:
        raise ValueError(f"stack_attention takes one sequence of shape (t, d); got {tuple(X.shape)}.")
    layers = positive_int(layers, "layers")
    residuals = [collapse_residual(X)]
    for _ in range(layers):
        Z = F.layer_norm(X, X.shape[-1:]) if layer_norm else X  # (t, d)
        A, _ = attention(Z, Z, Z)  # (t, d)
        X = X + A if residual else A
        residuals.append(collapse_residual(X))
    return residuals


def plot_collapse(curves: dict[str, list[float]], title: str, ax: plt.Axes | None = None) -> plt.Axes:
    """Collapse residual against depth, log scale, one line per ``{label: residuals}`` (chapter 8)."""
    import matplotlib.pyplot as plt

    if not curves:
        raise ValueError("curves is empty: give at least one {label: residuals} entry.")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 3.6))
    styles = ["o-", "s--", "^-", "v--", "d-", "x--"]
    for (label, values), style in zip(curves.items(), styles * 2, strict=False):
        if len(values) == 0:
            raise ValueError(f"curve {label!r} is empty.")
        ax.plot(range(len(values)), values, style, label=label, linewidth=1.6, markersize=4)
    ax.set_yscale("log")
    ax.set_xlabel("number of attention layers")
    ax.set_ylabel("distance to equal rows (log)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9)
    return ax
