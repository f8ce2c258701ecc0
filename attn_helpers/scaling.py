"""Why attention divides by √d: the measurements and figures of chapter 2.

``dot_product_variance`` measures how the spread of q·k grows with the dimension d;
``softmax_jacobian``, ``entropy`` and ``saturation_curves`` measure what a saturated softmax
costs; ``plot_curves`` and ``plot_temperature`` draw the chapter's figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from . import validate
from .attention import softmax
from .validate import as_float_tensor

__all__ = [
    "dot_product_variance",
    "softmax_jacobian",
    "entropy",
    "saturation_curves",
    "plot_curves",
    "plot_temperature",
]


def _check_dims(dims: Sequence[int]) -> list[int]:
    if isinstance(dims, str) or not hasattr(dims, "__len__"):
        raise TypeError(f"dims must be a list of dimensions such as [2, 4, 8], got {dims!r}.")
    if len(dims) == 0:
        raise ValueError(f"dims must be a non-empty list of dimensions such as [2, 4, 8], got {dims!r}.")
    return [validate.integer(d, "every dimension in dims", minimum=1) for d in dims]


def dot_product_variance(
    dims: Sequence[int], n_samples: int = 4000, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Measured variance of q·k, and of q·k/√d, for random vectors with N(0, 1) components (chapter 2).

    For each d in ``dims`` draws ``n_samples`` independent pairs (q, k) of d-dimensional vectors
    (drawn in float32, computed in float64, seeded with ``seed``). Returns ``(raw, scaled)``,
    each of shape ``(len(dims),)``; theory says ``raw ≈ d`` and ``scaled ≈ 1``.
    """
    dims = _check_dims(dims)
    validate.integer(n_samples, "n_samples", minimum=2)
    gen = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for d in dims:
        q = torch.randn(n_samples, d, generator=gen).double()  # (n, d)
        k = torch.randn(n_samples, d, generator=gen).double()  # (n, d)
        scores = (q * k).sum(dim=-1)  # (n,): one dot product per pair
        raw.append(scores.var())
        scaled.append((scores / math.sqrt(d)).var())
    return torch.stack(raw), torch.stack(scaled)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """The Jacobian ∂w_i/∂s_j = w_i (δ_ij − w_j) of the softmax, from its output ``weights`` (chapter 2).

    Takes weights of shape ``(..., t)`` (each slice summing to 1) and returns ``(..., t, t)``.
    Every entry lies in [−1/4, 1/4]; all of them approach 0 when the softmax saturates.
    """
    w = as_float_tensor(weights, "weights")
    if (w < 0).any():
        raise ValueError("weights must be non-negative softmax outputs; did you pass the scores instead?")
    return torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)


def entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Entropy −Σ w log w (in nats) of attention weights along ``dim``, with 0 · log 0 = 0 (chapter 2).

    ``weights`` ``(..., t)`` must be non-negative and sum to 1 along ``dim``; returns ``(...)``.
    It is log t for uniform weights and 0 when all the weight sits on one key.
    """
    w = as_float_tensor(weights, "weights")
    dim = validate.integer(dim, "dim", minimum=-w.dim(), maximum=w.dim() - 1, why="a dimension of weights")
    if (w < 0).any():
        raise ValueError("weights must be non-negative; entropy needs softmax outputs, not scores.")
    sums = w.sum(dim=dim)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-3):
        raise ValueError(
            f"weights must sum to 1 along dim={dim} (found sums from {float(sums.min()):.4g} to "
            f"{float(sums.max()):.4g}). Apply a softmax first, or pass the dim the weights are normalised over."
        )
    terms = torch.where(w > 0, w * torch.log(torch.where(w > 0, w, torch.ones_like(w))), torch.zeros_like(w))
    return -terms.sum(dim=dim)


def saturation_curves(
    dims: Sequence[int], t: int = 16, n_trials: int = 500, seed: int = 0
) -> dict[str, torch.Tensor]:
    """How saturated the softmax of q·k is, with and without dividing by √d (chapter 2).

    For each d draws ``n_trials`` queries and ``t`` keys with N(0, 1) components and takes the
    median over the trials (a typical query) of the largest absolute entry of the softmax
    Jacobian and of the entropy of the weights. Returns a dict with keys ``max_grad_raw``,
    ``max_grad_scaled``, ``entropy_raw`` and ``entropy_scaled``, each of shape ``(len(dims),)``.
    """
    dims = _check_dims(dims)
    validate.integer(t, "t", minimum=2)
    validate.integer(n_trials, "n_trials", minimum=1)
    gen = torch.Generator().manual_seed(seed)
    names = ("max_grad_raw", "max_grad_scaled", "entropy_raw", "entropy_scaled")
    out: dict[str, list[torch.Tensor]] = {k: [] for k in names}
    for d in dims:
        q = torch.randn(n_trials, 1, d, generator=gen).double()  # (n, 1, d)
        k = torch.randn(n_trials, t, d, generator=gen).double()  # (n, t, d)
        scores = (q * k).sum(dim=-1)  # (n, t)
        for name, s in (("raw", scores), ("scaled", scores / math.sqrt(d))):
            w = softmax(s, dim=-1)  # (n, t)
            out[f"max_grad_{name}"].append(softmax_jacobian(w).abs().amax(dim=(-2, -1)).median())
            out[f"entropy_{name}"].append(entropy(w).median())
    return {k: torch.stack(v) for k, v in out.items()}


def plot_curves(
    x: Sequence[float],
    curves: Mapping[str, Sequence[float] | torch.Tensor],
    xlabel: str,
    ylabel: str,
    title: str,
    ax: plt.Axes | None = None,
    logx: bool = True,
    logy: bool = False,
    dashed: Sequence[str] = (),
) -> plt.Axes:
    """Line plot of one or more curves against ``x`` (for example against d), one label each (chapter 2).

    ``curves`` maps a legend label to ``len(x)`` values; labels listed in ``dashed`` are drawn as
    dashed lines without markers (use it for predictions). ``logx`` uses a base-2 x axis.
    Returns the matplotlib Axes.
    """
    if len(curves) == 0:
        raise ValueError("curves is empty: pass a dict such as {'measured': values}.")
    for label, values in curves.items():
        if len(values) != len(x):
            raise ValueError(f"curve {label!r} has {len(values)} values but x has {len(x)}; give one value per x.")
    unknown = set(dashed) - set(curves)
    if unknown:
        raise ValueError(f"dashed names {sorted(unknown)}, which are not labels in curves ({list(curves)}).")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 4.0))
    for label, values in curves.items():
        ys = values.detach().cpu().tolist() if isinstance(values, torch.Tensor) else list(values)
        style = {"linestyle": "--", "color": "grey"} if label in dashed else {"marker": "o"}
        ax.plot(list(x), ys, label=label, **style)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax


def plot_temperature(
    scores: torch.Tensor,
    temperatures: Sequence[float],
    labels: Sequence[str],
    ax: plt.Axes | None = None,
    title: str = "One row of attention weights at several temperatures",
) -> plt.Axes:
    """Grouped bars of ``softmax(scores / T)`` for each temperature T, one group per key (chapter 2).

    ``scores`` has shape ``(t,)`` and ``labels`` names the t keys. Returns the matplotlib Axes.
    """
    s = as_float_tensor(scores, "scores")
    if s.dim() != 1:
        raise ValueError(f"scores must be one row of shape (t,), got {tuple(s.shape)}; pick a row with scores[i].")
    if len(labels) != s.shape[0]:
        raise ValueError(f"{len(labels)} labels for {s.shape[0]} scores; give one label per key.")
    temps = list(temperatures)
    if not temps:
        raise ValueError("temperatures is empty: give one or more positive finite numbers, such as [0.5, 1, 2].")
    temps = [validate.real(T, "every temperature", above=0) for T in temps]
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 3.8))
    width = 0.8 / len(temps)
    colours = plt.cm.viridis([i / max(len(temps) - 1, 1) for i in range(len(temps))])
    for i, T in enumerate(temps):
        w = softmax(s / T).detach().cpu().tolist()
        ax.bar([j + (i - (len(temps) - 1) / 2) * width for j in range(len(w))], w, width,
               label=f"T = {T:g}", color=colours[i])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(list(labels))
    ax.set_ylim(0, 1)
    ax.set_xlabel("key")
    ax.set_ylabel("attention weight")
    ax.set_title(title)
    ax.legend(fontsize=9, loc="upper right")  # over the small weights of the last keys
    return ax
