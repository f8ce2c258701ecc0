"""The output every explorer is (chapter 2 on): a Vega-Lite chart with a sentence that describes it."""

from __future__ import annotations

import math
from typing import Any

import altair as alt

from .. import validate

__all__ = ["MIME_TYPE", "Explorer", "rounded"]

#: The output type of an explorer: Vega-Lite 5, which JupyterLab 4 and Colab draw themselves.
MIME_TYPE = "application/vnd.vegalite.v5+json"
#: How Vega draws an explorer: as SVG, where every mark carries a label a screen reader reads; no menu.
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
        self.chart.config.style = {INK: {"stroke": "black", "fill": "black"}}
        self.description = description
        self.caption = caption

    def spec(self) -> dict[str, Any]:
        """The Vega-Lite specification: the chapter's data, the controls and the expressions they drive."""
        return self.chart.to_dict()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        data = {MIME_TYPE: self.spec(), "text/plain": f"Explorer: {self.description}"}
        return data, {MIME_TYPE: {"embed_options": EMBED_OPTIONS}}
