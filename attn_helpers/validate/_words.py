"""Checks of a sentence and a word in it: the words a chapter's explorer is asked about (chapter 3)."""

from __future__ import annotations

from typing import Any


def sentence_word(result: Any, word: object) -> int:
    """The position of the first ``word`` in the sentence of ``result`` (``attend_sentence``'s), after checking both.

    Raises ``ValueError`` when the sentence could not be embedded (with its problems) or does not hold ``word``,
    ``TypeError`` when ``word`` is not a string.
    """
    if not result.ok:
        raise ValueError(f"{result.sentence!r} has no contextual vectors: {result.message}")
    if not isinstance(word, str):
        raise TypeError(f"word must be a string, one of the sentence's words, got {type(word).__name__}: {word!r}.")
    if word not in result.tokens:
        raise ValueError(f"{word!r} is not a word of {result.sentence!r}; pick one of {', '.join(result.tokens)} "
                         "(lower-case, as ah.tokenize splits the sentence).")
    return result.tokens.index(word)
