"""Chapter 8's explorer: the induction circuit on a held-out sequence, for a query picked by a slider: layer 2's weights
from the query, the earlier copy of its token, layer 1's arrow from the position after that copy back to the copy,
and layer 2's arrow from the query to the position after it."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ._explorer import Explorer, heatmap_cells

__all__ = ["induction_view", "induction_explorer"]

#: The decimals the explorer keeps of each weight, as the chapter's figure prints them (chapter 8). No precision makes
#: them the same on every CPU: training through the heads' formation amplifies the last bit, and the models trained
#: under the four kernel sets of scripts/portability.py differ in a shown weight by up to 0.56 (0.44 against 1.00).
DECIMALS = 2
#: The most held-out sequences the explorer holds (chapter 8): the spec stays small.
MAX_SEQUENCES = 8
CELL = 14  # px a side: twenty positions fit a phone
ARC, ARC_1 = "#d62728", "#2ca02c"  # layer 2's arrow and layer 1's: legible on light and dark pages
COPY = "#ff7f0e"  # the earlier copy of the query's token


def induction_view(tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, sequence: int, query: int,
                   decimals: int | None = DECIMALS) -> dict:
    """What :func:`induction_explorer` shows for one held-out sequence and one query position (chapter 8).

    ``tokens`` ``(b, t)``; ``w1``, ``w2`` ``(b, 1, t, t)``: the weights of layer 1 and layer 2 of a two-layer
    ``circuits.AttentionOnly`` on them. Returns ``layer2``, the query's row of layer 2's weights (t); ``copy``, the
    earlier position holding the query's token (None if there is none), ``after`` = copy + 1, ``previous``, layer
    1's weight from ``after`` on ``copy``, and ``induction``, layer 2's weight from the query on ``after`` (None
    without a copy). Weights rounded to ``decimals`` (None: not).
    """
    tokens, w1, w2 = _checked(tokens, w1, w2)
    b, t = tokens.shape
    sequence = validate.integer(sequence, "sequence", minimum=0, maximum=b - 1, why="one of the b sequences")
    query = validate.integer(query, "query", minimum=0, maximum=t - 1, why="a position of the sequence")

    def kept(x: float) -> float:
        return x if decimals is None else round(x, decimals)

    row = tokens[sequence]  # (t,)
    earlier = [j for j in range(query) if row[j] == row[query]]
    copy = earlier[-1] if earlier else None
    w1_s, w2_s = w1[sequence, 0].double(), w2[sequence, 0].double()  # (t, t) each
    view = {"layer2": [kept(w) for w in w2_s[query].tolist()], "copy": copy, "after": None, "previous": None,
            "induction": None}
    if copy is not None:
        after = copy + 1  # never beyond the query: the query's token is not at copy + 1 unless the query is there
        view.update(after=after, previous=kept(float(w1_s[after, copy])), induction=kept(float(w2_s[query, after])))
    return view


def _checked(tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor, ...]:
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype.is_floating_point:
        raise ValueError(f"tokens must be a (b, t) tensor of token ids, got {getattr(tokens, 'shape', tokens)!r}.")
    b, t = tokens.shape
    for name, w in (("w1", w1), ("w2", w2)):
        w = validate.as_float_tensor(w, name)
        if tuple(w.shape) != (b, 1, t, t):
            raise ValueError(f"{name} must be one layer's weights on the b = {b} sequences of t = {t} tokens, shape "
                             f"(b, 1, t, t) = {(b, 1, t, t)}; got {tuple(w.shape)}. Take them from "
                             f"_, (w1, w2) = model(tokens).")
    return tokens, w1, w2


def _arc(t: int, above: bool, start: str, end: str, weight: str, colour: str, text: str, label: str) -> alt.LayerChart:
    """An arrow from position ``start`` to ``end`` (Vega expressions; no arrow where ``end`` < 0): a half ellipse
    above the cells (``above``) or below them, an arrowhead at ``end``, and the ``weight`` at its top."""
    sign = 1 if above else -1
    points = (alt.Chart(pd.DataFrame({"u": [i / 16 for i in range(17)]}))
              .transform_calculate(a=start, e=end)
              .transform_filter("datum.e >= 0")
              .transform_calculate(x="datum.a + (datum.e - datum.a) * datum.u",
                                   y=f"{sign} * (0.5 + min(1.2, 0.6 + 0.1 * abs(datum.e - datum.a))"
                                     " * sin(PI * datum.u))"))
    x, y = alt.X("x:Q", scale=alt.Scale(domain=[-0.5, t - 0.5]), axis=None), alt.Y("y:Q", axis=None)
    line = points.mark_line(strokeWidth=2, color=colour, aria=False).encode(x=x, y=y, order="u:Q")
    head = points.transform_filter("datum.u == 1").mark_point(
        shape="triangle-down" if above else "triangle-up", filled=True, size=40, aria=False, yOffset=-4 * sign,
        color=colour).encode(x=x, y=y)
    words = (points.transform_filter("datum.u == 0.5")
             .transform_calculate(w=weight, text=text, label=label)
             .mark_text(fontSize=12, dy=-9 * sign, baseline="middle", color=colour)
             .encode(x=x, y=y, text="text:N", description=alt.Description("label:N")))
    return alt.layer(line, head, words)


def induction_explorer(tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, letters: Sequence[str],
                       sequence: int = 0, query: int | None = None) -> Explorer:
    """The induction circuit on b ≤ 8 held-out sequences, under sliders for the sequence and the query position
    (chapter 8).

    ``tokens`` ``(b, t)``; ``w1``, ``w2`` ``(b, 1, t, t)``, layers 1 and 2 of a two-layer ``circuits.AttentionOnly``
    on them; ``letters`` names every token id. The query's token and the earlier copy of it are outlined, the cells
    are shaded by layer 2's weights from the query, and two arrows carry their weights: layer 2's, from the query
    to the position after the copy, and layer 1's, from there to the copy. Every number is :func:`induction_view`'s,
    computed here, rounded to ``DECIMALS``; the browser only selects.
    """
    tokens, w1, w2 = _checked(tokens, w1, w2)
    b, t = tokens.shape
    query = t - 1 if query is None else query
    induction_view(tokens, w1, w2, sequence, query)  # checks the sequence and the query
    if b > MAX_SEQUENCES or t > 20:
        raise ValueError(f"need at most {MAX_SEQUENCES} sequences of at most 20 tokens (more does not fit a phone or a "
                         f"page); got b = {b}, t = {t}. Take a few: tokens[:4], w1[:4], w2[:4].")
    if len(letters) <= int(tokens.max()):
        raise ValueError(f"letters must name every token id up to {int(tokens.max())}, got {len(letters)} names.")
    views = [[induction_view(tokens, w1, w2, s, i) for i in range(t)] for s in range(b)]
    names = [[str(letters[int(k)]) for k in row] for row in tokens.tolist()]
    # per sequence and query: [copy (-1: none), after, layer 1's weight, layer 2's weight], and layer 2's row
    arrows = [[[v["copy"] if v["copy"] is not None else -1, v["after"] if v["after"] is not None else -1,
                v["previous"] or 0, v["induction"] or 0] for v in row] for row in views]
    rows = [[v["layer2"] for v in row] for row in views]
    params = [
        alt.param(name="sequence", value=sequence,
                  bind=alt.binding_range(min=0, max=b - 1, step=1, name="held-out sequence ")),
        alt.param(name="query", value=query, bind=alt.binding_range(min=0, max=t - 1, step=1, name="query position ")),
        alt.param(name="letters", value=names), alt.param(name="arrows", value=arrows),
        alt.param(name="layer2", value=rows),
    ]
    here = "arrows[sequence][query]"
    x = alt.X("left:Q", scale=alt.Scale(domain=[-0.5, t - 0.5]), axis=None)
    y = alt.Y("low:Q", scale=alt.Scale(domain=[-2.6, 2.2]), axis=None)
    cells = alt.Chart(pd.DataFrame({"k": range(t)})).transform_calculate(
        left="datum.k - 0.5", right="datum.k + 0.5", low="-0.5", high="0.5",
        letter="letters[sequence][datum.k]", w="layer2[sequence][query][datum.k]",
        role=f"datum.k == query ? 'query, ' : datum.k == {here}[0] ? 'earlier copy, ' : "
             f"datum.k == {here}[1] ? 'after the copy, ' : ''")
    shade = heatmap_cells(cells, x, y, "'position ' + datum.k + ' (' + datum.letter + '), ' + datum.role"
                          " + 'layer 2 weight from the query ' + format(datum.w, '.8f')", x2="right:Q", y2="high:Q")
    letters_text = cells.transform_calculate(mid="0").mark_text(fontSize=12, aria=False).encode(
        x=alt.X("k:Q", scale=alt.Scale(domain=[-0.5, t - 0.5]), axis=None), y=alt.Y("mid:Q", axis=None),
        text="letter:N", color=alt.condition("datum.w > 0.5", alt.value("white"), alt.value("black")))
    positions = cells.transform_calculate(at="-2.4").mark_text(fontSize=10, aria=False).encode(
        x=alt.X("k:Q", scale=alt.Scale(domain=[-0.5, t - 0.5]), axis=None), y=alt.Y("at:Q", axis=None),
        text="k:N")
    outline = cells.transform_filter(f"datum.k == query || datum.k == {here}[0]").mark_rect(
        fill=None, strokeWidth=2.5, aria=False).encode(
        x=x, x2="right:Q", y=y, y2="high:Q",
        stroke=alt.condition("datum.k == query", alt.value("black"), alt.value(COPY)))
    layer2_arc = _arc(t, True, "query", f"{here}[1]", f"{here}[3]", ARC, "format(datum.w, '.2f')",
                      "'layer 2: query ' + query + ' (' + letters[sequence][query] + ') to position ' + datum.e"
                      " + ' (' + letters[sequence][datum.e] + '), weight ' + format(datum.w, '.8f')")
    layer1_arc = _arc(t, False, f"{here}[1]", f"{here}[0]", f"{here}[2]", ARC_1, "format(datum.w, '.2f')",
                      "'layer 1: position ' + datum.a + ' (' + letters[sequence][datum.a] + ') to position '"
                      " + datum.e + ' (' + letters[sequence][datum.e] + '), weight ' + format(datum.w, '.8f')")
    summary = (alt.Chart(pd.DataFrame({"n": [0]}))
               .transform_calculate(
                   text=f"{here}[0] < 0 ? ['query ' + query + ' (' + letters[sequence][query] + '): no earlier '"
                        f" + letters[sequence][query], 'nothing to copy'] : ['query ' + query + ' ('"
                        f" + letters[sequence][query] + '), earlier ' + letters[sequence][query] + ' at ' + {here}[0],"
                        f" 'layer 2 (above) looks at ' + {here}[1] + ', layer 1 (below) at ' + {here}[0]]",
                   label=f"'held-out sequence ' + sequence + ', query ' + query + ' (' + letters[sequence][query]"
                         f" + '): ' + ({here}[0] < 0 ? 'no earlier copy' : 'earlier copy at ' + {here}[0]"
                         f" + ', copies ' + letters[sequence][{here}[1]])")
               .mark_text(align="left", baseline="top", x=0, y=-46, fontSize=12, lineHeight=15)
               .encode(text="text:N", description=alt.Description("label:N")))
    chart = alt.layer(shade, letters_text, positions, outline, layer2_arc, layer1_arc, summary).properties(
        width=CELL * t, height=150, view=alt.ViewConfig(stroke=None)).add_params(*params)
    description = (f"{b} held-out sequences of {t} letters in a row of cells, under a slider for the sequence and one "
                   f"for the query position: the query and the earlier copy of its letter are outlined, the cells "
                   f"are shaded by layer 2's weights from the query, a red arrow above goes from the query to the "
                   f"position after the copy with layer 2's weight, and a green arrow below goes from there to the "
                   f"copy with layer 1's weight. Weights are rounded to {DECIMALS} decimals.")
    return Explorer(chart, description, "Slide the query: see the two heads' arrows")
