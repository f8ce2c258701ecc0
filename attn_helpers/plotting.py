"""Figures in one style: attention heatmaps with the tokens on both axes (chapter 1 onwards)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import seaborn as sns
import torch

from . import validate

__all__ = ["plot_attention", "plot_heads"]


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
    """Heatmap of a ``(t_q, t_k)`` weight matrix: queries (``tokens``) down, keys across (chapter 1).

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
        annot=annotate, fmt=".2f", annot_kws={"fontsize": 9}, square=True,
        xticklabels=list(key_tokens), yticklabels=list(tokens), cbar_kws={"shrink": 0.8},
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def plot_heads(
    weights: torch.Tensor,
    tokens: Sequence[str],
    title: str = "Attention per head",
    ncols: int = 2,
    titles: Sequence[str] | None = None,
    annotate: bool = False,
    cmap: str = "viridis",
) -> plt.Figure:
    """Grid of heatmaps, one per head, for weights of shape ``(h, t, t)`` (chapter 5). Returns the Figure.

    All panels share one colour scale, from 0 to the largest weight of any head, with one colour
    bar, so that equal colours mean equal weights in every panel. ``titles`` names the panels
    (default ``"head 0"``, ``"head 1"``, …). At most ``ncols`` panels per row (default 2, so that
    the figure fits a book column); weights are written in the cells when ``annotate`` is true.
    """
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"plot_heads takes weights, a tensor of shape (h, t, t); got {type(weights).__name__}.")
    if weights.dim() != 3:
        raise ValueError(f"plot_heads takes weights of shape (h, t, t); got {getattr(weights, 'shape', weights)}.")
    ncols = validate.integer(ncols, "ncols", minimum=1)
    w = weights.detach().cpu().float()
    h = w.shape[0]
    if len(tokens) != w.shape[1] or w.shape[1] != w.shape[2]:
        raise ValueError(
            f"{len(tokens)} token labels for weights of shape {tuple(w.shape)}; plot_heads draws "
            f"self-attention, (h, t, t), with one label per token."
        )
    titles = [f"head {i}" for i in range(h)] if titles is None else list(titles)
    if len(titles) != h:
        raise ValueError(f"{len(titles)} titles for {h} heads; give one title per head.")
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    panel = min(3.3, 6.4 / ncols)  # inches per panel: the whole figure stays within 7.4 in
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel * ncols + 1.0, panel * nrows + 0.6),
                             squeeze=False, layout="constrained")
    vmax = float(w.max()) if float(w.max()) > 0 else 1.0
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        sns.heatmap(
            w[i].numpy(), ax=ax, cmap=cmap, vmin=0.0, vmax=vmax, cbar=False, square=True,
            annot=annotate, fmt=".2f", annot_kws={"fontsize": 9},
            xticklabels=list(tokens), yticklabels=list(tokens),
        )
        ax.set_title(titles[i], fontsize=11)
        ax.tick_params(axis="x", labelrotation=90, labelsize=9)
        ax.tick_params(axis="y", labelrotation=0, labelsize=9)
    fig.colorbar(axes.flat[0].collections[0], ax=axes, shrink=0.8, label="attention weight")
    fig.supxlabel("key (attended to)", fontsize=10)
    fig.supylabel("query (attending)", fontsize=10)
    fig.suptitle(title, fontsize=12)
    return fig
