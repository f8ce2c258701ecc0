"""Chapter 3's contextual explorer on the built website: for each sentence · word picked (from the keyboard and by
a click), the row of weights, the cosine with GloVe and the nearest words it shows equal
``attn_helpers.explorers.contextual_view`` to 1e-6."""

from __future__ import annotations

import pytest
from explorer_browser import assert_fits_a_phone, choose, chosen, labels, labels_after, numbers, open_explorers, press

import attn_helpers as ah
from attn_helpers.explorers._contextual import _keys

PAGE = "chapters/03_glove_contextual.html"
MENU = "sentence · word"
#: The chapter's sentences, by the names its menu gives them (cell "sentences = ...").
SENTENCES = {"Odyssey": ah.explore.ODYSSEY_SENTENCE, "order": ah.explore.ORDER_SENTENCE,
             "river bank": "she sat on the bank of the river"}


@pytest.fixture(scope="module")
def glove() -> ah.GloVe:
    return ah.GloVe(name="6B", dim=50)


def shown(explorer_labels: list[str]) -> dict:
    """What the chart shows, read from its marks' labels: the sentence, the bars of weights, the cosine with GloVe
    and the nearest words with their cosines (", new" for those the word's own GloVe vector does not have)."""
    def after(prefix: str) -> list[str]:
        return [label.removeprefix(prefix) for label in explorer_labels if label.startswith(prefix)]

    weights = [label.rsplit(": ", 1) for label in after("weight on ")]
    nearest = [label.split(": cosine ") for label in after("nearest word ")]
    (sentence,) = after("sentence: ")
    (to_glove,) = after("cosine between the contextual and GloVe vectors of ")
    return {"sentence": sentence, "keys": [key for key, _ in weights], "weights": [float(w) for _, w in weights],
            "to_glove": numbers(to_glove)[-1], "nearest": [(word, numbers(c)[0]) for word, c in nearest],
            "new": [word for word, c in nearest if c.endswith(", new")]}


def assert_matches_python(explorer, pair: str, glove: ah.GloVe) -> None:
    name, word = pair.split(" · ")
    seen, view = shown(labels(explorer)), ah.explorers.contextual_view(SENTENCES[name], word, glove)
    assert seen["sentence"] == SENTENCES[name] and seen["keys"] == _keys(view["tokens"]), pair
    assert seen["weights"] == pytest.approx(view["weights"], abs=1e-6), f"weights of {pair}"
    assert seen["to_glove"] == pytest.approx(view["to_glove"], abs=1e-6), f"cosine with GloVe of {pair}"
    assert [w for w, _ in seen["nearest"]] == [w for w, _ in view["nearest"]], f"nearest words of {pair}"
    assert [c for _, c in seen["nearest"]] == pytest.approx([c for _, c in view["nearest"]], abs=1e-6), pair
    assert seen["new"] == view["new"], f"new neighbours of {pair}"


def test_the_contextual_explorer_shows_what_python_computes(site_tab, glove):
    explorer = open_explorers(site_tab, PAGE).first
    assert chosen(explorer, MENU) == "Odyssey · ship"
    assert_matches_python(explorer, "Odyssey · ship", glove)
    assert "crew" in shown(labels(explorer))["new"]  # the chapter's finding: "crew" entered its neighbours
    before = labels(explorer)
    press(explorer, MENU, "ArrowDown")  # the next word of the menu, from the keyboard
    labels_after(explorer, before)
    assert chosen(explorer, MENU) == "Odyssey · and"
    assert_matches_python(explorer, "Odyssey · and", glove)
    for pair in ("order · ship", "river bank · bank", "river bank · the"):
        before = labels(explorer)
        choose(explorer, MENU, pair)
        labels_after(explorer, before)
        assert_matches_python(explorer, pair, glove)
    assert shown(labels(explorer))["keys"] == ["she", "sat", "on", "the (3)", "bank", "of", "the (6)", "river"]


def test_the_explorer_fits_a_phone_screen(site_tab):
    explorer = open_explorers(site_tab, PAGE).first
    assert_fits_a_phone(explorer)
