"""attn_helpers.plotting: heatmaps with tokens on both axes, readable at sentence length 11."""

import matplotlib.pyplot as plt
import pytest
import torch

import attn_helpers as ah

TOKENS = "i must go back to my ship and to my crew".split()


def test_heatmap_labels_and_annotations():
    w = torch.softmax(torch.randn(11, 11), dim=-1)
    ax = ah.plot_attention(w, TOKENS, title="Odyssey")
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    assert ax.get_title() == "Odyssey" and "key" in ax.get_xlabel() and "query" in ax.get_ylabel()
    assert len(ax.texts) == 121 and ax.texts[0].get_text() == f"{float(w[0, 0]):.2f}"
    width, height = ax.figure.get_size_inches()
    assert width >= 7 and height >= 6  # 11 tokens stay legible
    plt.close("all")


def test_batch_of_one_is_squeezed_and_long_sentences_are_not_annotated():
    ax = ah.plot_attention(torch.full((1, 1, 20, 20), 0.05), [str(i) for i in range(20)])
    assert len(ax.texts) == 0
    plt.close("all")


def test_plot_heads_grid():
    fig = ah.plot_heads(torch.softmax(torch.randn(5, 4, 4), -1), list("abcd"), ncols=3)
    assert len(fig.axes) >= 6 and fig.axes[0].get_title() == "head 0"
    plt.close("all")


@pytest.mark.parametrize("weights, tokens, message", [
    (torch.rand(2, 3, 3), list("abc"), "Pick one sequence and head"),
    (torch.rand(3, 3), list("ab"), "2 query labels and 2 key labels"),
    ([[0.5, 0.5]], ["a"], "must be a torch.Tensor"),
])
def test_bad_input_is_explained(weights, tokens, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ah.plot_attention(weights, tokens)


def test_plot_heads_wants_three_dimensions():
    with pytest.raises(ValueError, match=r"\(h, t, t\)"):
        ah.plot_heads(torch.rand(3, 3), list("abc"))
