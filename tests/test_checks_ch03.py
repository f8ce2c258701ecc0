"""Chapter 3's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch03 as check


def weights(X):
    return torch.softmax(X @ X.T / math.sqrt(X.shape[-1]), dim=-1)


# ex-ch03-cat: the cat walks on the street

def test_cat_street_accepts_reference(glove, capsys):
    check.cat_street_weights(weights(glove.embed(check.CAT_SENTENCE)))
    assert "✓ W_cat: correct" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, hint", [
    (lambda X: torch.softmax(X @ X.T, dim=-1), "not scaled"),
    (lambda X: torch.softmax(X @ X.T / 50, dim=-1), "divided by d = 50"),
    (lambda X: torch.softmax(X @ X.T / math.sqrt(50), dim=0), "softmax over the wrong dimension"),
    (lambda X: ah.cosine_similarity(X), "these are the cosine similarities"),
    (lambda X: torch.softmax(ah.cosine_similarity(X), dim=-1), "softmax of cosine similarities"),
])
def test_cat_street_rejects_mistakes(glove, mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.cat_street_weights(mistake(glove.embed(check.CAT_SENTENCE)))


def test_cat_street_rejects_wrong_shape(glove):
    with pytest.raises(CheckFailed, match="has shape \\(1, 6, 6\\), expected \\(6, 6\\)"):
        check.cat_street_weights(weights(glove.embed(check.CAT_SENTENCE)).unsqueeze(0))


# ex-ch03-predict: every vector doubled

def test_doubled_ship_accepts_reference(glove, capsys):
    check.doubled_ship_row(weights(2 * glove.embed(ah.explore.ODYSSEY_SENTENCE))[6])
    assert "✓ w_ship: correct" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, hint", [
    (lambda X: weights(X)[6], "weights of the original vectors"),
    (lambda X: torch.softmax(2 * X @ X.T / math.sqrt(50), dim=-1)[6], "doubled only one side"),
    (lambda X: weights(2 * X)[:, 6], "you took column 6"),
    (lambda X: torch.softmax(4 * X @ X.T, dim=-1)[6], "without the division by √d"),
    (lambda X: torch.eye(11)[6], "a guess of a one-hot row"),               # the likeliest prediction: all on ship
])
def test_doubled_ship_rejects_mistakes(glove, mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.doubled_ship_row(mistake(glove.embed(ah.explore.ODYSSEY_SENTENCE)))


# ex-ch03-context: contextual_vector(sentence, word)

def make(glove, how):
    def contextual_vector(sentence, word):
        tokens = ah.tokenize(sentence)
        X = glove.embed(tokens)
        return how(X, tokens, tokens.index(word))
    return contextual_vector


def test_contextual_accepts_reference(glove, capsys):
    check.contextual_function(make(glove, lambda X, tokens, i: weights(X)[i] @ X))
    assert capsys.readouterr().out.count("correct") == 4


@pytest.mark.parametrize("how, hint", [
    (lambda X, tokens, i: X[i], "GloVe vector unchanged"),
    (lambda X, tokens, i: torch.softmax(X @ X.T, dim=-1)[i] @ X, "not scaled"),
    (lambda X, tokens, i: (weights(X).T @ X)[i], "weights are transposed"),
    (lambda X, tokens, i: (ah.cosine_similarity(X) @ X)[i], "cosine-weighted sums"),
    (lambda X, tokens, i: weights(X), "you returned the weights"),
])
def test_contextual_rejects_mistakes(glove, how, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.contextual_function(make(glove, how))


def test_contextual_rejects_a_position_from_str_split(glove):
    def contextual_vector(sentence, word):  # right on sentences without punctuation
        i = sentence.lower().split().index(word)
        X = glove.embed(ah.tokenize(sentence))
        return weights(X)[i] @ X

    def tokens_from_split(sentence, word):  # glove has no 'well,'
        tokens = sentence.lower().split()
        X = glove.embed(tokens)
        return weights(X)[tokens.index(word)] @ X

    with pytest.raises(CheckFailed, match="position comes from str.split"):
        check.contextual_function(contextual_vector)
    with pytest.raises(CheckFailed, match="raised OutOfVocabularyError.*ah.tokenize"):
        check.contextual_function(tokens_from_split)


def test_contextual_accepts_the_last_occurrence_as_it_has_the_same_vector(glove, capsys):
    """Issue 30 asked for a case that rejects the word's last occurrence. No check can: without positions, equal
    tokens have equal rows of X X^T, so every occurrence of a word gets the same weights and contextual vector.
    The answer built from the last occurrence is right, and the check accepts it."""
    def last_occurrence(sentence, word):
        tokens = ah.tokenize(sentence)
        i = len(tokens) - 1 - tokens[::-1].index(word)
        X = glove.embed(tokens)
        return weights(X)[i] @ X

    for sentence, word in ((ah.explore.ODYSSEY_SENTENCE, "my"), (check.PUNCTUATED_SENTENCE, "my"),
                           (check.CAT_SENTENCE, "the")):
        tokens = ah.tokenize(sentence)
        first, last = tokens.index(word), len(tokens) - 1 - tokens[::-1].index(word)
        assert first < last
        X = glove.embed(tokens)
        assert torch.allclose(weights(X)[first] @ X, weights(X)[last] @ X, atol=1e-6)
    check.contextual_function(last_occurrence)
    assert capsys.readouterr().out.count("correct") == 4
