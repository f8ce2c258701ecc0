"""attn_helpers.explore: the plain functions behind chapters 2 and 3's widgets, the widgets, and chapter 3's numbers."""

import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from messages import POSITIVE_NUMBER, raises_saying

import attn_helpers as ah  # noqa: E402

# The tables published in chapter 15 of Nugues, Python for Natural Language Processing (2024),
# rounded to two decimals: the book's figures must agree with them.
ODYSSEY_COSINES = """
1.00 0.75 0.86 0.76 0.73 0.90 0.35 0.65 0.73 0.90 0.42
0.75 1.00 0.85 0.68 0.87 0.69 0.42 0.69 0.87 0.69 0.45
0.86 0.85 1.00 0.84 0.84 0.81 0.41 0.68 0.84 0.81 0.49
0.76 0.68 0.84 1.00 0.83 0.76 0.49 0.77 0.83 0.76 0.51
0.73 0.87 0.84 0.83 1.00 0.68 0.54 0.86 1.00 0.68 0.51
0.90 0.69 0.81 0.76 0.68 1.00 0.38 0.63 0.68 1.00 0.44
0.35 0.42 0.41 0.49 0.54 0.38 1.00 0.46 0.54 0.38 0.78
0.65 0.69 0.68 0.77 0.86 0.63 0.46 1.00 0.86 0.63 0.49
0.73 0.87 0.84 0.83 1.00 0.68 0.54 0.86 1.00 0.68 0.51
0.90 0.69 0.81 0.76 0.68 1.00 0.38 0.63 0.68 1.00 0.44
0.42 0.45 0.49 0.51 0.51 0.44 0.78 0.49 0.51 0.44 1.00
"""
ORDER_COSINES = """
1.00 0.64 0.70 0.36 0.75 0.64
0.64 1.00 0.61 0.29 0.52 0.67
0.70 0.61 1.00 0.46 0.58 0.69
0.36 0.29 0.46 1.00 0.37 0.52
0.75 0.52 0.58 0.37 1.00 0.63
0.64 0.67 0.69 0.52 0.63 1.00
"""
ODYSSEY_WEIGHTS = """
0.36 0.05 0.07 0.05 0.04 0.19 0.01 0.02 0.04 0.19 0.01
0.14 0.20 0.10 0.06 0.11 0.10 0.03 0.05 0.11 0.10 0.02
0.18 0.09 0.14 0.09 0.08 0.13 0.02 0.04 0.08 0.13 0.02
0.14 0.05 0.09 0.19 0.08 0.12 0.03 0.06 0.08 0.12 0.03
0.11 0.11 0.09 0.09 0.15 0.08 0.04 0.07 0.15 0.08 0.03
0.19 0.03 0.05 0.04 0.03 0.29 0.01 0.02 0.03 0.29 0.01
0.03 0.03 0.03 0.04 0.05 0.03 0.55 0.03 0.05 0.03 0.13
0.10 0.08 0.07 0.10 0.12 0.09 0.04 0.15 0.12 0.09 0.04
0.11 0.11 0.09 0.09 0.15 0.08 0.04 0.07 0.15 0.08 0.03
0.19 0.03 0.05 0.04 0.03 0.29 0.01 0.02 0.03 0.29 0.01
0.06 0.05 0.05 0.06 0.05 0.06 0.21 0.04 0.05 0.06 0.31
"""
ORDER_WEIGHTS = """
0.61 0.06 0.06 0.02 0.20 0.05
0.17 0.50 0.08 0.03 0.11 0.11
0.22 0.12 0.30 0.08 0.15 0.13
0.04 0.03 0.04 0.78 0.05 0.06
0.14 0.03 0.03 0.02 0.74 0.04
0.16 0.13 0.10 0.09 0.18 0.34
"""


def parse(table: str) -> list[list[float]]:
    return [[float(x) for x in line.split()] for line in table.strip().splitlines()]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# chapter 3's numbers, against the published tables

@pytest.mark.parametrize("sentence, published", [
    (ah.explore.ODYSSEY_SENTENCE, ODYSSEY_WEIGHTS), (ah.explore.ORDER_SENTENCE, ORDER_WEIGHTS),
])
def test_attention_tables_match_the_published_ones(glove, sentence, published):
    result = ah.explore.attend_sentence(sentence, glove)
    assert result.ok
    assert ah.tables.weights_table(result.weights, result.tokens).frame.to_numpy().tolist() == parse(published)


@pytest.mark.parametrize("sentence, published", [
    (ah.explore.ODYSSEY_SENTENCE, ODYSSEY_COSINES), (ah.explore.ORDER_SENTENCE, ORDER_COSINES),
])
def test_cosine_tables_match_the_published_ones(glove, sentence, published):
    C = ah.cosine_similarity(glove.embed(sentence))
    assert ah.tables.weights_table(C, ah.tokenize(sentence)).frame.to_numpy().tolist() == parse(published)


def test_ship_rows_to_four_decimals(glove):
    odyssey = ah.explore.attend_sentence(ah.explore.ODYSSEY_SENTENCE, glove).weights[6]
    order = ah.explore.attend_sentence(ah.explore.ORDER_SENTENCE, glove).weights[3]
    assert odyssey.round(decimals=4).tolist() == pytest.approx(
        [0.0303, 0.0302, 0.0276, 0.0407, 0.0459, 0.0343, 0.5530, 0.0297, 0.0459, 0.0343, 0.1281], abs=1e-6)
    assert order.round(decimals=4).tolist() == pytest.approx([0.0431, 0.0258, 0.0419, 0.7811, 0.0490, 0.0590], abs=1e-6)


# weights_table

def test_weights_table_labels_and_rounds():
    shown = ah.tables.weights_table(torch.tensor([[0.123, 0.877], [0.5, 0.5]]), ["a", "b"], ["x", "y"], decimals=1)
    table = shown.frame
    assert isinstance(table, pd.DataFrame)
    assert list(table.index) == ["a", "b"] and list(table.columns) == ["x", "y"]
    assert table.to_numpy().tolist() == [[0.1, 0.9], [0.5, 0.5]]
    # shown with the queries as a named first column: no empty header cell for screen readers
    assert "<th></th>" not in shown._repr_html_() and "<th>query</th>" in shown._repr_html_()
    assert repr(shown).split()[:3] == ["query", "x", "y"]


def test_weights_table_rejects_bad_input():
    with pytest.raises(ValueError, match="one \\(t_q, t_k\\) matrix"):
        ah.tables.weights_table(torch.ones(2, 2, 2), ["a", "b"])
    with pytest.raises(ValueError, match="3 row labels"):
        ah.tables.weights_table(torch.ones(2, 2), ["a", "b", "c"])


# temperature_weights (chapter 2's slider)

def test_temperature_one_is_the_softmax_and_extremes_sharpen_or_flatten():
    s = torch.tensor([2.0, 1.0, 0.5, -1.0])
    assert torch.allclose(ah.explore.temperature_weights(s, 1.0), torch.softmax(s, dim=-1))
    assert float(ah.explore.temperature_weights(s, 0.01)[0]) > 0.999
    assert torch.allclose(ah.explore.temperature_weights(s, 1000.0), torch.full((4,), 0.25), atol=1e-3)
    assert torch.allclose(ah.explore.temperature_weights(s, math.sqrt(8)), torch.softmax(s / math.sqrt(8), dim=-1))


@pytest.mark.parametrize("temperature, error", [
    (0, ValueError), (-1.0, ValueError), (math.inf, ValueError), (math.nan, ValueError), (True, TypeError),
    ("2", TypeError),
])
def test_temperature_must_be_positive_and_finite(temperature, error):
    with raises_saying(error, "temperature " + POSITIVE_NUMBER):
        ah.explore.temperature_weights(torch.tensor([1.0, 2.0]), temperature)


# attend_sentence and draw_sentence (chapter 3's explorer)

def test_attend_sentence_reports_every_unknown_word_with_suggestions(glove):
    result = ah.explore.attend_sentence("Telemachus sailled home to Ithacca", glove)
    assert not result.ok and result.weights is None
    assert len(result.problems) == 3
    assert "'telemachus' is not in the GloVe vocabulary" in result.message
    assert "Close words: sailed" in result.message
    assert "Close words: ithaca" in result.message
    assert all(p.startswith("Out of vocabulary: ") for p in result.problems)


def test_attend_sentence_reports_a_repeated_unknown_word_once(glove):
    result = ah.explore.attend_sentence("zzxqv and zzxqv", glove)
    assert len(result.problems) == 1


def test_attend_sentence_handles_empty_and_long_input(glove):
    assert "Type a sentence" in ah.explore.attend_sentence("   ", glove).message
    long = ah.explore.attend_sentence(" ".join(["the"] * 25), glove, max_tokens=20)
    assert not long.ok and "25 tokens" in long.message


def test_attend_sentence_rows_sum_to_one(glove):
    result = ah.explore.attend_sentence("the cat walks on the street", glove)
    assert result.ok and result.message == ""
    assert result.tokens == ["the", "cat", "walks", "on", "the", "street"]
    assert result.weights.shape == (6, 6)
    assert torch.allclose(result.weights.sum(dim=-1), torch.ones(6))


def test_attend_sentence_rejects_wrong_types(glove):
    with pytest.raises(TypeError, match="sentence must be a string"):
        ah.explore.attend_sentence(["the", "cat"], glove)
    with pytest.raises(TypeError, match="glove must be an attn_helpers.GloVe"):
        ah.explore.attend_sentence("the cat", {"the": torch.ones(50)})


def test_draw_sentence_draws_a_heatmap(glove):
    ax = ah.explore.draw_sentence(ah.explore.attend_sentence("the cat sat", glove))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["the", "cat", "sat"]
    assert "the cat sat" in ax.get_title()


def test_draw_sentence_refuses_a_failed_result(glove):
    with pytest.raises(ValueError, match="Nothing to draw.*zzxqv"):
        ah.explore.draw_sentence(ah.explore.attend_sentence("the zzxqv", glove))
    with pytest.raises(TypeError, match="result of attend_sentence"):
        ah.explore.draw_sentence(torch.ones(2, 2))


# the widgets, driven without a browser

def test_sentence_explorer_reports_unknown_words_instead_of_crashing(glove, capsys):
    box = ah.explore.sentence_explorer(glove, "the cat sat")
    text, out = box.children
    assert isinstance(text, ipywidgets.Text) and isinstance(out, ipywidgets.Output)
    capsys.readouterr()
    text.value = "the zzxqv sat"  # what pressing Enter in the text box does
    assert "Out of vocabulary: 'zzxqv'" in capsys.readouterr().out


def test_sentence_explorer_validates_its_arguments(glove):
    with pytest.raises(TypeError, match="glove must be an attn_helpers.GloVe"):
        ah.explore.sentence_explorer("not glove")
