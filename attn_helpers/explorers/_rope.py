"""Chapter 11's RoPE explorer: each pair of a query and a key turns with the position, and the score depends on the
offset alone."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..position import frequencies, rope
from ._explorer import Explorer, rounded

__all__ = ["rope_offset_view", "rope_offset_explorer"]

#: The sliders' ranges: the key's position p and the query's offset r after it.
P_MAX, R_MAX = 64, 32
#: The most pairs drawn as circles: four of 128 px, two by two, fit a 390-px phone.
CIRCLES = 4
QUERY, KEY = "#e45756", "#4c78a8"  # the query's arrow and the key's


def _query_and_key(q: object, k: object) -> int:
    """One query and one key to rotate: float tensors of one shape ``(d,)``, d even. Returns d."""
    validate.as_float_tensor(q, "q")
    validate.as_float_tensor(k, "k")
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be one query and one key, two vectors of the same shape (d,), got shapes "
                         f"{tuple(q.shape)} and {tuple(k.shape)}. Take one row of each, e.g. q[0] and k[0].")
    return validate.even_int(q.shape[0], "d, the length of q and k")


def rope_offset_view(q: torch.Tensor, k: torch.Tensor, p: int, r: int) -> dict:
    """What :func:`rope_offset_explorer` shows for a key at p and a query at p + r (chapter 11).

    ``q`` and ``k`` have shape ``(d,)``; ``q`` and ``k`` in the result are RoPE's rotations of them (d floats
    each: pair i is the arrow ``(2i, 2i + 1)``), ``pairs`` each pair's share of the score and ``angles`` the
    angle from the key's arrow to the query's in degrees, in (-180, 180] (d/2 floats each), ``score`` the sum
    ``q_rot · k_rot``, and ``scores`` the score of the key at p with a query at p + r' for r' = 0 … ``R_MAX``.
    """
    _query_and_key(q, k)
    p = validate.integer(p, "p", minimum=0, why="the key's position")
    r = validate.integer(r, "r", minimum=-p, why="the query's offset from the key, so that p + r >= 0")
    q_rot = rope(q.double()[None], [p + r])[0]  # (d,): the query at position p + r
    k_rot = rope(k.double()[None], [p])[0]  # (d,): the key at position p
    pairs = (q_rot * k_rot).view(-1, 2).sum(-1)  # (d/2,): pair i is features 2i and 2i+1
    (qe, qo), (ke, ko) = q_rot.view(-1, 2).T, k_rot.view(-1, 2).T  # (d/2,) each
    angles = torch.atan2(ke * qo - ko * qe, ke * qe + ko * qo) * 180 / math.pi  # (d/2,): from k's arrow to q's
    offsets = list(range(R_MAX + 1))
    queries = rope(q.double()[None].expand(len(offsets), -1), [p + o for o in offsets])  # (R_MAX + 1, d)
    return {"q": q_rot.tolist(), "k": k_rot.tolist(), "pairs": pairs.tolist(), "angles": angles.tolist(),
            "score": float(pairs.sum()), "scores": (queries @ k_rot).tolist()}


def _shown_pairs(half: int) -> list[int]:
    """The pairs drawn as circles: all of them up to ``CIRCLES``, else ``CIRCLES`` spread from the first to the last."""
    return list(range(half)) if half <= CIRCLES else sorted({round(j * (half - 1) / (CIRCLES - 1))
                                                              for j in range(CIRCLES)})


def _circle(ring: alt.Chart, i: int, reach: float) -> alt.LayerChart:
    """Pair i as a circle: its query's and key's arrows from the origin, their rings, and the angle between;
    ``reach`` is the axes' half-width, a little more than the longer arrow. The rotated pairs are the data of the
    chart it is drawn in."""
    scale = alt.Scale(domain=[-reach, reach])
    x, y = alt.X("x:Q", scale=scale, axis=None), alt.Y("y:Q", scale=scale, axis=None)
    rings = ring.transform_filter(f"datum.i == {i}").mark_line(strokeWidth=1, aria=False).encode(
        x=x, y=y, order="a:Q", detail="vector:N", color=alt.value("#bdbdbd"))
    pair = alt.Chart().transform_filter(f"datum.i == {i}")
    arrows = pair.transform_calculate(vectors="['query at p + r', 'key at p']").transform_flatten(
        ["vectors"], as_=["vector"]).transform_calculate(
        x="datum.vector == 'key at p' ? datum.k_even : datum.q_even", o="0",
        y="datum.vector == 'key at p' ? datum.k_odd : datum.q_odd").transform_calculate(
        turn="90 - atan2(datum.y, datum.x) * 180 / PI",  # the tip's triangle, turned along its arrow
        label=f"'pair {i}, ' + datum.vector + ': (' + format(datum.x, '.8f') + ', ' + format(datum.y, '.8f') + ')'")
    colour = alt.Color("vector:N", scale=alt.Scale(domain=["query at p + r", "key at p"], range=[QUERY, KEY]),
                       title=None, legend=alt.Legend(orient="top"))
    shafts = arrows.mark_rule(strokeWidth=2, aria=False).encode(
        x=alt.X("o:Q", scale=scale, axis=None), y=alt.Y("o:Q", scale=scale, axis=None), x2="x:Q", y2="y:Q",
        color=colour)
    tips = arrows.mark_point(shape="triangle", filled=True, size=60, opacity=1).encode(
        x=x, y=y, angle=alt.Angle("turn:Q", scale=None), color=colour, description=alt.Description("label:N"))
    angle = pair.transform_calculate(
        text="'angle ' + format(datum.angle, '.0f') + '°, share ' + format(datum.part, '.2f')",
        label=f"'pair {i}: angle from key to query ' + format(datum.angle, '.8f') + ' degrees, share of the score '"
              " + format(datum.part, '.8f')",
    ).mark_text(align="left", x=0, y=-6, fontSize=12).encode(
        text="text:N", description=alt.Description("label:N"))
    return alt.layer(rings, shafts, tips, angle).properties(width=128, height=128, view=alt.ViewConfig(stroke=None))


def rope_offset_explorer(q: torch.Tensor, k: torch.Tensor, p: int = 0, r: int = 1) -> Explorer:
    """A query at p + r and a key at p under RoPE, with sliders for p and r: each pair of features drawn as two
    arrows on a circle, which p turns together, keeping the angle between them, and the score against the offset
    as a line that p leaves where it is (chapter 11).

    ``q`` and ``k`` have shape ``(d,)``; the browser rotates them as :func:`rope_offset_view` does. Up to four
    pairs are drawn as circles (all of them for d <= 8), and every pair counts in the score.
    """
    view = rope_offset_view(q, k, p, r)  # checks the input
    validate.integer(p, "p", maximum=P_MAX, why=f"the slider's range is 0 … {P_MAX}")
    validate.integer(r, "r", minimum=0, maximum=R_MAX, why=f"the slider's range is 0 … {R_MAX}")
    d = q.shape[0]
    qd, kd = q.double(), k.double()
    data = pd.DataFrame({
        "i": list(range(d // 2)),
        "theta": [rounded(x) for x in frequencies(d).tolist()],
        "qe": [rounded(x) for x in qd[0::2].tolist()], "qo": [rounded(x) for x in qd[1::2].tolist()],
        "ke": [rounded(x) for x in kd[0::2].tolist()], "ko": [rounded(x) for x in kd[1::2].tolist()],
    })
    q_norms = [math.hypot(e, o) for e, o in zip(data.qe, data.qo, strict=True)]  # (d/2,): turning keeps them
    k_norms = [math.hypot(e, o) for e, o in zip(data.ke, data.ko, strict=True)]  # in Python: the same on every CPU
    shown = _shown_pairs(d // 2)
    rings = pd.DataFrame([{"i": i, "vector": vector, "n": n} for i in shown
                          for vector, n in (("q", rounded(q_norms[i])), ("k", rounded(k_norms[i])))])
    ring = alt.Chart(rings).transform_calculate(a="sequence(0, 49)").transform_flatten(["a"]).transform_calculate(
        x="datum.n * cos(datum.a * PI / 24)", y="datum.n * sin(datum.a * PI / 24)")
    P = alt.param(name="position_p", value=p, bind=alt.binding_range(min=0, max=P_MAX, step=1, name="position p "))
    R = alt.param(name="offset_r", value=r, bind=alt.binding_range(min=0, max=R_MAX, step=1, name="offset r "))

    def turned(chart: alt.TopLevelMixin, offset: str) -> alt.TopLevelMixin:  # each a transform of its own, in order
        return chart.transform_calculate(
            aq=f"({P.name} + {offset}) * datum.theta", ak=f"{P.name} * datum.theta",
            q_even="datum.qe * cos(datum.aq) - datum.qo * sin(datum.aq)",
            q_odd="datum.qe * sin(datum.aq) + datum.qo * cos(datum.aq)",
            k_even="datum.ke * cos(datum.ak) - datum.ko * sin(datum.ak)",
            k_odd="datum.ke * sin(datum.ak) + datum.ko * cos(datum.ak)",
            part="datum.q_even * datum.k_even + datum.q_odd * datum.k_odd",
        )

    circles = [_circle(ring, i, rounded(1.1 * max(q_norms[i], k_norms[i], 1e-12)))  # each at its own scale
               .properties(title=f"pair {i}, θ = {rounded(data.theta[i], 3):g}") for i in shown]
    grid = turned(alt.concat(*circles, columns=2, spacing=14, data=data), R.name).transform_calculate(  # turned once
        angle="atan2(datum.k_even * datum.q_odd - datum.k_odd * datum.q_even,"
              " datum.k_even * datum.q_even + datum.k_odd * datum.q_odd) * 180 / PI",
    ).resolve_scale(x="independent", y="independent")
    largest = rounded(sum(a * b for a, b in zip(q_norms, k_norms, strict=True)))  # no score is larger
    offsets = turned(alt.Chart(data).transform_calculate(offset=f"sequence(0, {R_MAX + 1})")
                     .transform_flatten(["offset"]), "datum.offset").transform_aggregate(
        score="sum(part)", groupby=["offset"])
    x = alt.X("offset:Q", title="offset r of the query after the key", scale=alt.Scale(domain=[0, R_MAX]))
    y = alt.Y("score:Q", title="score q·k", scale=alt.Scale(domain=[-largest, largest]))
    line = offsets.mark_line(strokeWidth=2, color="#9e9e9e", aria=False).encode(x=x, y=y)
    dots = offsets.transform_calculate(
        label="'score at offset ' + datum.offset + ': ' + format(datum.score, '.8f')").mark_point(
        filled=True, size=16, color="#9e9e9e").encode(x=x, y=y, description=alt.Description("label:N"))
    now = offsets.transform_filter(f"datum.offset == {R.name}")
    here = now.mark_point(filled=True, size=90, color=QUERY, aria=False).encode(x=x, y=y)
    score = now.transform_calculate(
        text=f"'r = ' + {R.name} + ': score ' + format(datum.score, '.4f') + ' at every p'",
        label="'score ' + format(datum.score, '.8f')",
    ).mark_text(align="left", x=0, y=-12, fontSize=12).encode(
        text="text:N", description=alt.Description("label:N"))
    scores = alt.layer(line, dots, here, score).properties(width=270, height=120)
    chart = alt.VConcatChart(vconcat=[grid, scores], spacing=30, params=[P.param, R.param])  # no copy of the subcharts
    which = "all of them" if len(shown) == d // 2 else f"of {d // 2}"
    description = (f"Pairs {', '.join(map(str, shown))} ({which}) of a query at position p + r and a key at position "
                   f"p after RoPE, each as two arrows on a circle at the pair's own scale, with sliders for p and r: "
                   f"p turns both arrows together and keeps the angle between them; under them, the score against "
                   f"the offset r, a line p does not move. At p = {p}, r = {r} the score is {view['score']:.2f}, and "
                   f"it stays so for every p.")
    return Explorer(chart, description, "Move p: both arrows turn, angle and score stay")
