"""What attention costs: a pure-Python version, timing, tensor memory and log-log slopes (chapters 6-7).

Time is measured with ``time.perf_counter`` (best of a few runs, so it varies from run to run
and machine to machine). Memory is *counted*, not sampled: :class:`TensorMemoryTracker` sees
every tensor a PyTorch operator returns and adds up the bytes of the new ones that are alive
at the same time. That is deterministic, and it is exactly the memory an algorithm
materialises as tensors; scratch space a fused C++ kernel allocates internally is not seen.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .attention import attention
from .validate import as_float_tensor


def loop_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with plain Python loops over floats (chapter 7).

    q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``; returns ``(out (t_q, d_v), weights (t_q, t_k))``
    like :func:`attn_helpers.attention`. Every multiplication is one Python operation, so its
    running time shows the t² · d growth without any fast library in between.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        as_float_tensor(x, name, min_dim=2)
        if x.dim() != 2:
            raise ValueError(f"loop_attention takes one sequence: {name} must be 2-D (t, d), got {tuple(x.shape)}.")
    if q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0]:
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)} and k {tuple(k.shape)} need the same d_k, "
            f"k and v {tuple(v.shape)} the same number of tokens."
        )
    scale = 1.0 / math.sqrt(q.shape[1]) if scale is None else scale
    Q, K, V = q.tolist(), k.tolist(), v.tolist()
    outputs, weights = [], []
    for q_row in Q:
        scores = [scale * sum(a * b for a, b in zip(q_row, k_row, strict=True)) for k_row in K]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        w = [e / total for e in exps]
        weights.append(w)
        outputs.append([sum(w[j] * V[j][c] for j in range(len(V))) for c in range(len(V[0]))])
    return torch.tensor(outputs, dtype=q.dtype), torch.tensor(weights, dtype=q.dtype)


def time_call(
    fn: Callable[..., object], *args: object, repeats: int = 5, budget: float = 0.25, warmup: bool = True
) -> float:
    """Seconds one call ``fn(*args)`` takes: the best of up to ``repeats`` timed runs (chapter 7).

    With ``warmup`` one untimed call comes first. Stops repeating once ``budget`` seconds have
    been spent, so a slow call runs only once or twice.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}.")
    start = time.perf_counter()
    if warmup:
        fn(*args)  # first calls pay for allocation and dispatch caches
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() - start > budget:
            break
    return best


class TensorMemoryTracker(TorchDispatchMode):
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

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch otherwise wraps __torch_dispatch__ for torch.compile, importing torch._dynamo
        # (a second or more) on first use; this tracker never runs under torch.compile.
        return False

    def _freed(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        for x in tree_flatten((args, kwargs))[0]:
            if isinstance(x, torch.Tensor):
                self._seen.add(x.untyped_storage())  # existing storage: never counted
        out = func(*args, **kwargs)
        for x in tree_flatten(out)[0]:
            if isinstance(x, torch.Tensor):
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
    """Peak bytes of tensors that ``fn(*args)`` creates, counted by :class:`TensorMemoryTracker`."""
    with torch.no_grad(), TensorMemoryTracker() as tracker:
        result = fn(*args)
    del result
    return tracker.peak


def _qkv(t: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + t)
    return tuple(torch.randn(1, 1, t, d, generator=gen) for _ in range(3))  # each (1, 1, t, d)


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    sizes = list(sizes)
    if not sizes or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in sizes):
        raise ValueError(f"sizes must be a non-empty list of positive ints, got {sizes!r}.")
    if sizes != sorted(set(sizes)):
        raise ValueError(f"sizes must be increasing without repeats, got {sizes}.")
    return sizes


def measure_time(
    sizes: Sequence[int], d: int = 64, loop_limit: float = 1.0, threads: int | None = 1, seed: int = 0
) -> pd.DataFrame:
    """Seconds per call of attention on one ``(t, d)`` sequence for each t in ``sizes`` (chapter 7).

    Columns: ``book`` (:func:`attn_helpers.attention`), ``sdpa``
    (``F.scaled_dot_product_attention``) and ``loop`` (:func:`loop_attention`). The loop is run
    only while its predicted time (last time × (t/t_last)²) stays under ``loop_limit`` seconds;
    later sizes hold NaN. Indexed by t. The numbers vary from run to run.
    PyTorch runs on ``threads`` threads during the measurement (default 1: a fair comparison with the
    single-threaded loop, and less disturbed by other programs); ``None`` keeps the current setting.
    """
    sizes = _check_sizes(sizes)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}.")
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        return _measure_time(sizes, d, loop_limit, seed)
    finally:
        torch.set_num_threads(before)


def _measure_time(sizes: list[int], d: int, loop_limit: float, seed: int) -> pd.DataFrame:
    rows, loop_last = [], None
    for t in sizes:
        q, k, v = _qkv(t, d, seed)
        row = {"t": t, "book": time_call(attention, q, k, v), "sdpa": time_call(F.scaled_dot_product_attention, q, k, v)}
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
    sizes = _check_sizes(sizes)
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
    if not isinstance(table, pd.DataFrame) or table.empty:
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
