"""Explorers: figures a reader moves, with no kernel running (chapters 1, 2, 3, 5, 7, 8, 10, 11, 12 and 13).

Each explorer is a Vega-Lite chart, built with Altair from tensors the chapter computed. Its controls
(sliders, menus, check boxes) and the arithmetic they drive, such as a softmax at the slider's temperature,
run in the reader's browser as Vega expressions, so the chart moves on the website, in JupyterLab and on
Colab alike. :class:`Explorer` is the output a chapter's cell shows; the modules beside this one build one
each, and each has a plain Python function that computes what its chart shows, which the browser tests
compare with the chart.
"""

from . import _explorer, _stretch
from ._average import average_explorer, average_view
from ._contextual import contextual_explorer, contextual_view
from ._explorer import Explorer, rounded
from ._heads import heads_explorer, heads_view
from ._induction import induction_explorer, induction_view
from ._lm_heads import lm_heads_explorer, lm_heads_view
from ._masks import mask_explorer, mask_view
from ._rope import rope_offset_explorer, rope_offset_view
from ._speculative import speculative_explorer, speculative_view
from ._stretch import stretch_explorer, stretch_view
from ._temperature import temperature_explorer, temperature_view
from ._tile_figure import plot_tile_walk
from ._tiles import tile_walk_explorer, tile_walk_view

# The two constants are named here, with their comments, so that the API page documents them under their chapters.
#: What an explorer's output is (chapter 2): Vega-Lite 5, which JupyterLab 4, Colab and the website draw.
MIME_TYPE = _explorer.MIME_TYPE
#: The methods whose frequencies the stretch explorer draws, named as in chapter 11's table (chapter 11).
STRETCH_METHODS = _stretch.STRETCH_METHODS

__all__ = [
    "MIME_TYPE", "Explorer", "rounded",
    "average_explorer", "average_view",  # chapter 1
    "temperature_explorer", "temperature_view",  # chapter 2
    "contextual_explorer", "contextual_view",  # chapter 3
    "heads_explorer", "heads_view",  # chapter 5
    "mask_explorer", "mask_view",  # chapter 7
    "induction_explorer", "induction_view",  # chapter 8
    "tile_walk_explorer", "tile_walk_view", "plot_tile_walk",  # chapter 10
    "rope_offset_explorer", "rope_offset_view", "STRETCH_METHODS", "stretch_explorer", "stretch_view",  # chapter 11
    "speculative_explorer", "speculative_view",  # chapter 12
    "lm_heads_explorer", "lm_heads_view",  # chapter 13
]
