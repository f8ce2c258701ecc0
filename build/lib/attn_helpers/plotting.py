"""Figures in one style: attention heatmaps with the tokens on both axes (chapter 1 onwards)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import seaborn as sns
import torch


def _as_matrix(weights: torch.Tensor) -> torch.Tensor:
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"weights must be a torch.Tensor, got {type(weights).__name__}.")
    w = weights.detach().cpu()
    while w.dim() > 2 and w.shape[0] == 1:
        w = w[0]
    if w.dim() != 2:
        raise ValueError(
            f"plot_attention draws one (t_q, t_k) matrix; got shape {tuple(weights.shape)}. "
            f"Pick one sequence and head first, e.g. weights[0, 0]."
        )
    return w.float()


def plot_attention(
    weights: torch.Tensor,
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
    ax: plt.Axes | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
) -> plt.Axes:
    """Heatmap of a ``(t_q, t_k)`` weight matrix: queries (``tokens``) down, keys across.

    ``key_tokens`` labels the columns when keys differ from queries. Weights are written
    in the cells to two decimals when ``annotate`` is true (default: when t_k ≤ 12).
    Returns the matplotlib Axes.
    """
    w = _as_matrix(weights)
    key_tokens = tokens if key_tokens is None else key_tokens
    if len(tokens) != w.shape[0] or len(key_tokens) != w.shape[1]:
        raise ValueError(
            f"{len(tokens)} query labels and {len(key_tokens)} key labels for a weight matrix of "
            f"shape {tuple(w.shape)}; give one label per row and per column."
        )
    if annotate is None:
        annotate = w.shape[1] <= 12
    if ax is None:
        size = max(3.5, 0.55 * w.shape[1] + 1.5)
        _, ax = plt.subplots(figsize=(size + 1.0, max(3.0, 0.5 * w.shape[0] + 1.2)))
    sns.heatmap(
        w.numpy(), ax=ax, cmap=cmap, vmin=0.0 if w.min() >= 0 else None,
        annot=annotate, fmt=".2f", annot_kws={"fontsize": 8}, square=True,
        xticklabels=list(key_tokens), yticklabels=list(tokens), cbar_kws={"shrink": 0.8},
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def plot_heads(
    weights: torch.Tensor, tokens: Sequence[str], title: str = "Attention per head", ncols: int = 4
) -> plt.Figure:
    """Grid of heatmaps, one per head, for weights of shape ``(h, t, t)`` (chapter 5). Returns the Figure."""
    if not isinstance(weights, torch.Tensor) or weights.dim() != 3:
        raise ValueError(f"plot_heads takes weights of shape (h, t, t); got {getattr(weights, 'shape', weights)}.")
    h = weights.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.4 * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i < h:
            plot_attention(weights[i], tokens, title=f"head {i}", ax=ax, annotate=False)
            ax.set_xlabel("")
            ax.set_ylabel("")
        else:
            ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
