"""Explorers for local Jupyter (chapters 2 and 3), the plain functions behind them, and chapter 3's sentences.

It holds chapter 2's temperature slider and chapter 3's sentence explorer, with the two sentences about a
"ship" that chapters 3 and 8 read (``ODYSSEY_SENTENCE``, ``ORDER_SENTENCE``). The widgets
(``temperature_slider``, ``sentence_explorer``) only wire ipywidgets to plain functions
(``temperature_weights``, ``attend_sentence`` with its ``SentenceAttention`` result, ``draw_sentence``)
that work, and are tested, without a browser. ipywidgets is imported only when a widget is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import torch

from . import validate
from .attention import attention, softmax
from .glove import GloVe, OutOfVocabularyError, tokenize
from .plotting import plot_attention
from .scaling import entropy, plot_temperature
from .validate import as_float_tensor

if TYPE_CHECKING:
    import ipywidgets

__all__ = [
    "ODYSSEY_SENTENCE",
    "ORDER_SENTENCE",
    "temperature_weights",
    "temperature_slider",
    "SentenceAttention",
    "attend_sentence",
    "draw_sentence",
    "sentence_explorer",
]

#: The sentence from book I of the *Odyssey* where "ship" is a vessel (chapter 3).
ODYSSEY_SENTENCE = "I must go back to my ship and to my crew"
#: The sentence where "ship" is a verb (chapter 3).
ORDER_SENTENCE = "We process and ship your order"


def temperature_weights(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """``softmax(scores / temperature)`` along the last dimension (chapter 2). Shape in = shape out."""
    s = as_float_tensor(scores, "scores")
    temperature = validate.real(
        temperature, "temperature", above=0, why="small values sharpen the weights, large values flatten them"
    )
    return softmax(s / temperature, dim=-1)


def _redraw(out: ipywidgets.Output, draw) -> None:
    with out:
        out.clear_output(wait=True)
        draw()
        plt.show()


def temperature_slider(scores: torch.Tensor, labels: Sequence[str], value: float = 1.0) -> ipywidgets.VBox:
    """A slider for the temperature T (0.1 to 10) that redraws ``softmax(scores / T)`` as bars (chapter 2).

    ``scores`` has shape ``(t,)``; ``labels`` names the keys. Display the returned widget in Jupyter.
    """
    import ipywidgets as widgets

    temperature_weights(scores, value)  # validates scores and value before any widget exists
    if scores.dim() != 1 or len(labels) != scores.shape[0]:
        raise ValueError(f"need scores of shape (t,) and t labels; got {tuple(scores.shape)} and {len(labels)} labels.")
    slider = widgets.FloatLogSlider(value=value, base=10, min=-1, max=1, step=0.05, description="T",
                                    continuous_update=False, readout_format=".2f")
    out = widgets.Output()

    def draw() -> None:
        T = float(slider.value)
        H = float(entropy(temperature_weights(scores, T)))
        plot_temperature(scores, [T], labels, title=f"softmax(scores / T) at T = {T:.2f}: entropy {H:.2f} nats")

    slider.observe(lambda _change: _redraw(out, draw), names="value")
    _redraw(out, draw)
    return widgets.VBox([slider, out])


@dataclass(frozen=True)
class SentenceAttention:
    """What :func:`attend_sentence` found (chapter 3): the tokens, the ``(t, t)`` weights, or what stopped it."""

    sentence: str
    tokens: list[str]
    weights: torch.Tensor | None = None  # (t, t), or None when the sentence could not be embedded
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the sentence could be embedded and ``weights`` holds its attention weights."""
        return self.weights is not None

    @property
    def message(self) -> str:
        """The problems as one text for the reader ("" when there are none)."""
        return "\n".join(self.problems)


def attend_sentence(sentence: str, glove: GloVe, max_tokens: int = 20) -> SentenceAttention:
    """Self-attention weights ``softmax(X Xᵀ / √d)`` of a sentence's GloVe vectors X ``(t, d)`` (chapter 3).

    Never raises for the reader's text: an empty or too long sentence, or words that are not
    in GloVe's vocabulary (each reported with GloVe's suggestion), come back as ``problems``
    with ``weights=None``. This is the logic behind :func:`sentence_explorer`.
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a string, got {type(sentence).__name__}.")
    if not isinstance(glove, GloVe):
        raise TypeError(f"glove must be an attn_helpers.GloVe, got {type(glove).__name__}; load it with GloVe().")
    tokens = tokenize(sentence)
    if not tokens:
        return SentenceAttention(sentence, tokens, problems=["Type a sentence: there are no words to attend to yet."])
    if len(tokens) > max_tokens:
        return SentenceAttention(sentence, tokens, problems=[
            f"The sentence has {len(tokens)} tokens; keep it to {max_tokens} or fewer so the heatmap stays readable."
        ])
    problems = []
    for token in dict.fromkeys(tokens):  # each unknown word once, in order
        try:
            glove[token]
        except OutOfVocabularyError as err:
            problems.append(f"Out of vocabulary: {err}")
    if problems:
        return SentenceAttention(sentence, tokens, problems=problems)
    X = glove.embed(tokens)  # (t, d)
    _, W = attention(X, X, X)  # (t, t), scores divided by √d
    return SentenceAttention(sentence, tokens, weights=W)


def draw_sentence(result: SentenceAttention, ax: plt.Axes | None = None) -> plt.Axes:
    """Heatmap of the weights in ``result`` (from :func:`attend_sentence`); returns the Axes (chapter 3)."""
    if not isinstance(result, SentenceAttention):
        raise TypeError(f"draw_sentence takes the result of attend_sentence, got {type(result).__name__}.")
    if not result.ok:
        raise ValueError(f"Nothing to draw for {result.sentence!r}: {result.message}")
    return plot_attention(result.weights, result.tokens, ax=ax, title=f"Self-attention in “{result.sentence}”")


def sentence_explorer(glove: GloVe, sentence: str = ODYSSEY_SENTENCE) -> ipywidgets.VBox:
    """A text box whose sentence is drawn as a self-attention heatmap when you press Enter (chapter 3).

    Words outside the vocabulary are listed with suggestions instead of raising.
    Display the returned widget in Jupyter.
    """
    import ipywidgets as widgets

    attend_sentence(sentence, glove)  # validates the arguments before any widget exists
    box = widgets.Text(value=sentence, description="Sentence:", continuous_update=False,
                       layout=widgets.Layout(width="95%"))
    out = widgets.Output()

    def draw() -> None:
        result = attend_sentence(box.value, glove)
        if result.ok:
            draw_sentence(result)
        else:
            print(result.message)

    box.observe(lambda _change: _redraw(out, draw), names="value")
    _redraw(out, draw)
    return widgets.VBox([box, out])
