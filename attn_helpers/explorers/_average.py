"""Chapter 1's explorer: a query in the plane, its dot products with the keys, their softmax, and the output as a
weighted average of the values, a point inside their hull."""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..attention import softmax
from ._explorer import INK, Explorer, check_labels, rounded, vega_softmax

__all__ = ["average_view", "average_explorer"]

#: The sliders: the query's angle in degrees and its length.
ANGLE_MIN, ANGLE_MAX, LENGTH_MAX, LENGTH_STEP = -180, 180, 4.0, 0.01
#: The most keys: their bars, under the plane, fit a phone.
MAX_KEYS = 6
PLANE = 240  # px a side: the plane, with the bars under it, fits a phone
OUTPUT = "#d62728"


def average_view(keys: torch.Tensor, values: torch.Tensor, angle: float, length: float) -> dict:
    """What :func:`average_explorer` shows for a query at ``angle`` degrees and of ``length`` (chapter 1).

    ``keys`` and ``values`` have shape ``(n, 2)``. Returns the ``query`` (2 floats), the ``scores`` q·k_j and the
    ``weights`` softmax(scores) (n floats each), and the ``output`` Σ_j w_j v_j (2 floats), in float64.
    """
    keys, values = _checked(keys, values)
    angle = validate.real(angle, "angle", why="the query's direction in degrees")
    length = validate.real(length, "length", at_least=0, why="the query's length")
    theta = math.radians(angle)
    q = torch.tensor([length * math.cos(theta), length * math.sin(theta)], dtype=torch.float64)  # (2,)
    scores = keys @ q  # (n,)
    weights = softmax(scores)  # (n,)
    return {"query": q.tolist(), "scores": scores.tolist(), "weights": weights.tolist(),
            "output": (weights @ values).tolist()}


def _checked(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keys, values = validate.as_float_tensor(keys, "keys").double(), validate.as_float_tensor(values, "values").double()
    if keys.dim() != 2 or keys.shape[1] != 2 or values.shape != keys.shape or not 2 <= keys.shape[0] <= MAX_KEYS:
        raise ValueError(f"need keys and values of the same shape (n, 2), points in the plane, with "
                         f"2 <= n <= {MAX_KEYS}; "
                         f"got {tuple(keys.shape)} and {tuple(values.shape)}.")
    return keys, values


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The convex hull of ``points``, corners in order around it (Andrew's monotone chain)."""
    pts = sorted(set(points))
    if len(pts) < 3:
        return pts

    def cross(o: tuple, a: tuple, b: tuple) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list = []
    upper: list = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def average_explorer(keys: torch.Tensor, values: torch.Tensor, labels: Sequence[str], angle: float = 45.0,
                     length: float = 1.0) -> Explorer:
    """A query in the plane under two sliders (its angle and its length), the keys and values as points, and
    the output, the weighted average of the values, inside their hull; under it, each key's score and weight
    (chapter 1).

    ``keys`` and ``values`` have shape ``(n, 2)``, 2 ≤ n ≤ 6, and ``labels`` names the n keys. The browser
    computes the scores, the softmax and the average, as :func:`average_view` does in Python.
    """
    view = average_view(keys, values, angle, length)  # checks the input
    validate.real(angle, "angle", at_least=ANGLE_MIN, at_most=ANGLE_MAX, why="the slider's range")
    validate.real(length, "length", at_most=LENGTH_MAX, why="the slider's range")
    keys, values = _checked(keys, values)
    n = keys.shape[0]
    check_labels(n, labels, MAX_KEYS, "keys and values of shape (n, 2)", "Give one label a key.")
    k, v = [[rounded(x) for x in row] for row in keys.tolist()], [[rounded(x) for x in row] for row in values.tolist()]
    data = pd.DataFrame({"j": range(n), "name": list(labels), "kx": [p[0] for p in k], "ky": [p[1] for p in k],
                         "vx": [p[0] for p in v], "vy": [p[1] for p in v]})
    reach = max(abs(x) for row in k + v for x in row) * 1.1
    reach = rounded(max(reach, LENGTH_MAX * 1.05))
    scale = alt.Scale(domain=[-reach, reach])
    A = alt.param(name="angle", value=angle,
                  bind=alt.binding_range(min=ANGLE_MIN, max=ANGLE_MAX, step=1, name="query's angle (degrees) "))
    L = alt.param(name="length", value=length,
                  bind=alt.binding_range(min=0, max=LENGTH_MAX, step=LENGTH_STEP, name="query's length "))
    qx, qy = "length * cos(angle * PI / 180)", "length * sin(angle * PI / 180)"
    weighted = (alt.Chart(data, transform=vega_softmax(f"({qx}) * datum.kx + ({qy}) * datum.ky", by=()))
                .transform_calculate(wx="datum.w * datum.vx", wy="datum.w * datum.vy"))
    x, y = alt.X("x:Q", scale=scale, title=None), alt.Y("y:Q", scale=scale, title=None)
    corners = _hull([(p[0], p[1]) for p in v])
    ring = corners + corners[:1]  # closed
    hull = alt.Chart(pd.DataFrame({"x": [c[0] for c in ring], "y": [c[1] for c in ring],
                                   "o": range(len(ring))})).mark_line(
        color="#9ecae1", strokeWidth=2, aria=False).encode(x=x, y=y, order="o:Q")
    points = alt.Chart(data).transform_calculate(x="datum.vx", y="datum.vy").encode(x=x, y=y)
    value_dots = points.mark_point(filled=True, size=60, color="#4c78a8", aria=False)
    value_names = points.transform_calculate(text="datum.name").mark_text(
        align="left", dx=6, dy=-6, fontSize=12, aria=False).encode(text="text:N")
    origin = {"x": alt.X("o:Q", scale=scale, title=None), "y": alt.Y("o:Q", scale=scale, title=None)}
    key_arrows = alt.Chart(data).transform_calculate(o="0").mark_rule(
        color="#9e9e9e", strokeDash=[3, 2], aria=False).encode(**origin, x2="kx:Q", y2="ky:Q")
    query = (alt.Chart(pd.DataFrame({"n": [0]})).transform_calculate(x=qx, y=qy)
             .transform_calculate(label="'query (' + format(datum.x, '.8f') + ', ' + format(datum.y, '.8f') + ')'"))
    query_arrow = query.transform_calculate(o="0").mark_rule(strokeWidth=2, style=INK, aria=False).encode(
        **origin, x2="x:Q", y2="y:Q")
    query_tip = query.mark_point(filled=True, size=50, shape="triangle", style=INK).encode(
        x=x, y=y, description=alt.Description("label:N"))
    output = (weighted.transform_aggregate(x="sum(wx)", y="sum(wy)")
              .transform_calculate(label="'output (' + format(datum.x, '.8f') + ', ' + format(datum.y, '.8f') + ')'")
              .mark_point(filled=True, size=110, shape="diamond", color=OUTPUT)
              .encode(x=x, y=y, description=alt.Description("label:N")))
    plane = alt.layer(hull, key_arrows, value_dots, value_names, query_arrow, query_tip, output).properties(
        width=PLANE, height=PLANE)
    bars = weighted.transform_calculate(
        label="datum.name + ': score ' + format(datum.s, '.8f') + ', weight ' + format(datum.w, '.8f')",
        text="'s ' + format(datum.s, '.2f') + ', w ' + format(datum.w, '.2f')",
    )
    name = alt.Y("name:N", sort=None, title=None)
    weight_bars = bars.mark_bar(color="#4c78a8").encode(
        y=name, x=alt.X("w:Q", title="weight (each key's score s beside it)", scale=alt.Scale(domain=[0, 1])),
        description=alt.Description("label:N"))
    weight_text = bars.mark_text(align="left", dx=4, fontSize=12, aria=False).encode(y=name, x="w:Q", text="text:N")
    weights = alt.layer(weight_bars, weight_text).properties(width=PLANE - 60, height=22 * n)
    chart = alt.vconcat(plane, weights, spacing=16).add_params(A, L)
    description = (f"A query in the plane, set by sliders for its angle and its length, with {n} keys and their "
                   f"values as points; the output, the softmax-weighted average of the values, is a point inside "
                   f"their hull, and bars give each key's score and weight. At the start the output is "
                   f"({view['output'][0]:.2f}, {view['output'][1]:.2f}).")
    return Explorer(chart, description, "Turn and stretch the query: watch the output")
