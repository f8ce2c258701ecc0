"""attn_helpers.explorers.contextual: chapter 3's explorer of a word's row of weights and its contextual vector."""

from __future__ import annotations

import json

import pytest
import torch
from messages import raises_saying

import attn_helpers as ah
from attn_helpers.explorers import contextual_explorer, contextual_view
from attn_helpers.explorers._contextual import NEAREST

ODYSSEY, ORDER = ah.explore.ODYSSEY_SENTENCE, ah.explore.ORDER_SENTENCE
RIVER = "she sat on the bank of the river"
SENTENCES = {"Odyssey": ODYSSEY, "order": ORDER, "river bank": RIVER}


@pytest.fixture(scope="module")
def glove() -> ah.GloVe:
    return ah.GloVe(name="6B", dim=50)


def test_the_view_is_the_chapters_computation(glove):
    """The row of attend_sentence's weights, and the cosine and nearest words of the chapter's contextual vector."""
    view = contextual_view(ODYSSEY, "ship", glove)
    X = glove.embed(ODYSSEY)  # (11, 50), float32 as in the chapter
    Y, W = ah.attention(X, X, X)
    i = ah.tokenize(ODYSSEY).index("ship")
    assert view["tokens"] == ah.tokenize(ODYSSEY) and view["position"] == i == 6
    assert view["weights"] == pytest.approx(ah.explore.attend_sentence(ODYSSEY, glove).weights[i].tolist(), abs=1e-6)
    assert view["weights"] == pytest.approx(W[i].tolist(), abs=1e-6) and sum(view["weights"]) == pytest.approx(1)
    assert view["to_glove"] == pytest.approx(float(ah.cosine_similarity(Y[i], glove["ship"])), abs=1e-6)
    chapters = glove.nearest(Y[i], k=NEAREST)
    assert [w for w, _ in view["nearest"]] == [w for w, _ in chapters]
    assert [c for _, c in view["nearest"]] == pytest.approx([c for _, c in chapters], abs=2e-4)


def test_the_chapters_findings_show(glove):
    """The Odyssey "ship" moved more than the order's, and "crew" entered its neighbours (chapter 3's prose)."""
    odyssey, order = contextual_view(ODYSSEY, "ship", glove), contextual_view(ORDER, "ship", glove)
    assert round(odyssey["to_glove"], 4) == 0.9478 and round(order["to_glove"], 4) == 0.9843
    assert round(odyssey["weights"][6], 2) == 0.55 and round(order["weights"][3], 2) == 0.78
    assert "crew" in odyssey["new"] and order["new"] == []
    own = {w for w, _ in glove.nearest("ship", k=NEAREST)}
    assert all(w not in own and w != "ship" for w in odyssey["new"])
    assert set(odyssey["new"]) <= {w for w, _ in odyssey["nearest"]}


def test_a_repeated_word_is_its_first_position_and_has_the_same_row_there(glove):
    view = contextual_view(RIVER, "the", glove)
    assert view["position"] == 3
    X = glove.embed(RIVER).double()
    _, W = ah.attention(X, X, X)
    assert torch.allclose(W[3], W[6]) and view["weights"] == pytest.approx(W[6].tolist(), abs=1e-12)


def test_the_view_checks_its_input(glove):
    with pytest.raises(ValueError, match=r"'boat' is not a word of .*pick one of i, must, go"):
        contextual_view(ODYSSEY, "boat", glove)
    with pytest.raises(ValueError, match=r"lower-case"):
        contextual_view(ODYSSEY, "I", glove)
    with pytest.raises(TypeError, match="word must be a string"):
        contextual_view(ODYSSEY, 6, glove)
    with pytest.raises(ValueError, match=r"no contextual vectors: Out of vocabulary: 'ithacca'.*Close words: ithaca"):
        contextual_view("home to Ithacca", "home", glove)
    with pytest.raises(TypeError, match="glove must be an attn_helpers.GloVe"):
        contextual_view(ODYSSEY, "ship", None)


@pytest.fixture(scope="module")
def spec(glove) -> dict:
    return contextual_explorer(SENTENCES, glove, start="Odyssey · ship").spec()


def test_the_menu_holds_each_word_of_each_sentence_once(spec, glove):
    (param,) = spec["params"]
    options = param["bind"]["options"]
    expected = [f"{name} · {w}" for name, s in SENTENCES.items() for w in dict.fromkeys(ah.tokenize(s))]
    assert options == expected and len(options) == 9 + 6 + 7
    assert param["name"] == "pair" and param["value"] == "Odyssey · ship" and param["bind"]["input"] == "select"


def test_the_data_are_the_views_rounded(spec, glove):
    """Every number in the spec is the view's, to eight significant digits; the browser computes none."""
    data = spec["datasets"]
    by_field = {next(iter(rows[0].keys() & {"w", "cos", "to_glove"})): rows for rows in data.values()}
    for name, sentence in SENTENCES.items():
        for word in ("ship", "order", "bank", "the", "crew"):
            if word not in ah.tokenize(sentence):
                continue
            view, pair = contextual_view(sentence, word, glove), f"{name} · {word}"
            assert [r["w"] for r in by_field["w"] if r["pair"] == pair] == [
                ah.explorers.rounded(w) for w in view["weights"]]
            assert [(r["word"], r["cos"], r["new"]) for r in by_field["cos"] if r["pair"] == pair] == [
                (w, ah.explorers.rounded(c), w in view["new"]) for w, c in view["nearest"]]
            (summary,) = [r for r in by_field["to_glove"] if r["pair"] == pair]
            assert summary["to_glove"] == ah.explorers.rounded(view["to_glove"]) and summary["sentence"] == sentence
    keys = [r["key"] for r in by_field["w"] if r["pair"] == "Odyssey · ship"]
    assert keys == ["i", "must", "go", "back", "to (4)", "my (5)", "ship", "and", "to (8)", "my (9)", "crew"]


def test_the_spec_is_deterministic_small_and_labelled(spec, glove):
    again = contextual_explorer(SENTENCES, glove, start="Odyssey · ship").spec()
    text = json.dumps(spec, sort_keys=True)
    assert text == json.dumps(again, sort_keys=True)
    assert len(text) < 100_000
    assert "format(datum.w, '.8f')" in text and "format(datum.cos, '.8f')" in text  # what the browser tests read


def test_the_explorer_checks_its_input(glove):
    with pytest.raises(ValueError, match="start must be one of the menu's pairs, such as 'Odyssey · i'"):
        contextual_explorer(SENTENCES, glove, start="Odyssey · boat")
    with raises_saying(TypeError, "sentences must be a dict, got list", "map a short name to each sentence"):
        contextual_explorer([ODYSSEY], glove)
    with raises_saying(ValueError, "sentences must map a short name to each sentence"):
        contextual_explorer({}, glove)
    with pytest.raises(ValueError, match="not in the GloVe vocabulary"):
        contextual_explorer({"typo": "Telemachus sailed home to Ithacca"}, glove)


def test_the_view_names_the_words_to_pick_from(glove):
    assert contextual_view(ORDER, "order", glove)["position"] == 5
    with pytest.raises(ValueError, match="pick one of we, process, and, ship, your, order"):
        contextual_view(ORDER, "orders", glove)
    with pytest.raises(TypeError, match="word must be a string, one of the sentence's words, got int"):
        contextual_view(ORDER, 5, glove)
