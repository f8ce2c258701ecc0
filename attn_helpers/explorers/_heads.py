"""Chapter 5's explorer: the trained heads of the two-back task, side by side, on held-out sequences, and a picked
query's arithmetic in one head."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .. import validate
from ..heads_task import LOOKBACK
from ._explorer import Explorer, check_labels, heatmap_cells, row_panel, vega_softmax

__all__ = ["heads_view", "heads_explorer"]

#: The panels of the chapter's figure fig-ch05-heads, in its order (chapter 5).
PANELS = ("1 head", "2 heads: head 0", "2 heads: head 1", "2 heads: average")
#: The panels that are one head's softmax, whose rows the explorer opens (the average is not a softmax).
HEADS = PANELS[:3]
#: The decimals the explorer keeps of each weight (chapter 5). Trained weights differ in their last bits between
#: CPUs (up to about 5e-6 under the kernel sets of scripts/portability.py); rounded to two decimals, as the chapter's
#: figure and prose show them, they are the same everywhere, and a third decimal would teach nothing more.
DECIMALS = 2
#: The decimals it keeps of each score, for the same reason (the chapter's scores, rounded so, are the same under
#: the four kernel sets). A picked row's arithmetic starts from these scores, so its weights can differ from the
#: cells' (the model's, to two decimals) by a few thousandths.
SCORE_DECIMALS = 2
#: The most tokens (two panels of eight columns of 16 px fit a phone) and sequences (the spec stays small) it
#: shows (chapter 5).
MAX_T, MAX_SEQUENCES = 8, 8
CELL = 16  # px a side


def _settings(w_one: object, w_two: object, panel: object, sequence: object) -> tuple[int, int]:
    """The checks of :func:`heads_view`: ``w_one`` ``(b, 1, t, t)`` and ``w_two`` ``(b, 2, t, t)``, the weights of the
    one-head and two-head models on the same b sequences (t >= 3), ``panel`` one of ``PANELS``
    and ``sequence`` in ``0 … b - 1``; returns the panel's index and the sequence."""
    for name, x, h in (("w_one", w_one, 1), ("w_two", w_two, 2)):
        validate.as_float_tensor(x, name, min_dim=4)
        if x.dim() != 4 or x.shape[1] != h or x.shape[2] != x.shape[3] or x.shape[2] < 3:
            raise ValueError(f"{name} must be the {h}-head model's weights, shape (b, {h}, t, t) with t >= 3 (a "
                             f"token two back), got {tuple(x.shape)}: pass the second output of "
                             f"TwoBackModel(num_heads={h})(x).")
    if w_one.shape[0] != w_two.shape[0] or w_one.shape[2] != w_two.shape[2]:
        raise ValueError(f"w_one {tuple(w_one.shape)} and w_two {tuple(w_two.shape)} must be the two models' weights "
                         f"on the same sequences: the same b and t.")
    if not isinstance(panel, str) or panel not in PANELS:
        raise ValueError(f"panel must be one of {', '.join(map(repr, PANELS))}, got {panel!r}.")
    b = w_one.shape[0]
    return PANELS.index(panel), validate.integer(sequence, "sequence", minimum=0, maximum=b - 1,
                                                 why=f"one of the b = {b}")


def _scores(w_one: torch.Tensor, w_two: torch.Tensor, s_one: object, s_two: object) -> torch.Tensor:
    """The heads' scores ``(b, 3, t, t)`` in ``HEADS``' order, rounded to ``SCORE_DECIMALS``, after checking that
    ``s_one`` and ``s_two`` are shaped as ``w_one`` and ``w_two``."""
    for name, s, w in (("s_one", s_one, w_one), ("s_two", s_two, w_two)):
        validate.as_float_tensor(s, name, min_dim=4)
        if s.shape != w.shape:
            raise ValueError(f"{name} must be the scores q·k/√d_k behind the weights, of their shape {tuple(w.shape)}; "
                             f"got {tuple(s.shape)}.")
    scores = torch.cat([s_one, s_two], dim=1).double()  # (b, 3, t, t)
    return torch.round(scores, decimals=SCORE_DECIMALS)


def _panels(w_one: torch.Tensor, w_two: torch.Tensor) -> torch.Tensor:
    """The four panels of each sequence, as ``PANELS`` names them, in float64: ``(b, 4, t, t)`` (chapter 5).

    ``w_one`` ``(b, 1, t, t)`` and ``w_two`` ``(b, 2, t, t)`` are the one-head and two-head models' weights.
    """
    w_one, w_two = w_one.double(), w_two.double()
    return torch.stack([w_one[:, 0], w_two[:, 0], w_two[:, 1], w_two.mean(dim=1)], dim=1)  # (b, 4, t, t)


def heads_view(w_one: torch.Tensor, w_two: torch.Tensor, panel: str, sequence: int,
               decimals: int | None = DECIMALS, s_one: torch.Tensor | None = None, s_two: torch.Tensor | None = None,
               query: int = 0) -> dict:
    """What :func:`heads_explorer` shows for one panel and one sequence (chapter 5).

    ``w_one`` ``(b, 1, t, t)``, ``w_two`` ``(b, 2, t, t)``; ``panel`` one of ``"1 head"``, ``"2 heads: head 0"``,
    ``"2 heads: head 1"`` and ``"2 heads: average"`` (the chapter's figure's panels). Returns ``weights``
    ``(t, t)`` as lists, and ``previous`` and ``two_back``: the mean weight that queries 2 … t-1 give the key one
    and two places before them, as the chapter's ``weight_at`` measures it. Rounded to ``decimals`` (None: not).
    Given the scores ``s_one`` and ``s_two`` (shaped as the weights) and a head's panel, also ``row``: the
    arithmetic of ``query``'s row from its scores rounded to ``SCORE_DECIMALS``, in float64: ``scores``,
    ``masked`` (the same: the task masks no key), ``exp`` (exp(s − max), t floats), ``max``, ``sum`` and
    ``weights`` (exp / sum).
    """
    p, sequence = _settings(w_one, w_two, panel, sequence)
    weights = _panels(w_one, w_two)[sequence, p]  # (t, t)
    first = max(LOOKBACK)  # the first query with a token two back
    back = [weights.diagonal(offset=-k)[first - k:].mean().item() for k in LOOKBACK]  # queries first … t-1

    def kept(x: float) -> float:
        return x if decimals is None else round(x, decimals)

    view = {"weights": [[kept(w) for w in row] for row in weights.tolist()],
            "previous": kept(back[0]), "two_back": kept(back[1])}
    if s_one is None and s_two is None:
        return view
    query = validate.integer(query, "query", minimum=0, maximum=weights.shape[0] - 1, why="a row of the panel")
    if panel not in HEADS:
        return view | {"row": None}  # an average of two heads, not a softmax of scores
    s = _scores(w_one, w_two, s_one, s_two)[sequence, p, query]  # (t,)
    top = s.max()
    e = torch.exp(s - top)  # (t,)
    return view | {"row": {"scores": s.tolist(), "masked": s.tolist(), "max": top.item(), "exp": e.tolist(),
                           "sum": e.sum().item(), "weights": (e / e.sum()).tolist()}}


def _panel(i: int, t: int, cells: pd.DataFrame, backs: pd.DataFrame, picks: list) -> alt.LayerChart:
    """Panel ``PANELS[i]`` at the slider's sequence: its cells (white to blue by weight, each labelled for screen
    readers, with no number: a cell is too small) under two lines, the panel's name and its mean weights one and
    two back. The param ``tokens`` holds each sequence's token labels; the left panels name the queries, the
    lower ones the keys. A head's cells take the ``picks`` (a click picks the head and the query)."""
    name = PANELS[i]
    tokens = "tokens[sequence][datum.value]"
    left, low = i % 2 == 0, i >= 2
    x = alt.X("k:O", title="key" if low else None,
              axis=alt.Axis(labelExpr=tokens, labelAngle=-90, labels=low, ticks=low, labelFontSize=10))
    y = alt.Y("q:O", title="query" if left else None,
              axis=alt.Axis(labelExpr=tokens, labels=left, ticks=left, labelFontSize=10))
    base = alt.Chart(cells).transform_filter("datum.seq == sequence").transform_calculate(
        w=f"datum.by_panel[{i}]", p=str(i))
    heat = heatmap_cells(base, x, y, stroke_width=0.5,
                         label=f"'{name}: query ' + datum.q + ' (' + tokens[sequence][datum.q] + '), key ' + datum.k"
                               " + ' (' + tokens[sequence][datum.k] + '): weight ' + format(datum.w, '.8f')")
    if name in HEADS:
        pick, head = picks
        picked = pick & head  # this head's picked row
        heat = heat.properties(name=f"heads_cells_{i}").add_params(pick, head).encode(  # named: Altair's names change
            strokeWidth=alt.condition(picked, alt.value(1.5), alt.value(0.5)),
            stroke=alt.condition(picked, alt.value("#d62728"), alt.value("white")))
    queries = f"queries {max(LOOKBACK)}–{t - 1}"
    header = (
        alt.Chart(backs).transform_filter("datum.seq == sequence")
        .transform_calculate(one=f"datum.previous[{i}]", two=f"datum.two_back[{i}]")
        .transform_calculate(
            text=f"['{name}', '1 back ' + format(datum.one, '.2f') + ', 2 back ' + format(datum.two, '.2f')]",
            label=f"'{name}, held-out sequence ' + sequence + ': mean weight of {queries} on the previous token '"
                  " + format(datum.one, '.8f') + ', on the token two back ' + format(datum.two, '.8f')")
        .mark_text(align="left", baseline="top", x=0, y=-34, fontSize=12, lineHeight=15)
        .encode(text="text:N", description=alt.Description("label:N"))
    )
    return alt.layer(heat, header).properties(width=CELL * t, height=CELL * t)


def heads_explorer(w_one: torch.Tensor, w_two: torch.Tensor, labels: Sequence[Sequence[str]], sequence: int = 0, *,
                   s_one: torch.Tensor, s_two: torch.Tensor, head: int = 1, query: int = 2) -> Explorer:
    """The four panels of :func:`heads_view` side by side, small multiples of one of b held-out sequences, under
    a slider for the sequence, and the arithmetic of a picked query's row in one head (chapter 5).

    ``w_one`` ``(b, 1, t, t)`` and ``w_two`` ``(b, 2, t, t)``: the one-head and two-head models' weights on the
    same b ≤ 8 sequences of t ≤ 8 tokens, ``s_one`` and ``s_two`` their scores q·k/√d_k (the same shapes);
    ``labels`` names each sequence's t tokens. A click on a head's row, or the menus "head" and "query row", picks
    the head (0: the one-head model's, 1 and 2: the two-head model's) and the query (``head`` and ``query`` at the
    start) whose row the panel under them shows key by key, from its scores at ``SCORE_DECIMALS`` decimals, as
    :func:`heads_view` computes it; the cells' weights are :func:`heads_view`'s, computed here.
    """
    heads_view(w_one, w_two, PANELS[0], sequence, s_one=s_one, s_two=s_two, query=query)  # checks the input
    b, _, t, _ = w_one.shape
    head = validate.integer(head, "head", minimum=0, maximum=len(HEADS) - 1, why="one of the panels " + ", ".join(
        f"{i}: {name}" for i, name in enumerate(HEADS)))
    if b > MAX_SEQUENCES:
        raise ValueError(f"need the weights of b <= {MAX_SEQUENCES} sequences (more do not fit a page); got b = {b}. "
                         f"Take a few sequences: w_one[:4], w_two[:4].")
    check_labels(t, labels, MAX_T, f"the weights of b lists of t tokens (b = {b})",
                 "Take a few sequences: w_one[:4], w_two[:4], and one list of t labels a sequence.")
    if len(labels) != b:
        raise ValueError(f"need b lists of t labels, one a sequence; got b = {b} and {len(labels)} lists.")
    views = [[heads_view(w_one, w_two, name, s) for name in PANELS] for s in range(b)]
    scores = _scores(w_one, w_two, s_one, s_two).tolist()  # (b, 3, t, t)
    cells = pd.DataFrame([{"seq": s, "q": i, "k": j, "by_panel": [view["weights"][i][j] for view in views[s]],
                           "scores": [scores[s][p][i][j] for p in range(len(HEADS))], "heads": list(range(len(HEADS)))}
                          for s in range(b) for i in range(t) for j in range(t)])
    backs = pd.DataFrame([{"seq": s, "previous": [v["previous"] for v in views[s]],
                           "two_back": [v["two_back"] for v in views[s]]} for s in range(b)])
    params = [
        alt.param(name="sequence", value=sequence,
                  bind=alt.binding_range(min=0, max=b - 1, step=1, name="held-out sequence ")),
        alt.param(name="tokens", value=[list(map(str, row)) for row in labels]),  # the axes' labels
    ]
    queries = alt.binding_select(options=list(range(t)), labels=[str(i) for i in range(t)], name="query row ")
    heads = alt.binding_select(options=list(range(len(HEADS))), labels=list(HEADS), name="head ")
    pick = alt.selection_point(name="pick", fields=["q"], on="click", clear=False, value=[{"q": query}], bind=queries)
    chosen = alt.selection_point(name="head", fields=["p"], on="click", clear=False, value=[{"p": head}], bind=heads)
    grid = alt.concat(*(_panel(i, t, cells, backs, [pick, chosen]) for i in range(len(PANELS))), columns=2, spacing=14)
    row = (alt.Chart(cells).transform_filter("datum.seq == sequence")
           .transform_flatten(["scores", "heads"], as_=["s", "p"])
           .transform_filter(chosen).transform_filter(pick)
           .transform_calculate(query="tokens[sequence][datum.q]", key="tokens[sequence][datum.k]",
                                head=f"{list(HEADS)}[datum.p]"))
    row = alt.Chart(cells, transform=[*row.transform, *vega_softmax("datum.s", by=("q",))])
    name = "datum.head + ', query ' + datum.q + ' (' + datum.query + ')'"
    panel = row_panel(row, t, name=name, score_format=f".{SCORE_DECIMALS}f")
    chart = alt.vconcat(grid, panel, spacing=30).add_params(*params)
    description = (f"Four heatmaps side by side, the attention weights of the two-back task's trained models on one "
                   f"of {b} held-out sequences of {t} tokens, one row per query: the one-head model's head, the "
                   f"two-head model's head 0 and head 1, and their average, under a slider for the sequence, each "
                   f"with its mean weight on the previous token and on the token two back; under them, a picked "
                   f"head's row for one query, key by key: score, exp(s − max), and weight.")
    return Explorer(chart, description, "Slide the sequence; click a row for its softmax")
