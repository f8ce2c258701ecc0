"""How a tensor sits in memory: shape, strides, and the order in which its elements are read (chapter 5).

It holds ``layout`` (one line with a tensor's shape, strides and contiguity), ``storage_size``,
``reading_order`` and ``plot_memory_layout``, the figure of a tensor's memory as a strip of cells (at most
``MAX_CELLS``), which chapter 5 draws at each step of splitting heads with view, transpose and contiguous.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import torch

__all__ = ["MAX_CELLS", "layout", "storage_size", "reading_order", "plot_memory_layout"]

MAX_CELLS = 48  # beyond this the memory strip is unreadable


def layout(t: torch.Tensor) -> str:
    """One line with the shape, the strides and whether ``t`` is contiguous, to print each reshaping step
    (chapter 5)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"layout takes a torch.Tensor, got {type(t).__name__}.")
    state = "contiguous" if t.is_contiguous() else "NOT contiguous"
    return f"shape {tuple(t.shape)}  stride {t.stride()}  {state}"


def storage_size(t: torch.Tensor) -> int:
    """Number of elements in the memory block (storage) that ``t`` is a view of (chapter 5)."""
    return t.untyped_storage().nbytes() // t.element_size()


def reading_order(t: torch.Tensor) -> torch.Tensor:
    """Memory offsets of ``t``'s elements in the order Python reads them (row-major), ``(t.numel(),)`` (chapter 5).

    A contiguous tensor gives ``storage_offset, storage_offset + 1, …``; a transposed one jumps.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"reading_order takes a torch.Tensor, got {type(t).__name__}.")
    offsets = torch.arange(storage_size(t))
    return offsets.as_strided(t.shape, t.stride(), t.storage_offset()).flatten()


def plot_memory_layout(tensors: Mapping[str, torch.Tensor], title: str = "Memory layout") -> plt.Figure:
    """One row per named tensor: its elements as a grid (left) and its memory block (right) (chapter 5).

    The grid shows the tensor as Python indexes it, flattened to ``(rows, last dimension)``;
    the strip shows the memory block in address order, coloured like the grid. Under each memory
    cell, "read #" says when the tensor reads it; arrows above show the first row of reads and
    (red) the jump to the next row: steps of 1 for a contiguous tensor, of the stride after a
    ``transpose``. Returns the Figure.
    """
    if not isinstance(tensors, Mapping):
        raise TypeError(f"plot_memory_layout takes a dict {{name: tensor}}, got {type(tensors).__name__}.")
    if not tensors:
        raise ValueError("plot_memory_layout takes a non-empty dict {name: tensor}.")
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name!r} must be a tensor, got {type(t).__name__}.")
        if t.dim() < 1:
            raise ValueError(f"{name!r} must be a tensor with at least one dimension.")
        if storage_size(t) > MAX_CELLS:
            raise ValueError(
                f"{name!r} lives in a memory block of {storage_size(t)} elements; the figure is readable "
                f"up to {MAX_CELLS}. Draw a smaller example, e.g. torch.arange(12.).view(3, 4)."
            )
    n = len(tensors)
    fig, axes = plt.subplots(n, 2, figsize=(7.4, 2.5 * n), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 2.6]})  # fits a 740 px column
    cmap = plt.get_cmap("viridis")
    for row, (name, t) in enumerate(tensors.items()):
        size = storage_size(t)
        memory = t.detach().as_strided((size,), (1,), 0).float()
        lo, hi = float(memory.min()), float(memory.max())

        def colour(v: float, lo: float = lo, hi: float = hi) -> tuple:
            return cmap(0.15 + 0.7 * (v - lo) / (hi - lo if hi > lo else 1.0))

        grid = t.detach().reshape(-1, t.shape[-1]).float()  # (rows, last dim), as Python reads it
        ax = axes[row, 0]
        for (i, j), v in ((ij, float(grid[ij])) for ij in ((i, j) for i in range(grid.shape[0])
                                                            for j in range(grid.shape[1]))):
            ax.add_patch(plt.Rectangle((j, -i - 1), 1, 1, facecolor=colour(v), edgecolor="white"))
            ax.text(j + 0.5, -i - 0.5, f"{v:g}", ha="center", va="center", color="white", fontsize=9)
        ax.set_xlim(0, grid.shape[1])
        ax.set_ylim(-grid.shape[0], 0)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("last dim →", fontsize=9)
        ax.set_ylabel("other dims", fontsize=9)
        ax.set_title(f"{name}\nshape {tuple(t.shape)}", fontsize=10)

        ax = axes[row, 1]
        for k in range(size):
            v = float(memory[k])
            ax.add_patch(plt.Rectangle((k, 0), 1, 1, facecolor=colour(v), edgecolor="white"))
            ax.text(k + 0.5, 0.5, f"{v:g}", ha="center", va="center", color="white", fontsize=9)
        order = reading_order(t).tolist()
        for step, offset in enumerate(order):
            ax.text(offset + 0.5, -0.45, f"{step + 1}", ha="center", va="center", fontsize=9, color="0.2")
        for step in range(min(len(order) - 1, t.shape[-1])):  # the first row, and the jump to the next
            a, b = order[step] + 0.5, order[step + 1] + 0.5
            ax.annotate("", xy=(b, 1.05), xytext=(a, 1.05), arrowprops={
                "arrowstyle": "->", "color": "crimson" if step == t.shape[-1] - 1 else "0.3",
                "connectionstyle": f"arc3,rad={(-1 if b > a else 1) * min(0.5, 2.4 / abs(b - a)):.2f}", "lw": 1.2})
        ax.text(-0.2, -0.45, "read #", ha="right", va="center", fontsize=9, color="0.2")
        ax.set_xlim(0, size)
        ax.set_ylim(-0.9, 3.2)
        ax.set_yticks([])
        ax.set_xticks([k + 0.5 for k in range(size)], [str(k) for k in range(size)], fontsize=9)
        ax.set_xlabel("memory address (in elements)", fontsize=9)
        state = "contiguous" if t.is_contiguous() else "not contiguous"
        ax.set_title(f"memory: stride {t.stride()}, {state}", fontsize=10)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
