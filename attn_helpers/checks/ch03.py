"""Self-checks for the exercises of chapter 3 (chapter 3; see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import torch

from ..explore import ODYSSEY_SENTENCE, ORDER_SENTENCE
from ..glove import GloVe, OutOfVocabularyError, cosine_similarity, tokenize
from . import CheckFailed, call, check_tensor

__all__ = ["CAT_SENTENCE", "PUNCTUATED_SENTENCE", "cat_street_weights", "doubled_ship_row", "contextual_function"]

CAT_SENTENCE = "the cat walks on the street"  # seed 000's sentence, exercise ex-ch03-cat
PUNCTUATED_SENTENCE = "Well, I must go back to my ship and my crew"  # exercise ex-ch03-context


@lru_cache(maxsize=1)
def _glove() -> GloVe:
    return GloVe()


def _weights(X: torch.Tensor) -> torch.Tensor:
    return torch.softmax(X @ X.T / math.sqrt(X.shape[-1]), dim=-1)  # (t, t)


def cat_street_weights(W: torch.Tensor) -> None:
    """Exercise ex-ch03-cat: the (6, 6) self-attention weights of "the cat walks on the street"."""
    X = _glove().embed(CAT_SENTENCE)  # (6, 50)
    scores = X @ X.T
    C = cosine_similarity(X)
    check_tensor(W, _weights(X), "W_cat", {
        "the scores are not scaled: divide X Xᵀ by √d = √50 before the softmax.": torch.softmax(scores, dim=-1),
        "you divided by d = 50; the scale is √d = √50.": torch.softmax(scores / 50, dim=-1),
        "softmax over the wrong dimension: each row (one query) must sum to 1, so use dim=-1.":
            torch.softmax(scores / math.sqrt(50), dim=0),
        "these are the cosine similarities; self-attention uses the scaled dot products X Xᵀ / √d and a softmax.": C,
        "you took the softmax of cosine similarities; use the dot products X Xᵀ / √d instead.":
            torch.softmax(C, dim=-1),
    })


def doubled_ship_row(w: torch.Tensor) -> None:
    """Exercise ex-ch03-predict: the weights of "ship" (row 6, shape (11,)) when every vector is doubled."""
    X = _glove().embed(ODYSSEY_SENTENCE)  # (11, 50)
    W2 = _weights(2 * X)
    check_tensor(w, W2[6], "w_ship", {
        "these are the weights of the original vectors; double X first (X2 = 2 * X).": _weights(X)[6],
        "you doubled only one side of the product; with Q = K = 2X the scores grow four times.":
            torch.softmax(2 * X @ X.T / math.sqrt(50), dim=-1)[6],
        "you took column 6; the weights of 'ship' as a query are row 6 of W.": W2[:, 6],
        "these weights put everything on 'ship', as the doubled vectors do without the division by √d (or as "
        "a guess of a one-hot row would). Compute softmax((2X)(2X)ᵀ / √d) and keep the scale: 'ship' keeps "
        "almost all of its weight, not all of it.": torch.softmax(4 * X @ X.T, dim=-1)[6],
    })


def _tokenize_hint(error: BaseException) -> str | None:
    """The hint for an error of a word kept with its punctuation ('well,'), or not found in the tokens."""
    if isinstance(error, (OutOfVocabularyError, ValueError)):
        return "split the sentence with ah.tokenize, as glove.embed does."
    return None


def contextual_function(fn: Callable[[str, str], torch.Tensor]) -> None:
    """Exercise ex-ch03-context: ``fn(sentence, word)`` returns the contextual vector (d,) of ``word``'s first
    occurrence."""
    glove = _glove()
    # "i" first: there the unscaled weights are not one-hot, so "not scaled" and "unchanged" differ; the last
    # sentence has punctuation, which ah.tokenize splits off as tokens of its own and str.split does not
    for sentence, word in ((ODYSSEY_SENTENCE, "i"), (ORDER_SENTENCE, "ship"), (CAT_SENTENCE, "street"),
                           (PUNCTUATED_SENTENCE, "ship")):
        i = tokenize(sentence).index(word)
        X = glove.embed(sentence)  # (t, 50)
        W = _weights(X)
        answer = call(fn, sentence, word, name="contextual_vector", hint=_tokenize_hint)
        if isinstance(answer, torch.Tensor) and answer.shape == W.shape:
            raise CheckFailed(f"{word!r} in {sentence!r}: you returned the weights; return the contextual vector "
                              f"W[i] @ X.")
        mistakes = {
            "this is the word's GloVe vector unchanged; mix it with the others: W[i] @ X.": X[i],
            "the scores are not scaled: divide X Xᵀ by √d before the softmax.": torch.softmax(X @ X.T, dim=-1)[i] @ X,
            "the weights are transposed: output i is Σ_j W[i, j] x_j, row i of W @ X, not of W.T @ X.": (W.T @ X)[i],
            "these are the cosine-weighted sums of the section without softmax; use softmax(X Xᵀ / √d).":
                (cosine_similarity(X) @ X)[i],
        }
        split = sentence.lower().split()
        if word in split and split.index(word) != i:
            mistakes["the position comes from str.split, which leaves punctuation attached to the words ('well,'): "
                     "take it from the book's tokenizer, ah.tokenize, whose tokens are the rows of X."] = \
                W[split.index(word)] @ X
        check_tensor(answer, W[i] @ X, f"contextual vector of {word!r} in {sentence!r}", mistakes)
