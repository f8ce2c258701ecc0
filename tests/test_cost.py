"""Tests for attn_helpers.cost: correctness of the measurements, not speed (chapters 6-7)."""

import math
import sys
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from messages import POSITIVE_INTEGER, raises_saying  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import attn_helpers as ah  # noqa: E402
from attn_helpers import cost  # noqa: E402
from attn_helpers.cost import (  # noqa: E402
    TensorMemoryTracker,
    count_flops,
    default_clock,
    loglog_slope,
    measure_flops,
    measure_memory,
    measure_time,
    peak_tensor_memory,
    plot_flops,
    plot_loglog,
    time_call,
)

# ---------------------------------------------------------------- time_call


def test_time_call_returns_best_run_and_respects_budget():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.01)

    seconds = time_call(slow, repeats=3, budget=10.0, clock=time.perf_counter)
    assert len(calls) == 4 and 0.009 <= seconds < 1.0  # one warm-up plus three runs
    calls.clear()
    time_call(slow, repeats=50, budget=0.0, warmup=False)
    assert len(calls) == 1  # the budget is spent after the first timed run


def test_default_clock_is_processor_time_on_one_thread_except_on_windows(monkeypatch):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert default_clock() is time.process_time
        monkeypatch.setattr(sys, "platform", "win32")  # its process clock ticks every 15.6 ms
        assert default_clock() is time.perf_counter
        monkeypatch.undo()
        torch.set_num_threads(2)  # the processor times of two threads add up to more than the wait
        assert default_clock() is time.perf_counter
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(sys.platform == "win32", reason="Windows times in wall clock (default_clock)")
def test_time_waiting_for_the_processor_does_not_count_on_one_thread(monkeypatch):
    """A call that waits (here it sleeps, as when other programs hold the processor) is timed by its own work."""
    monkeypatch.setattr(cost, "loop_attention", lambda q, k, v: time.sleep(0.05))
    table = measure_time([4, 8], d=4, loop_limit=100.0)
    assert (table["loop"] < 0.02).all(), table
    before = torch.get_num_threads()
    try:  # on two threads the wall clock, which counts the wait
        table = measure_time([4, 8], d=4, loop_limit=100.0, threads=2)
    finally:
        torch.set_num_threads(before)
    assert (table["loop"] >= 0.045).all(), table


def test_time_call_rejects_a_clock_that_is_not_a_function():
    with pytest.raises(TypeError, match="clock must be a function returning seconds"):
        time_call(lambda: None, clock=0.0)


@pytest.mark.parametrize("repeats, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_time_call_rejects_bad_repeats(repeats, error):
    with raises_saying(error, "repeats " + POSITIVE_INTEGER):
        time_call(lambda: None, repeats=repeats)


# ---------------------------------------------------------------- TensorMemoryTracker


def test_tracker_counts_new_tensors_and_frees():
    x = torch.zeros(1000)  # 4000 bytes, created before: not counted
    with TensorMemoryTracker() as m:
        a = x + 1          # 4000 new bytes
        b = a * 2          # 4000 more: peak 8000
        del a              # freed
        c = b[:10]         # a view of b: no new memory
        d = x.view(10, 100)  # a view of a tensor from before: not counted
    assert m.peak == 8000 and m.largest == 4000
    assert m.live == 4000  # only b is still alive
    del b, c, d


def test_peak_tensor_memory_sees_the_t_by_t_matrix_only_without_fusion():
    t = 256
    q, k, v = (torch.randn(1, 1, t, 32) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH):
        math_peak = peak_tensor_memory(F.scaled_dot_product_attention, q, k, v)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        flash_peak = peak_tensor_memory(F.scaled_dot_product_attention, q, k, v)
    book_peak = peak_tensor_memory(ah.attention, q, k, v)
    tt = 4 * t * t
    assert 2 * tt <= math_peak < 3 * tt
    assert 3 * tt <= book_peak < 4 * tt  # out of place: the scores, their exponentials and the weights at once
    assert flash_peak == 4 * t * 32 + 4 * t  # the output and one logsumexp per query


# ---------------------------------------------------------------- FLOPs


def test_count_flops_counts_two_per_multiply_add():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    assert count_flops(torch.matmul, a, b) == 2 * 3 * 5 * 7
    assert count_flops(torch.softmax, a, -1) == 0  # element-wise work is not counted
    q = torch.randn(1, 2, 16, 8)
    assert count_flops(ah.attention, q, q, q) == 2 * (2 * 2 * 16 * 16 * 8)  # QKᵀ and weights @ V


def test_flops_by_operator_splits_count_flops():
    assert ah.cost.flops_by_operator(torch.mm, torch.ones(3, 4), torch.ones(4, 5)) == {"mm": 2 * 3 * 4 * 5}
    assert ah.cost.flops_by_operator(torch.softmax, torch.ones(3, 4), -1) == {}
    q = torch.randn(1, 2, 16, 8)
    assert ah.cost.flops_by_operator(ah.attention, q, q, q) == {"bmm": count_flops(ah.attention, q, q, q)}


def test_measure_flops_splits_projections_and_attention():
    d = 16
    table = measure_flops([4, 8, 32, 64], d=d, num_heads=2)
    t = table.index.to_numpy()
    assert list(table.columns) == ["projections", "attention"]
    assert (table["projections"] == 8 * t * d ** 2).all()
    assert (table["attention"] == 4 * t ** 2 * d).all()
    assert table.loc[2 * d, "projections"] == table.loc[2 * d, "attention"]  # the crossover
    assert table.equals(measure_flops([4, 8, 32, 64], d=d, num_heads=2))


def test_measure_flops_rejects_bad_sizes():
    with pytest.raises(ValueError, match="increasing"):
        measure_flops([8, 4])


def test_plot_flops_draws_two_stacked_panels_with_the_crossover():
    table = measure_flops([8, 16, 32, 64], d=8, num_heads=2)
    fig = plot_flops(table, d=8)
    top, bottom = fig.axes
    assert len(top.lines) == 3 and top.get_yscale() == "log"  # two columns and the t = 2d line
    share = bottom.lines[0].get_ydata()
    assert np.allclose(share, 100 * table.index / (2 * 8 + table.index))  # t / (2d + t)
    assert any(np.allclose(line.get_xdata(), 16) for line in bottom.lines[1:])
    assert fig.get_size_inches()[0] <= 7.4
    plt.close(fig)


def test_plot_flops_rejects_other_tables():
    with pytest.raises(ValueError, match="measure_flops"):
        plot_flops(pd.DataFrame({"book": [1.0]}), d=8)


# ---------------------------------------------------------------- measure_time / measure_memory


def test_measure_time_table_and_loop_cut_off():
    before = torch.get_num_threads()
    table = measure_time([4, 8, 16], d=4, loop_limit=1e-9)
    assert list(table.columns) == ["book", "sdpa", "loop"] and list(table.index) == [4, 8, 16]
    assert (table[["book", "sdpa"]] > 0).all().all()
    assert table["loop"].iloc[0] > 0 and table["loop"].iloc[1:].isna().all()  # predicted over the limit
    assert torch.get_num_threads() == before
    table = measure_time([4, 8], d=4, loop_limit=100.0, threads=None)
    assert table["loop"].notna().all()


@pytest.mark.parametrize("sizes, error, message", [
    ([], ValueError, "non-empty list"),
    ([8, 4], ValueError, "increasing"),
    ([4, 4], ValueError, "increasing"),
    ([0, 4], ValueError, "positive ints"),
    ([4.0], TypeError, "4.0 (a float) is not one"),
])
def test_measure_rejects_bad_sizes(sizes, error, message):
    with raises_saying(error, message):
        measure_time(sizes)
    with raises_saying(error, message):
        measure_memory(sizes)


def test_measure_time_rejects_bad_threads():
    with raises_saying(ValueError, "threads " + POSITIVE_INTEGER + " or None"):
        measure_time([4], threads=0)


def test_measure_memory_is_exact_and_deterministic():
    table = measure_memory([16, 64], d=8)
    assert list(table.columns) == ["book", "sdpa", "weights"]
    assert table.loc[64, "weights"] == 4 * 64 * 64
    assert table.loc[64, "sdpa"] == 4 * 64 * 8 + 4 * 64
    assert table.equals(measure_memory([16, 64], d=8))


# ---------------------------------------------------------------- loglog_slope


@pytest.mark.parametrize("power", [0.5, 1.0, 2.0, 3.0])
def test_loglog_slope_recovers_exponent(power):
    t = np.array([16, 32, 64, 128, 256])
    assert math.isclose(loglog_slope(t, 3.0 * t ** power), power, abs_tol=1e-9)


def test_loglog_slope_min_t_and_nan():
    t = [1, 2, 4, 8, 16]
    y = [5.0, 5.0, 16.0, 64.0, float("nan")]  # flat, then t², then not measured
    assert loglog_slope(t, y) < 1.9  # the flat start pulls the slope down
    assert math.isclose(loglog_slope(t, y, min_t=4), 2.0, abs_tol=1e-9)


@pytest.mark.parametrize("t, y, min_t, message", [
    ([1, 2], [1.0], 0, "same length"),
    ([1, 2, 4], [1.0, 0.0, 4.0], 0, "positive t and y"),
    ([1, 2, 4], [1.0, 2.0, 4.0], 4, "two or more different t"),
    ([1, 2], [float("nan"), 1.0], 0, "two or more different t"),
])
def test_loglog_slope_rejects_bad_input(t, y, min_t, message):
    with pytest.raises(ValueError, match=message):
        loglog_slope(t, y, min_t=min_t)


# ---------------------------------------------------------------- plot_loglog


def test_plot_loglog_draws_one_line_per_column_on_log_axes():
    table = pd.DataFrame({"t": [16, 32, 64], "a": [1.0, 4.0, 16.0], "b": [1.0, 2.0, float("nan")]}).set_index("t")
    ax = plot_loglog(table, "seconds", "a title")
    assert len(ax.lines) == 2 and len(ax.lines[1].get_xdata()) == 2  # NaN dropped
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "a title" and ax.get_ylabel() == "seconds" and "sequence length" in ax.get_xlabel()
    plt.close("all")


def test_plot_loglog_rejects_empty():
    with pytest.raises(ValueError, match="non-empty DataFrame"):
        plot_loglog(pd.DataFrame(), "y", "t")
