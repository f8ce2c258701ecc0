"""scripts/rounding_room.py: how far each number a chapter shows is from a rounding boundary, over the kernel sets."""

from __future__ import annotations

import ast
import builtins
import math

import numpy as np
import pandas as pd
import pytest
import rounding_room
import torch


@pytest.mark.parametrize("value, decimals, distance", [
    (0.38501, 2, 1e-5),         # just above the boundary 0.385
    (0.3849, 2, 1e-4),          # just below it
    (0.38, 2, 0.005),           # on a printed value: half a step from either boundary
    (-2.98493, 2, 7e-5),        # negative: the boundary -2.985
    (1234.5, 0, 0.0),           # on the boundary
    (0.0231, 3, 4e-4),
])
def test_the_distance_to_the_nearest_boundary(value, decimals, distance):
    assert rounding_room.boundary_distance(value, decimals) == pytest.approx(distance, abs=1e-12)


def test_a_format_rounds_at_the_decimals_it_prints():
    assert rounding_room.decimals_shown(0.231, 3, "f") == 3
    assert rounding_room.decimals_shown(0.231, 1, "%") == 3            # 23.1%
    assert rounding_room.decimals_shown(2.19e-10, 1, "e") == 11        # 2.2e-10
    assert rounding_room.decimals_shown(0.0413, 3, "g") == 4           # 0.0413


def test_the_ratio_is_the_distance_over_the_spread_of_the_kernel_sets():
    measured = {"a": [("c1", "x", 0.38501, 2), ("c2", "y", 0.5, 4)],
                "b": [("c1", "x", 0.38502, 2), ("c2", "y", 0.5, 4)]}
    first, second = rounding_room.rooms(measured)
    assert first["spread"] == pytest.approx(1e-5) and first["distance"] == pytest.approx(1e-5, abs=1e-12)
    assert first["ratio"] == pytest.approx(1.0, rel=1e-6)                # another CPU could print 0.39 as 0.38
    assert second["ratio"] == math.inf and second["distance"] == pytest.approx(5e-5)  # identical under both
    table = "\n".join(rounding_room.report([first, second]))
    assert "| c1 | 1 |" in table and "| c2 | 1 |" in table and "identical" in table


def test_kernel_sets_that_show_different_numbers_are_refused():
    with pytest.raises(RuntimeError, match="different sequences"):
        rounding_room.rooms({"a": [("c1", "x", 0.5, 2)], "b": [("c1", "z", 0.5, 2)]})


def run_recorded(code: str, **names: object) -> list[tuple]:
    recorder = rounding_room.Recorder({code: "k"})
    recorder.cell = "k"
    tree = ast.fix_missing_locations(recorder.visit(ast.parse(code)))
    exec(compile(tree, "<ipython-input-1>", "exec"),  # noqa: S102
         {"__rounding__": recorder, "round": recorder.watch_round(builtins.round), **names})
    return [(where.split(": ", 1)[1], value, decimals) for _, where, value, decimals in recorder.records]


def test_the_recorder_sees_f_strings_and_round_and_keeps_what_they_give():
    found = run_recorded("text = f'{x:.3f} {y:.1%} {n}'\nkept = round(z, 2)\nassert kept == 0.38", x=0.2314,
                         y=0.97213, n=3, z=0.38499)
    assert found == [("{x:.3f}", 0.2314, 3), ("{y:.1%}", 0.97213, 3), ("round(…, 2)", 0.38499, 2)]


def test_the_recorder_sees_every_element_of_a_printed_tensor():
    recorder = rounding_room.Recorder({})
    recorder.cell = "k"
    formatter = torch._tensor_str._Formatter
    original = formatter.format
    formatter.format = recorder.watch_printing(original)
    try:
        text = str(torch.tensor([0.44268, 0.50884]))
    finally:
        formatter.format = original
    assert "0.4427" in text
    assert [(r[2], r[3]) for r in recorder.records] == [(pytest.approx(0.44268), 4), (pytest.approx(0.50884), 4)]


def test_the_recorder_sees_the_round_method_of_arrays_and_tensors_in_a_cell():
    found = run_recorded("a = x.round(2)\nb = t.round(decimals=1)\nc = n.round()\nd = torch.round(t, decimals=3)\n"
                         "assert list(a) == [0.38, 1.0] and b.shape == (1,)", x=np.array([0.38499, 1.0]),
                         t=torch.tensor([0.25]), n=np.array([1.5]), torch=torch)
    assert found == [(".round(2)", 0.38499, 2), (".round(2)", 1.0, 2), (".round(1)", 0.25, 1)]  # not round(), 0 places


def test_the_recorder_sees_pandas_round_from_a_cell_or_the_package_but_not_from_pandas():
    recorder = rounding_room.Recorder({})
    recorder.cell = "k"
    originals = {kind: kind.round for kind in (pd.DataFrame, pd.Series)}
    try:
        for kind in originals:
            kind.round = recorder.watch_pandas_round(originals[kind])
        frame = pd.DataFrame({"x": [0.38499, 2.0], "name": ["a", "b"]})
        code = "shown = frame.round(2)\nseries = frame['x'].round(1)"
        exec(compile(code, "<ipython-input-1>", "exec"), {"frame": frame})  # noqa: S102
        pd.DataFrame({"x": [0.5]}).round(3)  # called from here, neither a cell nor attn_helpers: not recorded
    finally:
        for kind, original in originals.items():
            kind.round = original
    assert [(where.split(": ", 1)[1], value, decimals) for _, where, value, decimals in recorder.records] == [
        ("DataFrame.round(2)", 0.38499, 2), ("DataFrame.round(2)", 2.0, 2),
        ("Series.round(1)", 0.38499, 1), ("Series.round(1)", 2.0, 1)]


def test_cells_whose_outputs_nbval_ignores_are_not_measured():
    assert rounding_room.unchecked({"metadata": {"tags": ["nbval-ignore-output"]}})
    assert rounding_room.unchecked({"metadata": {"tags": ["nbval-skip", "solution"]}})
    assert not rounding_room.unchecked({"metadata": {"tags": ["solution"]}})
    assert not rounding_room.unchecked({"metadata": {}})


def test_the_recorder_sees_the_margin_of_every_argmax_and_the_room_is_that_margin():
    recorder = rounding_room.Recorder({})
    recorder.cell = "k"
    scores = torch.tensor([[0.1, 0.7, 0.4], [2.0, 1.0, 1.5]])
    code = "per_row = argmax(scores, dim=-1)\nof_all = argmax(scores)\nleast = argmin(scores, -1)"
    exec(compile(code, "<ipython-input-1>", "exec"),  # noqa: S102
         {"argmax": recorder.watch_argmax(torch.Tensor.argmax),
          "argmin": recorder.watch_argmax(torch.argmin, "argmin"), "scores": scores})
    assert [(where.split(": ", 1)[1], decimals) for _, where, _, decimals in recorder.records] == [
        ("argmax", rounding_room.ARGMAX)] * 3 + [("argmin", rounding_room.ARGMAX)] * 2
    assert [value for *_, value, _ in recorder.records] == pytest.approx([0.3, 0.5, 0.5, 0.3, 0.5], abs=1e-6)
    (choice,) = rounding_room.rooms({"a": [("c1", "x", 1e-6, rounding_room.ARGMAX)],
                                     "b": [("c1", "x", 3e-6, rounding_room.ARGMAX)]})
    assert choice["distance"] == pytest.approx(1e-6) and choice["ratio"] == pytest.approx(0.5)  # could choose another
