"""attn_helpers.explorers.masks: chapter 7's mask explorer and its view function, against the book's own masks."""

from __future__ import annotations

import json

import pytest
import torch
from messages import INTEGER_BETWEEN, POSITIVE_INTEGER, TRUE_OR_FALSE, raises_saying

import attn_helpers as ah
from attn_helpers.explorers import mask_explorer, mask_view, rounded

T = 6
X = torch.randn(T, 5, generator=torch.Generator().manual_seed(7))  # (t, d)
SCORES = X @ X.T / 5 ** 0.5  # (t, t): the scores ah.attention(X, X, X) softmaxes
TOKENS = ["we", "process", "and", "ship", "<pad>", "<pad>"]


def attention_weights(mask: torch.Tensor) -> torch.Tensor:
    return ah.attention(X, X, X, mask=mask)[1]  # (t, t)


def close(weights: list, expected: torch.Tensor) -> bool:
    return torch.allclose(torch.tensor(weights), expected, atol=1e-7, rtol=0)


def test_without_masks_every_score_is_allowed_and_each_row_is_a_softmax():
    view = mask_view(SCORES, causal=False, length=T)
    assert view["allowed"] == [[True] * T] * T and view["empty_rows"] == []
    assert close(view["weights"], attention_weights(torch.ones(T, T, dtype=torch.bool)))


def test_causal_and_padding_are_the_book_masks_combined_with_and():
    pad = ah.padding_mask([4], max_len=T)  # (1, t): four real tokens
    view = mask_view(SCORES, causal=True, length=4)
    expected = ah.causal_mask(T) & pad  # (t, t), as the chapter combines them
    assert view["allowed"] == expected.tolist()
    assert close(view["weights"], attention_weights(expected))
    assert mask_view(SCORES, causal=False, length=4)["allowed"] == pad.expand(T, T).tolist()


def test_a_causal_window_is_chapter_11s_banded_mask():
    view = mask_view(SCORES, causal=True, length=T, window=2)
    assert view["allowed"] == ah.sliding_window.window_mask(T, window=2).tolist()
    assert close(view["weights"], attention_weights(ah.sliding_window.window_mask(T, window=2)))


def test_without_causal_a_window_reaches_both_ways():
    view = mask_view(SCORES, causal=False, length=5, window=2)
    assert view["allowed"] == [[abs(i - j) < 2 and j < 5 for j in range(T)] for i in range(T)]
    assert mask_view(SCORES, False, T, window=T)["allowed"] == mask_view(SCORES, False, T)["allowed"]  # w = t: all


def test_a_query_with_no_key_left_gets_all_zero_weights_as_in_ah_attention():
    view = mask_view(SCORES, causal=True, length=2, window=2)  # queries 3 to 5 see keys 2 to 5: all padding
    assert view["empty_rows"] == [3, 4, 5]
    assert all(w == [0.0] * T for w in view["weights"][3:])
    assert close(view["weights"], attention_weights(torch.tensor(view["allowed"])))
    assert all(sum(row) == pytest.approx(1.0) for row in view["weights"][:3])


def test_mask_view_checks_its_input():
    with pytest.raises(ValueError, match=r"\(t, t\) matrix"):
        mask_view(SCORES[:, :4], False, 4)
    with raises_saying(ValueError, "length " + INTEGER_BETWEEN + " 1 and 6"):
        mask_view(SCORES, False, 0)
    with raises_saying(ValueError, "length " + INTEGER_BETWEEN + " 1 and 6"):
        mask_view(SCORES, False, 7)
    with raises_saying(ValueError, "window " + POSITIVE_INTEGER + " or None"):
        mask_view(SCORES, False, 3, window=0)
    with raises_saying(TypeError, "causal " + TRUE_OR_FALSE):
        mask_view(SCORES, "yes", 3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        mask_view(SCORES.tolist(), False, 3)


def test_mask_explorer_checks_the_size_and_the_tokens():
    with pytest.raises(ValueError, match=r"t <= 8 .*scores\[:8, :8\]"):
        mask_explorer(torch.zeros(9, 9), [str(i) for i in range(9)])
    with pytest.raises(ValueError, match="t tokens"):
        mask_explorer(SCORES, TOKENS[:5], length=4)
    with pytest.raises(ValueError, match="length"):
        mask_explorer(SCORES, TOKENS, length=9)


def test_the_spec_holds_the_scores_the_controls_and_is_the_same_every_time():
    spec = mask_explorer(SCORES, TOKENS, causal=True, length=4, window=3).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(mask_explorer(SCORES, TOKENS, True, 4, 3).spec(),
                                                          sort_keys=True)
    (rows,) = spec["datasets"].values()
    assert [(r["q"], r["k"], r["query"], r["key"]) for r in rows] == [
        (i, j, TOKENS[i], TOKENS[j]) for i in range(T) for j in range(T)]
    assert [r["s"] for r in rows] == [rounded(x) for x in SCORES.double().flatten().tolist()]
    params = {p["name"]: (p["value"], p["bind"]["input"]) for p in spec["params"]}
    assert params == {"pick": ([{"q": 0}], "select"), "causal": (True, "checkbox"), "real": (4, "range"),
                      "band": (3, "range")}
    heatmap = spec["vconcat"][0]
    assert heatmap["width"] == heatmap["height"] <= 240 and len(json.dumps(spec)) < 100_000
    assert "no key left" in json.dumps(spec) and "At the start 24 of the 36 cells are masked." in spec["description"]
    no_window = mask_explorer(SCORES, TOKENS).spec()["params"]
    assert [p["value"] for p in no_window] == [[{"q": 0}], False, T, 0]  # slider at 0: no window


def test_mask_view_shows_each_rows_arithmetic():
    """score → masked score → exp(s − max) → ÷ Σ → weight, row by row, as the picked row's panel shows it."""
    view = mask_view(SCORES, True, 4, None)
    for i in range(6):
        masked = torch.tensor(view["masked"][i], dtype=torch.float64)
        allowed = torch.tensor(view["allowed"][i])
        assert torch.equal(masked[allowed], SCORES[i].double()[allowed]) and masked[~allowed].eq(-float("inf")).all()
        assert view["max"][i] == masked.max().item()
        e = torch.tensor(view["exp"][i], dtype=torch.float64)
        assert torch.allclose(e, (masked - view["max"][i]).exp(), rtol=0, atol=1e-12)
        assert view["sum"][i] == pytest.approx(e.sum().item())
        assert torch.allclose(e / view["sum"][i], torch.tensor(view["weights"][i], dtype=torch.float64), atol=1e-6)
    empty = mask_view(SCORES, True, 3, 1)
    assert 4 in empty["empty_rows"] and empty["max"][4] == -float("inf") and empty["sum"][4] == 0
    assert empty["exp"][4] == [0.0] * 6


def test_the_explorer_picks_a_query_by_click_or_menu():
    spec = mask_explorer(SCORES, TOKENS, query=3).spec()
    (pick,) = [p for p in spec["params"] if p["name"] == "pick"]
    assert pick["select"] == {"type": "point", "fields": ["q"], "on": "click", "clear": False}
    assert pick["views"] == ["mask_cells"]  # a named view: the spec is the same every time
    assert pick["value"] == [{"q": 3}] and pick["bind"]["labels"][3] == "3: ship"
    with pytest.raises(ValueError, match="query"):
        mask_explorer(SCORES, TOKENS, query=6)
