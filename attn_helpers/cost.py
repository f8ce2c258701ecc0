"""Measuring what attention costs: timing, FLOPs, tensor memory and log-log slopes (chapters 6-7; the API page
lists the later chapters whose code uses it).

The versions of attention it measures, :func:`attn_helpers.attention` and the pure-Python
:func:`attn_helpers.loop_attention`, live side by side in the attention module; this one holds the measuring tools.

Time is the best of a few runs, so it varies from run to run and machine to machine. With PyTorch on one
thread it is read from this process's processor clock, ``time.process_time``, so other programs on a busy
machine do not count (:func:`default_clock`); otherwise, and on Windows, from ``time.perf_counter``.
FLOPs are *counted* by PyTorch's ``torch.utils.flop_counter.FlopCounterMode`` (two per multiply-add of
every matrix product). Memory is *counted*, not sampled:
:class:`TensorMemoryTracker` sees every tensor a PyTorch operator returns and adds up the bytes
of the new ones that are alive at the same time. Both counts are deterministic. The memory count
is exactly what an algorithm materialises as tensors; scratch space a fused C++ kernel allocates
internally is not seen.
"""

from __future__ import annotations

import math
import sys
import time
import weakref
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.ticker import ScalarFormatter

from . import validate
from ._torch_private import dispatch_mode_base, tensors_in
from .attention import attention, loop_attention
from .training import torch_threads

__all__ = [
    "time_call",
    "default_clock",
    "TensorMemoryTracker",
    "peak_tensor_memory",
    "measure_time",
    "measure_memory",
    "count_flops",
    "flops_by_operator",
    "measure_flops",
    "plot_flops",
    "loglog_slope",
    "plot_loglog",
]


def default_clock() -> Callable[[], float]:
    """The clock :func:`time_call` reads unless told otherwise (chapters 7 and 9).

    ``time.process_time`` (this process's processor time) while PyTorch runs on one thread: the time
    the computation itself takes, not the time other programs hold the processor. Otherwise the wall
    clock ``time.perf_counter``: the processor times of several threads add up to more than the wait,
    and Windows advances a process's processor clock only every 15.6 ms or so, too coarsely for calls
    of a millisecond.
    """
    if torch.get_num_threads() == 1 and sys.platform != "win32":
        return time.process_time
    return time.perf_counter


def time_call(
    fn: Callable[..., object], *args: object, repeats: int = 5, budget: float = 0.25, warmup: bool = True,
    clock: Callable[[], float] | None = None,
) -> float:
    """Seconds one call ``fn(*args)`` takes: the best of up to ``repeats`` timed runs (chapter 7).

    With ``warmup`` one untimed call comes first. Stops repeating once ``budget`` seconds (of wall
    clock) have been spent, so a slow call runs only once or twice. ``clock`` defaults to
    :func:`default_clock`.
    """
    validate.integer(repeats, "repeats", minimum=1)
    if clock is None:
        clock = default_clock()
    elif not callable(clock):
        raise TypeError(f"clock must be a function returning seconds, such as time.perf_counter; got {clock!r}.")
    start = time.perf_counter()
    if warmup:
        fn(*args)  # first calls pay for allocation and dispatch caches
    best = math.inf
    for _ in range(repeats):
        t0 = clock()
        fn(*args)
        best = min(best, clock() - t0)
        if time.perf_counter() - start > budget:
            break
    return best


class TensorMemoryTracker(dispatch_mode_base()):
    """Counts the bytes of tensors created by PyTorch operators while active (chapters 6-7).

    ``with TensorMemoryTracker() as m: ...`` then read ``m.peak`` (most bytes alive at once),
    ``m.live`` (bytes still alive) and ``m.largest`` (the biggest single new tensor). Tensors that
    existed before, and views of them, are not counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.largest = 0
        self._seen: weakref.WeakSet = weakref.WeakSet()

    def _freed(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        for x in tensors_in((args, kwargs)):
            self._seen.add(x.untyped_storage())  # existing storage: never counted
        out = func(*args, **kwargs)
        for x in tensors_in(out):
            storage = x.untyped_storage()
            if storage not in self._seen:
                self._seen.add(storage)
                nbytes = storage.nbytes()
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                self.largest = max(self.largest, nbytes)
                weakref.finalize(storage, self._freed, nbytes)
        return out


def peak_tensor_memory(fn: Callable[..., object], *args: object) -> int:
    """Peak bytes of tensors that ``fn(*args)`` creates, counted by :class:`TensorMemoryTracker` (chapters 6-7)."""
    with torch.no_grad(), TensorMemoryTracker() as tracker:
        result = fn(*args)
    del result
    return tracker.peak


def _qkv(t: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + t)
    return tuple(torch.randn(1, 1, t, d, generator=gen) for _ in range(3))  # each (1, 1, t, d)


def measure_time(
    sizes: Sequence[int], d: int = 64, loop_limit: float = 1.0, threads: int | None = 1, seed: int = 0
) -> pd.DataFrame:
    """Seconds per call of attention on one ``(t, d)`` sequence for each t in ``sizes`` (chapter 7).

    Columns: ``book`` (:func:`attn_helpers.attention`), ``sdpa``
    (``F.scaled_dot_product_attention``) and ``loop`` (:func:`attn_helpers.loop_attention`). The loop is run
    only while its predicted time (last time × (t/t_last)²) stays under ``loop_limit`` seconds;
    later sizes hold NaN. Indexed by t. The numbers vary from run to run.
    PyTorch runs on ``threads`` threads during the measurement (default 1: a fair comparison with the
    single-threaded loop, timed in processor time, see :func:`default_clock`); ``None`` keeps the
    current setting.
    """
    sizes = validate.sizes_list(sizes)
    with torch_threads(threads):
        return _measure_time(sizes, d, loop_limit, seed)


def _measure_time(sizes: list[int], d: int, loop_limit: float, seed: int) -> pd.DataFrame:
    rows, loop_last = [], None
    for t in sizes:
        q, k, v = _qkv(t, d, seed)
        row = {"t": t, "book": time_call(attention, q, k, v),
               "sdpa": time_call(F.scaled_dot_product_attention, q, k, v)}
        loop = math.nan
        if loop_last is None or loop_last[1] * (t / loop_last[0]) ** 2 <= loop_limit:
            loop = time_call(loop_attention, q[0, 0], k[0, 0], v[0, 0], repeats=3, budget=0.2, warmup=False)
            loop_last = (t, loop)
        else:
            loop_last = (loop_last[0], math.inf)  # stop for good
        row["loop"] = loop
        rows.append(row)
    return pd.DataFrame(rows).set_index("t")


def measure_memory(sizes: Sequence[int], d: int = 64, seed: int = 0) -> pd.DataFrame:
    """Peak tensor bytes of ``book`` and ``sdpa`` (see :func:`measure_time`) for each t (chapter 7).

    A third column, ``weights``, is the size of one float32 t × t weight matrix, 4·t² bytes.
    """
    sizes = validate.sizes_list(sizes)
    rows = []
    for t in sizes:
        q, k, v = _qkv(t, d, seed)
        rows.append({
            "t": t,
            "book": peak_tensor_memory(attention, q, k, v),
            "sdpa": peak_tensor_memory(F.scaled_dot_product_attention, q, k, v),
            "weights": 4 * t * t,
        })
    return pd.DataFrame(rows).set_index("t")


def _flop_counts(fn: Callable[..., object], *args: object) -> dict[str, dict[str, int]]:
    """FLOPs of ``fn(*args)`` by module (``"Global"`` for all of it, then each submodule's name) and operator."""
    from torch.utils.flop_counter import FlopCounterMode  # imported here: its first use takes a second

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn(*args)
    return {module: {str(op).split(".")[-1]: int(n) for op, n in ops.items()}
            for module, ops in counter.get_flop_counts().items()}


def count_flops(fn: Callable[..., object], *args: object) -> int:
    """Floating-point operations of the matrix products in ``fn(*args)`` (chapter 7).

    Counted by PyTorch's ``FlopCounterMode``: a product of a ``(n, m)`` and an ``(m, p)`` matrix
    is ``2·n·m·p`` FLOPs (one multiply and one add each); softmax and other element-wise steps are
    not counted. The count is the same on every run and machine. Fused kernels it has no formula
    for (``F.scaled_dot_product_attention`` on the CPU) count as 0.
    """
    return sum(flops_by_operator(fn, *args).values())


def flops_by_operator(fn: Callable[..., object], *args: object) -> dict[str, int]:
    """The FLOPs of :func:`count_flops`, by operator: ``{"mm": …, "bmm": …}`` (chapter 9).

    Matrix products are counted as 2 FLOPs per multiply-add; softmax, ``cat`` and the like count 0.
    """
    return _flop_counts(fn, *args).get("Global", {})


def measure_flops(sizes: Sequence[int], d: int = 64, num_heads: int = 4, seed: int = 0) -> pd.DataFrame:
    """Counted FLOPs of one multi-head attention layer on one ``(t, d)`` sequence, per t in ``sizes`` (chapter 7).

    Runs :class:`attn_helpers.MultiHeadAttention` ``(d, num_heads)`` under ``FlopCounterMode`` and splits
    the count by module. Columns: ``projections`` (``W_q``, ``W_k``, ``W_v``, ``W_o``: four
    ``(t, d) @ (d, d)`` products, ``8·t·d²``) and ``attention`` (``QKᵀ`` and the weights times ``V``
    over all heads, ``4·t²·d``). Indexed by t. The two are equal at ``t = 2d``.
    """
    from .modules import MultiHeadAttention

    sizes = validate.sizes_list(sizes)
    torch.manual_seed(seed)  # the weights do not change the count; seeded all the same
    layer = MultiHeadAttention(d, num_heads)
    rows = []
    for t in sizes:
        x = torch.randn(1, t, d, generator=torch.Generator().manual_seed(seed + t))  # (b, t, d)
        per_module = {name: sum(ops.values()) for name, ops in _flop_counts(layer, x).items()}
        projections = sum(n for name, n in per_module.items() if name.split(".")[-1] in ("W_q", "W_k", "W_v", "W_o"))
        rows.append({"t": t, "projections": projections, "attention": per_module["Global"] - projections})
    return pd.DataFrame(rows).set_index("t")


def plot_flops(table: pd.DataFrame, d: int) -> plt.Figure:
    """Two stacked panels from :func:`measure_flops`' ``table`` for width ``d`` (chapter 7).

    Top: the FLOPs of the projections and of attention against t on log-log axes. Bottom: attention's
    share of the layer's FLOPs. A dotted line marks ``t = 2d``, where the two are equal. Returns the Figure.
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"plot_flops needs the DataFrame of measure_flops, got {type(table).__name__}.")
    if not {"projections", "attention"} <= set(table.columns):
        raise ValueError("plot_flops needs the DataFrame of measure_flops, with columns 'projections' and 'attention'.")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 7.2), sharex=True)
    plot_loglog(table[["projections", "attention"]], "FLOPs per layer", "Where the FLOPs of one layer go", ax=top)
    share = 100 * table["attention"] / (table["projections"] + table["attention"])
    bottom.plot(share.index, share.values, marker="o", color="C1")
    bottom.axhline(50, color="grey", linewidth=0.8)
    bottom.set_ylim(0, 100)
    bottom.set_xlabel("sequence length t (tokens)")
    bottom.set_ylabel("attention's share of FLOPs (%)")
    bottom.grid(True, alpha=0.3)
    for ax in (top, bottom):
        ax.axvline(2 * d, color="grey", linestyle=":", linewidth=1.5)
    top.set_xlabel("")
    bottom.xaxis.set_major_formatter(ScalarFormatter())  # 16, 32, … rather than powers of 2
    bottom.annotate(f"t = 2d = {2 * d}", (2 * d, 0.08), xycoords=("data", "axes fraction"),
                    xytext=(6, 0), textcoords="offset points", color="dimgrey")
    fig.tight_layout()
    return fig


def loglog_slope(t: Sequence[float], y: Sequence[float], min_t: float = 0) -> float:
    """Slope of the least-squares line through ``(log t, log y)``, using points with ``t >= min_t`` (chapter 7).

    If ``y ≈ c · t^p`` the slope is ``p``. NaN entries (sizes not measured) are skipped.
    """
    t_arr, y_arr = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    if t_arr.shape != y_arr.shape or t_arr.ndim != 1:
        raise ValueError(f"t and y must be 1-D and of the same length, got {t_arr.shape} and {y_arr.shape}.")
    keep = (t_arr >= min_t) & np.isfinite(y_arr)
    if (t_arr[keep] <= 0).any() or (y_arr[keep] <= 0).any():
        raise ValueError("log-log slopes need positive t and y; remove zeros and negative values.")
    if len(np.unique(t_arr[keep])) < 2:
        raise ValueError(
            f"need measurements at two or more different t >= {min_t} to fit a slope, got {int(keep.sum())}."
        )
    slope, _ = np.polyfit(np.log(t_arr[keep]), np.log(y_arr[keep]), 1)
    return float(slope)


def plot_loglog(table: pd.DataFrame, ylabel: str, title: str, ax: plt.Axes | None = None) -> plt.Axes:
    """One line per column of ``table`` (indexed by t) on log-log axes (chapter 7). Returns the Axes."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"plot_loglog needs a DataFrame indexed by t, one column per method, got "
                        f"{type(table).__name__}.")
    if table.empty:
        raise ValueError("plot_loglog needs a non-empty DataFrame indexed by t, one column per method.")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for (name, column), marker in zip(table.items(), "osv^D" * len(table.columns), strict=False):
        column = column.dropna()
        ax.plot(column.index, column.values, marker=marker, label=str(name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length t (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return ax
