"""Chapter 3's explorer: a menu of the chapter's sentences and their words; a word's row of weights, and how far
self-attention moved its vector from GloVe's (its cosine with it and its nearest words)."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from ..attention import attention
from ..explore import SentenceAttention, attend_sentence
from ..glove import GloVe, cosine_similarity
from ._explorer import Explorer, rounded

__all__ = ["contextual_view", "contextual_explorer"]

#: How many nearest words the explorer lists, as the chapter does.
NEAREST = 8
#: The words' axis: as wide in both panels, so that the bars line up and no word is cut.
WORD_AXIS = alt.Axis(minExtent=72, labelLimit=72)
#: The bars' width in pixels: with the words' axis and the numbers after the bars, the explorer fits a phone.
PLOT_WIDTH = 210
#: Room around the panels for the numbers after the longest bars.
PADDING = {"left": 5, "top": 5, "right": 30, "bottom": 10}
#: The words in the sentence's order, the nearest words best first (Vega keeps a menu's earlier words otherwise).
IN_ORDER, BY_RANK = alt.EncodingSortField("j", op="min"), alt.EncodingSortField("rank", op="min")


def _position(result: SentenceAttention, word: object) -> int:
    """The position of the first ``word`` in the sentence of ``result`` (``attend_sentence``'s), after checking both:
    ``ValueError`` when the sentence could not be embedded (with its problems) or does not hold ``word``,
    ``TypeError`` when ``word`` is not a string."""
    if not result.ok:
        raise ValueError(f"{result.sentence!r} has no contextual vectors: {result.message}")
    if not isinstance(word, str):
        raise TypeError(f"word must be a string, one of the sentence's words, got {type(word).__name__}: {word!r}.")
    if word not in result.tokens:
        raise ValueError(f"{word!r} is not a word of {result.sentence!r}; pick one of {', '.join(result.tokens)} "
                         "(lower-case, as ah.tokenize splits the sentence).")
    return result.tokens.index(word)


def contextual_view(sentence: str, word: str, glove: GloVe) -> dict:
    """What :func:`contextual_explorer` shows for the first ``word`` of ``sentence`` (chapter 3).

    ``weights``: its row of ``softmax(X Xᵀ / √d)`` (t floats); ``to_glove``: the cosine of its contextual vector,
    row i of ``softmax(X Xᵀ / √d) X`` ``(d,)``, with its GloVe vector; ``nearest``: that vector's ``NEAREST``
    nearest GloVe words as ``(word, cosine)``; ``new``: those that are neither ``word`` nor among its own nearest.
    Computed in float64, so that the explorer's data are the same on every CPU.
    """
    result = attend_sentence(sentence, glove)
    i = _position(result, word)
    X = glove.embed(result.tokens).double()  # (t, d)
    Y, W = attention(X, X, X)  # (t, d), (t, t)
    nearest = glove.nearest(Y[i], k=NEAREST)  # [(word, cosine)] × NEAREST
    own = {w for w, _ in glove.nearest(word, k=NEAREST)} | {word}
    return {
        "tokens": result.tokens,
        "position": i,
        "weights": W[i].tolist(),
        "to_glove": float(cosine_similarity(Y[i], glove[word].double())),
        "nearest": nearest,
        "new": [w for w, _ in nearest if w not in own],
    }


def _keys(tokens: list[str]) -> list[str]:
    """The words as the chart labels them: a repeated word with its position, "to (4)" and "to (8)"."""
    return [f"{w} ({j})" if tokens.count(w) > 1 else w for j, w in enumerate(tokens)]


def _data(sentences: Mapping[str, str], glove: GloVe) -> tuple[list[dict], list[dict], list[dict]]:
    """The explorer's rows for every "name · word" pair: its weights, its nearest words and its sentence."""
    weights, nearest, summary = [], [], []
    for name, sentence in sentences.items():
        tokens = attend_sentence(sentence, glove).tokens
        for word in dict.fromkeys(tokens):  # each word once, at its first position
            view = contextual_view(sentence, word, glove)
            pair = f"{name} · {word}"
            weights += [{"pair": pair, "j": j, "key": key, "w": rounded(w), "self": j == view["position"]}
                        for j, (key, w) in enumerate(zip(_keys(tokens), view["weights"], strict=True))]
            nearest += [{"pair": pair, "rank": r, "word": w, "cos": rounded(c), "new": w in view["new"]}
                        for r, (w, c) in enumerate(view["nearest"])]
            summary.append({"pair": pair, "word": word, "sentence": sentence, "to_glove": rounded(view["to_glove"])})
    return weights, nearest, summary


def _heading(summary: list[dict], chosen: str, lines: str, label: str) -> alt.Chart:
    """Two lines of text above a panel (Vega expressions of the chosen pair's row), read out as ``label``."""
    return (
        alt.Chart(pd.DataFrame(summary)).transform_filter(chosen)
        .transform_calculate(text=lines, label=label)
        .mark_text(align="left", baseline="bottom", x=0, y=-22, fontSize=12, lineHeight=16)
        .encode(text="text:N", description=alt.Description("label:N"))
    )


def _bars(rows: list[dict], chosen: str, y: str, sort: alt.EncodingSortField, x: str, title: str, dark: str,
          colours: tuple[str, str], label: str, text: str) -> tuple[alt.Chart, alt.Chart]:
    """Bars of ``x`` (from 0 to 1), one a word ``y``, for the chosen pair; in the first colour where ``dark`` is
    true; each read out as ``label`` and followed by ``text`` (Vega expressions)."""
    chart = alt.Chart(pd.DataFrame(rows)).transform_filter(chosen).transform_calculate(label=label, text=text)
    word = alt.Y(f"{y}:N", sort=sort, title=None, axis=WORD_AXIS)
    bars = chart.mark_bar().encode(
        y=word, x=alt.X(f"{x}:Q", title=title, scale=alt.Scale(domain=[0, 1])),
        color=alt.condition(f"datum.{dark}", alt.value(colours[0]), alt.value(colours[1])),
        description=alt.Description("label:N"))
    numbers = chart.mark_text(align="left", dx=3, fontSize=11, aria=False).encode(y=word, x=f"{x}:Q", text="text:N")
    return bars, numbers


def contextual_explorer(sentences: Mapping[str, str], glove: GloVe, start: str | None = None) -> Explorer:
    """A menu of "sentence · word" pairs; the word's row of weights, its cosine with GloVe's vector and its nearest
    words (chapter 3).

    ``sentences`` maps a short name to each sentence; every word of every sentence is in the menu once (a repeated
    word has the same vector, so the same row). ``start`` is the pair shown first (default: the first word of the
    first sentence). Every number is computed here, by :func:`contextual_view`; the browser only selects.
    """
    if not isinstance(sentences, Mapping):
        raise TypeError(f"sentences must be a dict, got {type(sentences).__name__}: map a short name to each "
                        "sentence, e.g. {'Odyssey': ODYSSEY_SENTENCE}.")
    if not sentences:
        raise ValueError("sentences must map a short name to each sentence, e.g. {'Odyssey': ODYSSEY_SENTENCE}.")
    weights, nearest, summary = _data(sentences, glove)
    pairs = [row["pair"] for row in summary]
    start = pairs[0] if start is None else start
    if start not in pairs:
        raise ValueError(f"start must be one of the menu's pairs, such as {pairs[0]!r}; got {start!r}.")
    pair = alt.param(name="pair", value=start, bind=alt.binding_select(options=pairs, name="sentence · word "))
    chosen = f"datum.pair == {pair.name}"

    row = _bars(weights, chosen, "key", IN_ORDER, "w", "weight", "self", ("#0b3c5d", "#6b9ac4"),
                label="'weight on ' + datum.key + ': ' + format(datum.w, '.8f')", text="format(datum.w, '.2f')")
    heading = _heading(summary, chosen, "['“' + datum.sentence + '”', 'row of “' + datum.word + '” (dark):"
                       " its weight on each word']", "'sentence: ' + datum.sentence")
    weights_panel = alt.layer(*row, heading).properties(width=PLOT_WIDTH, height=180)

    near = _bars(nearest, chosen, "word", BY_RANK, "cos", "cosine with the contextual vector", "new",
                 ("#d95f02", "#9db7cf"), text="format(datum.cos, '.2f') + (datum.new ? ' new' : '')",
                 label="'nearest word ' + datum.word + ': cosine ' + format(datum.cos, '.8f')"
                       " + (datum.new ? ', new' : '')")
    moved = _heading(summary, chosen, "['cosine with GloVe’s “' + datum.word + '”: '"
                     f" + format(datum.to_glove, '.4f'), 'its {NEAREST} nearest words (new ones in orange)']",
                     "'cosine between the contextual and GloVe vectors of ' + datum.word + ': '"
                     " + format(datum.to_glove, '.8f')")
    near_panel = alt.layer(*near, moved).properties(width=PLOT_WIDTH, height=16 * NEAREST)

    chart = alt.vconcat(weights_panel, near_panel, spacing=52).add_params(pair).properties(padding=PADDING)
    description = (f"A menu of {len(pairs)} words of the chapter's {len(sentences)} sentences; for the word chosen, "
                   "bars of its self-attention weights on each word of its sentence, the cosine of its contextual "
                   f"vector with its GloVe vector, and that vector's {NEAREST} nearest GloVe words.")
    return Explorer(chart, description, "Pick a word: see its weights and nearest words")
