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


class Explorer:
    """A chart a reader moves, shown as Vega-Lite wherever the chapter is read (chapter 2).

    ``chart`` is an Altair chart whose parameters are bound to controls; ``description`` says in one
    sentence what it shows, for screen readers and for wherever JavaScript cannot run.
    """

    def __init__(self, chart: alt.TopLevelMixin, description: str) -> None:
        if not isinstance(chart, alt.TopLevelMixin):
            raise TypeError(f"chart must be an Altair chart, got {type(chart).__name__}.")
        if not isinstance(description, str) or not description.strip():
            raise ValueError("description must say in a sentence what the explorer shows.")
        self.chart = chart.properties(description=description)
        self.description = description

    def spec(self) -> dict[str, Any]:
        """The Vega-Lite specification: the chapter's data, the controls and the expressions they drive."""
        return self.chart.to_dict()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        data = {MIME_TYPE: self.spec(), "text/plain": f"Explorer: {self.description}"}
        return data, {MIME_TYPE: {"embed_options": EMBED_OPTIONS}}
