"""Depth without help (chapter 8): stacked self-attention collapses every token to one vector.

Dong et al. (2021) showed that pure self-attention, layer after layer, drives the output towards a
matrix whose rows are all equal ("rank collapse"), doubly exponentially fast. In this parameter-free
toy, a residual connection with LayerNorm slows the collapse to about 1/L after L layers; it does not
stop it. ``collapse_residual`` measures the distance to that collapsed matrix, ``attention_layers``
applies plain attention (chapter 3's ``softmax(XXᵀ/√d) X``) layer after layer, and ``stack_attention``
records the distance after every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from .attention import attention
from .training import torch_threads
from .validate import as_float_tensor, integer

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = ["collapse_residual", "attention_layers", "stack_attention", "plot_collapse"]


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


def attention_layers(
    X: torch.Tensor, layers: int, residual: bool = False, layer_norm: bool = False
) -> list[torch.Tensor]:
    """``X`` ``(t, d)`` before the first layer and after each of ``layers`` layers of plain self-attention:
    ``layers + 1`` tensors ``(t, d)`` in float64 (chapter 8).

    Each layer computes ``A(Z) = softmax(ZZᵀ/√d) Z`` with ``Z = LayerNorm(X)`` if ``layer_norm`` else
    ``Z = X``, and the new ``X`` is ``X + A(Z)`` if ``residual`` else ``A(Z)`` (the pre-LayerNorm
    arrangement). Float64, so the collapse can be followed down to round-off; one thread, which for
    matrices this small is also the fastest.
    """
    X = as_float_tensor(X, "X", min_dim=2).detach().double()
    if X.dim() != 2:
        raise ValueError(f"attention_layers takes one sequence of shape (t, d); got {tuple(X.shape)}.")
    layers = integer(layers, "layers", minimum=1)
    states = [X]
    with torch_threads():
        for _ in range(layers):
            Z = F.layer_norm(X, X.shape[-1:]) if layer_norm else X  # (t, d)
            A, _ = attention(Z, Z, Z)  # (t, d)
            X = X + A if residual else A
            states.append(X)
    return states


def stack_attention(X: torch.Tensor, layers: int, residual: bool = False, layer_norm: bool = False) -> list[float]:
    """The collapse residual of ``X`` ``(t, d)`` before the first layer and after each of ``layers`` layers
    of ``attention_layers`` (same arguments): ``layers + 1`` numbers (chapter 8)."""
    return [collapse_residual(state) for state in attention_layers(X, layers, residual, layer_norm)]


def plot_collapse(curves: dict[str, list[float]], title: str, ax: plt.Axes | None = None,
                  log_depth: bool = False) -> plt.Axes:
    """Collapse residual against depth, log scale, one line per ``{label: residuals}`` (chapter 8).

    ``residuals[L]`` is the value after L layers. With ``log_depth`` the depth axis is logarithmic too,
    from layer 1 (a power law such as 1/L is then a straight line).
    """
    import matplotlib.pyplot as plt

    if not curves:
        raise ValueError("curves is empty: give at least one {label: residuals} entry.")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 3.6))
    styles = ["o-", "s--", "^-", "v--", "d-", "x--"]
    first = 1 if log_depth else 0
    for (label, values), style in zip(curves.items(), styles * 2, strict=False):
        if len(values) <= first:
            raise ValueError(f"curve {label!r} has no value after layer {first}.")
        markers = None if len(values) <= 30 else 0.05  # long lines: markers evenly spaced on the screen
        ax.plot(range(first, len(values)), values[first:], style, label=label, linewidth=1.6, markersize=4,
                markevery=markers)
    ax.set_yscale("log")
    if log_depth:
        ax.set_xscale("log")
    ax.set_xlabel("number of attention layers" + (" (log)" if log_depth else ""))
    ax.set_ylabel("distance to equal rows (log)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9)
    return ax
