"""attn_helpers.explorers._lm_heads: chapter 13's heads explorer and its view function, on an untrained CharLM."""

from __future__ import annotations

import pytest
import torch

from attn_helpers import language_model, lm_heads, text
from attn_helpers.explorers import Explorer, lm_heads_explorer, lm_heads_view


@pytest.fixture(scope="module")
def weights_and_labels():
    corpus = text.load_shakespeare()
    torch.manual_seed(0)
    model = language_model.CharLM(corpus.vocab)
    passage = lm_heads.held_out(corpus)[:1, :24]
    return model.attention_weights(passage), list(corpus.decode(passage[0]))


def test_the_view_is_the_heads_weights_rounded(weights_and_labels):
    weights, _ = weights_and_labels
    view = lm_heads_view(weights, 2, 3, 10, decimals=None)
    assert torch.allclose(torch.tensor(view["weights"], dtype=torch.float64), weights[1][0, 3].double(), atol=1e-12)
    assert view["row"] == view["weights"][10][:11] and view["top_weight"] == max(view["row"])
    rounded = lm_heads_view(weights, 2, 3, 10)
    assert all(x == round(x, 2) for row in rounded["weights"] for x in row)


def test_the_explorer_holds_every_heads_lower_triangle(weights_and_labels):
    weights, chars = weights_and_labels
    explorer = lm_heads_explorer(weights, chars)
    assert isinstance(explorer, Explorer)
    rows = next(iter(explorer.spec()["datasets"].values()))
    assert len(rows) == 2 * 4 * 24 * 25 // 2
    for r in rows[::37]:
        assert r["w"] == lm_heads_view(weights, r["layer"], r["head"], r["q"])["weights"][r["q"]][r["k"]]
    params = {p["name"]: p for p in explorer.spec()["params"]}
    assert params["query"]["value"] == 23 and params["chars"]["value"] == chars


def test_bad_settings_are_refused(weights_and_labels):
    weights, chars = weights_and_labels
    with pytest.raises(ValueError, match="layer"):
        lm_heads_view(weights, 3, 0, 0)
    with pytest.raises(ValueError, match="one \\(1, h, t, t\\) tensor per layer"):
        lm_heads_view([w[0] for w in weights], 1, 0, 0)
    with pytest.raises(ValueError, match="t <= 24"):
        lm_heads_explorer(weights, chars[:10])
