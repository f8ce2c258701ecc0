"""Chapter 3's sentence explorer for local Jupyter, the plain functions behind it, and chapter 2's temperature.

It holds ``temperature_weights`` (chapter 2's softmax at a temperature, which its explorer in
``attn_helpers.explorers`` shows) and chapter 3's sentence explorer, with the two sentences about a "ship" that
chapters 3 and 8 read (``ODYSSEY_SENTENCE``, ``ORDER_SENTENCE``). The widget (``sentence_explorer``, for a
sentence the reader types, which needs a kernel) only wires ipywidgets to plain functions (``attend_sentence``
with its ``SentenceAttention`` result, ``draw_sentence``) that work, and are tested, without a browser.
ipywidgets is imported only when the widget is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import torch

from . import validate
from .attention import attention, softmax
from .glove import GloVe, OutOfVocabularyError, tokenize
from .plotting import plot_attention
from .validate import as_float_tensor

if TYPE_CHECKING:
    import ipywidgets

__all__ = [
    "ODYSSEY_SENTENCE",
    "ORDER_SENTENCE",
    "temperature_weights",
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
