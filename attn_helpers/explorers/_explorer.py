"""The output every explorer is (chapter 2 on): a Vega-Lite chart with a sentence that describes it, and the pieces
that explorers share: a heatmap of weights, a softmax computed by Vega, the picked query's row arithmetic, and the
check that labels fit their data.

The pieces are plain functions of Altair charts and Vega expressions; an explorer module builds its chart from them:

- :func:`vega_softmax`: the transforms computing ``w = exp(s − max) / Σ`` over each query's row, with a mask;
- :func:`heatmap_cells` and :func:`heatmap_numbers`: the cells of a weight matrix and the numbers in them;
- :func:`row_panel`: the picked query's row, key by key (score → masked score → exp(s − max) → ÷ Σ → weight);
- :func:`check_labels`: a clear error when a matrix is too large for a phone or its labels do not match it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt

from .. import validate

__all__ = ["MIME_TYPE", "Explorer", "rounded", "vega_softmax", "heatmap_cells", "heatmap_numbers", "row_panel",
           "check_labels"]

#: The output type of an explorer: Vega-Lite 5, which JupyterLab 4 and Colab draw themselves.
MIME_TYPE = "application/vnd.vegalite.v5+json"
#: How Vega draws an explorer: as SVG, where every mark carries a label a screen reader reads; no menu. JupyterLab
#: reads them from the output's metadata; the website's ``_static/explorers.js`` from the page, where
#: ``_website.VegaLiteOnPage`` writes them (``data-embed-options``): this is their one source.
EMBED_OPTIONS = {"renderer": "svg", "actions": False}


def rounded(x: float, digits: int = 8) -> float:
    """``x`` to ``digits`` significant digits (chapter 2): an explorer's data is the same on every CPU.

    The last bits of a float differ between CPUs; eight digits keep a chart's numbers to 1e-8 relative
    without them.
    """
    x = validate.real(x, "x", why="an explorer's data are finite numbers")
    return 0.0 if x == 0 else round(x, digits - 1 - math.floor(math.log10(abs(x))))


#: The most characters of a caption: one line of bold 13-px text on a 390-px phone.
CAPTION_MAX = 50
#: The size of every explorer's text: the website draws charts 4/3 larger where there is room, which makes it
#: the page's 16 px (``_static/explorers.js``).
FONT_SIZE = 12
#: The style of marks drawn in the text's colour (black, or light on the website's dark pages): a mark with
#: ``style=INK`` and no colour of its own.
INK = "ink"


class Explorer:
    """A chart a reader moves, shown as Vega-Lite wherever the chapter is read (chapter 2).

    ``chart`` is an Altair chart whose parameters are bound to controls; ``description`` says in one
    sentence what it shows, for screen readers and for wherever JavaScript cannot run; ``caption`` is the
    one line drawn at the chart's top: what to move and what to watch.
    """

    def __init__(self, chart: alt.TopLevelMixin, description: str, caption: str) -> None:
        if not isinstance(chart, alt.TopLevelMixin):
            raise TypeError(f"chart must be an Altair chart, got {type(chart).__name__}.")
        for name, text in (("description", description), ("caption", caption)):
            if not isinstance(text, str):
                raise TypeError(f"{name} must be a string, got {type(text).__name__}.")
        if not description.strip():
            raise ValueError("description must say in a sentence what the explorer shows.")
        if not caption.strip() or len(caption) > CAPTION_MAX or "\n" in caption:
            raise ValueError(f"caption must be one line of at most {CAPTION_MAX} characters saying what to move and "
                             f"what to watch; got {caption!r}.")
        title = alt.Title(caption, anchor="start", frame="bounds", fontSize=FONT_SIZE + 1, fontWeight="bold",
                          offset=10)
        self.chart = (chart.properties(description=description, title=title)
                      .configure_axis(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE)
                      .configure_legend(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE))
        # The light colours, written out: JupyterLab's dark theme (vega-embed's "dark") paints the background
        # #333 and the axes white but leaves text marks black; the spec's own colours win over a theme's, so
        # there the explorer stays a legible light card. The website recolours it for its dark pages.
        self.chart.config.background = "white"
        self.chart.config.style = {INK: {"stroke": "black", "fill": "black"},
                                   "guide-label": {"fill": "black"}, "guide-title": {"fill": "black"}}
        self.chart.config.title = alt.TitleConfig(color="black", subtitleColor="black")
        self.chart.config.view = alt.ViewConfig(stroke="#ddd")
        axis = self.chart.config.axis
        axis.domainColor, axis.tickColor, axis.gridColor = "#888", "#888", "#ddd"
        self.description = description
        self.caption = caption

    def spec(self) -> dict[str, Any]:
        """The Vega-Lite specification: the chapter's data, the controls and the expressions they drive."""
        return self.chart.to_dict()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        data = {MIME_TYPE: self.spec(), "text/plain": f"Explorer: {self.description}"}
        return data, {MIME_TYPE: {"embed_options": EMBED_OPTIONS}}


#: The colours of a weight: white (0) to blue (1); a masked cell is grey, apart from every weight.
WEIGHT_SCALE = alt.Scale(scheme="blues", domain=[0, 1])
MASKED_FILL = "#bdbdbd"


def vega_softmax(score: str = "datum.s", by: Sequence[str] = ("q",), allowed: str = "true") -> list[dict]:
    """The Vega-Lite transforms of a softmax over each row of data (chapters 1, 2, 5 and 7): one datum a (query, key).

    ``score`` is the Vega expression of a datum's score s (a field, ``"datum.s"``, or a formula of the controls,
    ``"datum.s / T"``); ``by`` names the fields that make a row (one query: ``("q",)``; all the data: ``()``);
    ``allowed`` is an expression, false where the key is masked. Each datum gains ``s`` (when ``score`` is not
    already ``"datum.s"``), ``allowed``, ``kept`` (s, or null where masked), ``open`` (its row's allowed keys),
    ``top`` (the row's max m of the kept scores), ``e`` (exp(s − m), 0 where masked), ``total`` (Σ e) and ``w``
    (e / Σ; 0 in a row with no key left), as :func:`attn_helpers.softmax` computes a masked row.
    """
    rows = list(by)
    named = [] if score == "datum.s" else [{"calculate": score, "as": "s"}]
    return [
        *named,
        {"calculate": allowed, "as": "allowed"},
        {"calculate": "datum.allowed ? datum.s : null", "as": "kept"},  # max() skips null
        {"calculate": "datum.allowed ? 1 : 0", "as": "one"},
        {"joinaggregate": [{"op": "max", "field": "kept", "as": "top"}, {"op": "sum", "field": "one", "as": "open"}],
         "groupby": rows},
        {"calculate": "datum.allowed ? exp(datum.kept - datum.top) : 0", "as": "e"},
        {"joinaggregate": [{"op": "sum", "field": "e", "as": "total"}], "groupby": rows},
        {"calculate": "datum.open > 0 ? datum.e / datum.total : 0", "as": "w"},  # no key left: all zeros
    ]


def heatmap_cells(base: alt.Chart, x: alt.X, y: alt.Y, label: str, weight: str = "w", allowed: str | None = None,
                  stroke_width: float = 1, **extent: Any) -> alt.Chart:
    """The cells of a weight matrix (chapters 5, 7 and 8): white to blue by ``weight`` (a field in [0, 1]), grey
    (``MASKED_FILL``) where the expression ``allowed`` is false (None: no cell masked), each read out by a
    screen reader as ``label`` (a Vega expression).

    ``base`` is the chart whose data (one datum a cell) and transforms the cells draw; ``x`` and ``y`` are the
    key's and the query's encodings; ``extent`` (``x2=``, ``y2=``) gives cells drawn between two positions.
    """
    color = alt.Color(f"{weight}:Q", scale=WEIGHT_SCALE, legend=None)
    if allowed is not None:
        color = alt.condition(allowed, color, alt.value(MASKED_FILL))
    return (base.transform_calculate(label=label).mark_rect(stroke="white", strokeWidth=stroke_width)
            .encode(x=x, y=y, color=color, description=alt.Description("label:N"), **extent))


def heatmap_numbers(base: alt.Chart, x: alt.X, y: alt.Y, text: str, weight: str = "w") -> alt.Chart:
    """The numbers in the cells of :func:`heatmap_cells` (chapter 7): ``text`` (a Vega expression), white on the
    dark cells (``weight`` above 0.5); not read out, since each cell's label says it already."""
    return base.transform_calculate(shown=text).mark_text(fontSize=10, aria=False).encode(
        x=x, y=y, text=alt.Text("shown:N"),
        color=alt.condition(f"datum.{weight} > 0.5", alt.value("white"), alt.value("black")))


#: The picked row's panel: px a line (one key) and a column.
ROW, COLUMN = 18, 56
#: The panel's columns, left to right.
ROW_COLUMNS = ("key", "score s", "masked", "exp(s−m)", "w = ÷ Σ")
QUERY = "'query ' + datum.q + ' (' + datum.query + ')'"


def row_panel(base: alt.Chart, t: int, name: str = QUERY, score_format: str = ".3f") -> alt.LayerChart:
    """The picked query's row, key by key: score, masked score, exp(s − max) and weight, with max and Σ under
    them (chapters 5 and 7).

    ``base`` holds the t data of the picked row (filter it by the pick), one a key, with the fields ``k`` (the
    key's position), ``key`` (its word), ``s`` and those of :func:`vega_softmax`; ``name`` is a Vega expression
    naming the row (by default ``"query 3 (ship)"``, from the fields ``q`` and ``query``); ``score_format`` is
    d3's format of the scores and the max (``".2f"`` for scores kept to two decimals). Under the keys, two lines:
    the row's name, and its max and Σ. A screen reader reads each key's line at eight decimals, and the line
    "<name>: max …, sum …".
    """
    y = alt.Y("k:O", title=None, axis=None)
    x = alt.X("c:O", scale=alt.Scale(domain=list(ROW_COLUMNS)),
              axis=alt.Axis(orient="top", title=None, labelAngle=0, domain=False, ticks=False))

    def column(n: int, text: str, aria: bool = False) -> alt.Chart:
        return (base.transform_calculate(shown=text, c=f"'{ROW_COLUMNS[n]}'")
                .mark_text(align="right", dx=COLUMN // 2 - 2, fontSize=12, aria=aria)
                .encode(x=x, y=y, text="shown:N"))

    key = column(0, "datum.key", aria=True).transform_calculate(
        label=f"{name} + ', key ' + datum.k + ' (' + datum.key + '): score '"
              " + format(datum.s, '.8f') + ', masked score ' + (datum.allowed ? format(datum.s, '.8f') : '-inf')"
              " + ', exp(s - max) ' + format(datum.e, '.8f') + ', weight ' + format(datum.w, '.8f')",
    ).encode(description=alt.Description("label:N"))
    cells = [column(1, f"format(datum.s, '{score_format}')"),
             column(2, f"datum.allowed ? format(datum.s, '{score_format}') : '−∞'"),
             column(3, "format(datum.e, '.4f')"),
             column(4, "format(datum.w, '.4f')")]
    sums = base.transform_filter("datum.k == 0").transform_calculate(
        text=f"[{name} + ':', datum.open > 0 ? 'max m = ' + format(datum.top, '{score_format}') + ', Σ = '"
             " + format(datum.total, '.4f') : 'no key left: every weight 0']",
        label=f"{name} + ': ' + (datum.open > 0 ? 'max ' + format(datum.top, '.8f')"
              " + ', sum ' + format(datum.total, '.8f') : 'no key left, sum ' + format(datum.total, '.8f'))",
    ).mark_text(align="left", baseline="top", x=0, y=ROW * t + 6, fontSize=12, lineHeight=15).encode(
        text="text:N", description=alt.Description("label:N"))
    return alt.layer(key, *cells, sums).properties(width=COLUMN * len(ROW_COLUMNS), height=ROW * t,
                                                   view=alt.ViewConfig(stroke=None))


def check_labels(t: int, labels: Sequence[object], max_t: int, what: str, hint: str, name: str = "labels") -> None:
    """That t rows of data fit a phone (t ≤ ``max_t``) and ``labels`` names each of the t (chapters 1, 2, 5 and 7).

    ``labels`` is a list of t names, or a list of such lists (one per sequence); ``what`` names the data in the
    error (``"scores of shape (t, t)"``), ``hint`` says how to cut them (``"scores[:8, :8]"``), ``name`` is the
    labels' argument (``"tokens"``).
    """
    nested = bool(labels) and not isinstance(labels[0], str) and isinstance(labels[0], Sequence)
    counts = [len(row) for row in labels] if nested else [len(labels)]
    if t > max_t or any(n != t for n in counts):
        raise ValueError(f"need {what} with t <= {max_t} (more does not fit a phone) and t {name}"
                         f"{' for each' if nested else ''}; got t = {t} and {counts if nested else counts[0]} "
                         f"{name}. {hint}")
