"""Chapter 10's tile walk as a static figure: a few steps one under the other, what the explorer shows at each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import validate
from ..flash import tiles
from ..masks import causal_mask
from ._tiles import GHOST, STATUS, tile_walk_view

__all__ = ["plot_tile_walk"]

#: The figure's width in inches and its smallest text in points: drawn 100 px an inch and shown in a phone's column
#: of about 340 px, its smallest text is about 9.6 px high there, and 12.5 px on a desktop, where it is shown whole.
WIDTH, SMALLEST = 4.6, 9


def _status(step: int, t_q: int, t_k: int, block_q: int, block_k: int, causal: bool) -> list[list[str]]:
    """Each score's colour after ``step`` tiles: its tile's status (``STATUS``)."""
    order = {(tile.rows.start, tile.cols.start): n for n, tile in
             enumerate(tiles(t_q, t_k, block_q, block_k, causal), start=1)}
    colour = [[STATUS["skipped"]] * t_k for _ in range(t_q)]
    for i in range(t_q):
        for j in range(t_k):
            n = order.get((i - i % block_q, j - j % block_k), 0)
            if n:
                colour[i][j] = STATUS["current" if n == step else "done" if n < step else "to come"]
    return colour


def plot_tile_walk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
                   steps: Sequence[int], causal: bool = False) -> Any:
    """Draw :func:`tile_walk_view` at a few ``steps``, one row each (chapter 10): on the left the score matrix in
    tiles (the tile just computed red, with its scores; blocked scores pale), on the right, beside each query's row,
    its ℓ after the step (a bar) and, for the tile's queries, before it (a dashed outline), with the factor
    ``exp(m_old - m_new)`` written after them. Drawn for a phone's column: its text is ``SMALLEST`` points or more.
    Returns the Figure."""
    import matplotlib.pyplot as plt  # only when a figure is drawn
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    steps = [validate.integer(s, "step", minimum=1) for s in steps]
    if not steps:
        raise ValueError("steps must name at least one step of the walk, such as [4, 5, 6].")
    views = [tile_walk_view(q, k, v, block_q, block_k, s, causal) for s in steps]  # checks the inputs and steps
    t_q, t_k = q.shape[0], k.shape[0]
    allowed = causal_mask(t_q, t_k) if causal else torch.ones(t_q, t_k, dtype=torch.bool)
    top = max(max(view["l"]) for view in views) * 1.7  # room for the factors after the longest bar
    small, label = SMALLEST, SMALLEST + 1
    fig, axes = plt.subplots(len(steps), 2, figsize=(WIDTH, 3.75 * len(steps)), width_ratios=[2.6, 1], squeeze=False,
                             sharey="row")
    for (grid, bars), step, view in zip(axes, steps, views, strict=True):
        colours = _status(step, t_q, t_k, block_q, block_k, causal)
        image = [[tuple(c if allowed[i, j] else 0.3 * c + 0.7 for c in to_rgb(colours[i][j])) for j in range(t_k)]
                 for i in range(t_q)]  # blocked scores pale
        grid.imshow(image, extent=(0, t_k, t_q, 0))
        tile = view["tile"]
        grid.add_patch(plt.Rectangle((tile.cols.start, tile.rows.start), tile.cols.stop - tile.cols.start,
                                     tile.rows.stop - tile.rows.start, fill=False, linewidth=2.5, edgecolor="black"))
        for a, row in enumerate(view["scores"]):
            for b, s in enumerate(row):
                grid.text(tile.cols.start + b + 0.5, tile.rows.start + a + 0.5, "−∞" if s == -float("inf") else
                          f"{s:.1f}".replace("-", "−"), ha="center", va="center", fontsize=small)
        grid.set_xticks(range(0, t_k + 1, block_k))
        grid.set_yticks(range(0, t_q + 1, block_q))
        grid.set_xlabel("key", fontsize=label)
        grid.set_ylabel("query", fontsize=label)
        grid.set_title(f"tile {step} of {view['tiles']}: queries {tile.rows.start}–{tile.rows.stop - 1},\n"
                       f"keys {tile.cols.start}–{tile.cols.stop - 1}", fontsize=label)
        # Beside each query's row of scores, its ℓ: a bar after the tile, a dashed outline before it.
        reached = [i for i in range(t_q) if view["reached"][i]]
        bars.barh([i + 0.5 for i in reached], [view["l"][i] for i in reached], color=STATUS["done"], height=0.7)
        before = view["before"]
        was = [i for i, factor in enumerate(view["factor"]) if factor is not None]  # the tile's queries, reached before
        bars.barh([i + 0.5 for i in was], [before["l"][i] for i in was], height=0.7, fill=False, edgecolor=GHOST,
                  linestyle="--", linewidth=1.5)
        for i, factor in enumerate(view["factor"]):
            if factor is not None:
                bars.annotate(f"×{factor:.2f}", (max(view["l"][i], before["l"][i]), i + 0.5), xytext=(3, 0),
                              textcoords="offset points", va="center", fontsize=small)
        bars.set_xlim(0, top)
        bars.set_xticks(range(0, int(top) + 1, 2))
        bars.set_xlabel("ℓ", fontsize=label)
        bars.set_title("ℓ of each\nquery", fontsize=label)
        bars.tick_params(labelleft=False)
        grid.tick_params(labelsize=small)
        bars.tick_params(labelsize=small)
    axes[-1][1].legend(handles=[Patch(color=STATUS["done"], label="after"),
                                Patch(fill=False, edgecolor=GHOST, linestyle="--", label="before")],
                       fontsize=small, loc="lower right", frameon=False, borderaxespad=0.2, handlelength=1.2)
    fig.tight_layout()
    return fig
