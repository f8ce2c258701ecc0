"""attn_helpers.explorers._induction: chapter 8's induction-circuit explorer and its view function, on an untrained
two-layer ``circuits.AttentionOnly`` and on weights made by hand."""

from __future__ import annotations

import json

import pytest
import torch

from attn_helpers import circuits
from attn_helpers.explorers import induction_explorer, induction_view
from attn_helpers.explorers._induction import DECIMALS
from attn_helpers.training import LETTERS


def sequences(seeds=range(21, 24)) -> tuple[torch.Tensor, list[int]]:
    """The chapter's kind of held-out sequences, one a seed, and each one's block length n."""
    batches = [circuits.induction_batch(1, generator=torch.Generator().manual_seed(s)) for s in seeds]
    return torch.cat([tokens for tokens, _ in batches]), [int(scored.sum()) + 1 for _, scored in batches]


TOKENS, BLOCKS = sequences()
torch.manual_seed(0)
with torch.no_grad():
    _, (W1, W2) = circuits.AttentionOnly(24, 20, 32, 2)(TOKENS)  # (3, 1, 20, 20) each


def ideal(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A perfect previous-token head and a perfect induction head on ``tokens`` (b, t): (b, 1, t, t) each."""
    b, t = tokens.shape
    w1, w2 = torch.zeros(b, 1, t, t), torch.zeros(b, 1, t, t)
    for s in range(b):
        for i in range(t):
            w1[s, 0, i, max(i - 1, 0)] = 1.0
            earlier = [j for j in range(i) if tokens[s, j] == tokens[s, i]]
            w2[s, 0, i, earlier[-1] + 1 if earlier else i] = 1.0
    return w1, w2


def test_the_copy_is_one_block_back_in_the_repeat_and_absent_before_it():
    for s, n in enumerate(BLOCKS):
        for i in range(20):
            view = induction_view(TOKENS, W1, W2, s, i)
            if i >= 20 - n:
                assert (view["copy"], view["after"]) == (i - n, i - n + 1)
                assert view["previous"] == round(float(W1[s, 0, i - n + 1, i - n]), DECIMALS)
                assert view["induction"] == round(float(W2[s, 0, i, i - n + 1]), DECIMALS)
            else:
                assert view["copy"] is view["after"] is view["previous"] is view["induction"] is None
            assert view["layer2"] == [round(w, DECIMALS) for w in W2[s, 0, i].double().tolist()]


def test_perfect_heads_give_arrows_of_weight_one():
    w1, w2 = ideal(TOKENS)
    n = BLOCKS[0]
    view = induction_view(TOKENS, w1, w2, 0, 19)
    assert view["copy"] == 19 - n and view["previous"] == view["induction"] == 1.0
    assert view["layer2"][20 - n] == 1.0 and sum(view["layer2"]) == 1.0
    assert induction_view(TOKENS, w1, w2, 0, 19, decimals=None)["induction"] == 1.0


def test_the_view_rounds_to_its_decimals_and_none_keeps_every_digit():
    exact = induction_view(TOKENS, W1, W2, 1, 19, decimals=None)
    shown = induction_view(TOKENS, W1, W2, 1, 19)
    assert shown["layer2"] == [round(w, DECIMALS) for w in exact["layer2"]]
    assert any(w != round(w, DECIMALS) for w in exact["layer2"])


def test_induction_view_checks_its_input():
    with pytest.raises(ValueError, match="sequence"):
        induction_view(TOKENS, W1, W2, 3, 0)
    with pytest.raises(ValueError, match="query"):
        induction_view(TOKENS, W1, W2, 0, 20)
    with pytest.raises(ValueError, match=r"\(b, 1, t, t\)"):
        induction_view(TOKENS, W1[:, 0], W2, 0, 0)
    with pytest.raises(ValueError, match="token ids"):
        induction_view(TOKENS.float(), W1, W2, 0, 0)


def test_induction_explorer_checks_the_size_and_the_letters():
    with pytest.raises(ValueError, match="letters must name"):
        induction_explorer(TOKENS, W1, W2, LETTERS[:3])
    many = TOKENS.repeat(3, 1)
    with pytest.raises(ValueError, match="at most 8 sequences"):
        induction_explorer(many, W1.repeat(3, 1, 1, 1), W2.repeat(3, 1, 1, 1), LETTERS)


def test_the_spec_holds_every_settings_view_and_is_the_same_every_time():
    spec = induction_explorer(TOKENS, W1, W2, LETTERS, sequence=1, query=17).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(
        induction_explorer(TOKENS, W1, W2, LETTERS, sequence=1, query=17).spec(), sort_keys=True)
    params = {p["name"]: p for p in spec["params"]}
    assert params["sequence"]["value"] == 1 and params["query"]["value"] == 17
    assert params["letters"]["value"] == [[LETTERS[int(k)] for k in row] for row in TOKENS]
    for s in range(3):
        for i in range(20):
            view = induction_view(TOKENS, W1, W2, s, i)
            assert params["layer2"]["value"][s][i] == view["layer2"]
            copy, after, previous, induction = params["arrows"]["value"][s][i]
            assert copy == (-1 if view["copy"] is None else view["copy"])
            assert (after, previous, induction) == ((-1, 0, 0) if view["copy"] is None else
                                                    (view["after"], view["previous"], view["induction"]))
    assert spec["title"]["text"] == "Slide the query: see the two heads' arrows"
    assert len(json.dumps(spec)) < 40_000
