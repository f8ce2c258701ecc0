"""attn_helpers.explorers._heads: chapter 5's heads explorer and its view function, against the chapter's own figure
and its ``weight_at``, on the weights of the book's ``TwoBackModel``."""

from __future__ import annotations

import json

import pytest
import torch
from messages import INTEGER_BETWEEN, raises_saying

from attn_helpers.explorers import heads_explorer, heads_view
from attn_helpers.explorers._heads import DECIMALS, HEADS, PANELS, SCORE_DECIMALS
from attn_helpers.heads_task import TwoBackModel, two_back_batch
from attn_helpers.training import token_labels

B = 3


def model_weights() -> tuple[torch.Tensor, ...]:
    """Untrained one-head and two-head models' weights, (B, 1, 8, 8) and (B, 2, 8, 8), their scores (the same
    shapes), and the B sequences."""
    x, tokens, _ = two_back_batch(B, generator=torch.Generator().manual_seed(5))
    weights, scores = [], []
    for num_heads in (1, 2):
        torch.manual_seed(num_heads)
        model = TwoBackModel(num_heads)
        with torch.no_grad():
            weights.append(model(x)[1])
            d_k = model.d_model // num_heads
            q = model.attn.W_q(x).unflatten(-1, (num_heads, d_k)).transpose(1, 2)  # (B, h, 8, d_k)
            k = model.attn.W_k(x).unflatten(-1, (num_heads, d_k)).transpose(1, 2)  # (B, h, 8, d_k)
            scores.append(q @ k.transpose(-2, -1) / d_k ** 0.5)  # (B, h, 8, 8)
    return weights[0], weights[1], scores[0], scores[1], tokens


W_ONE, W_TWO, S_ONE, S_TWO, TOKENS = model_weights()
SCORES = {"s_one": S_ONE, "s_two": S_TWO}
LABELS = [token_labels(row) for row in TOKENS]


def weight_at(weights: torch.Tensor, back: int) -> torch.Tensor:
    """Chapter 5's measure, as its cell writes it: the mean weight queries 2..t-1 give the key `back` places before
    them, per head: (h,)."""
    return weights.diagonal(offset=-back, dim1=-2, dim2=-1)[..., 2 - back:].mean(dim=(0, -1))


def looking_back(back: int, t: int = 8) -> torch.Tensor:
    """(t, t) weights of a head that puts all its weight on the key ``back`` places before each query (query i <
    back on key 0)."""
    return torch.stack([torch.eye(t)[max(i - back, 0)] for i in range(t)])


def test_the_panels_are_the_chapters_figure():
    for s in range(B):
        figure = torch.stack([W_ONE[s, 0], W_TWO[s, 0], W_TWO[s, 1], W_TWO[s].mean(dim=0)])  # (4, t, t), as cell 28
        for panel, expected in zip(PANELS, figure, strict=True):
            shown = torch.tensor(heads_view(W_ONE, W_TWO, panel, s, decimals=None)["weights"], dtype=torch.float64)
            assert torch.allclose(shown, expected.double(), rtol=0, atol=1e-7), (panel, s)


def test_one_back_and_two_back_are_the_chapters_weight_at_on_one_sequence():
    for s in range(B):
        one, two = W_ONE[s:s + 1], W_TWO[s:s + 1]
        expected = {"1 head": (weight_at(one, 1)[0], weight_at(one, 2)[0]),
                    "2 heads: head 0": (weight_at(two, 1)[0], weight_at(two, 2)[0]),
                    "2 heads: head 1": (weight_at(two, 1)[1], weight_at(two, 2)[1]),
                    "2 heads: average": (weight_at(two, 1).mean(), weight_at(two, 2).mean())}
        for panel, (previous, two_back) in expected.items():
            view = heads_view(W_ONE, W_TWO, panel, s, decimals=None)
            assert view["previous"] == pytest.approx(float(previous), abs=1e-7), (panel, s)
            assert view["two_back"] == pytest.approx(float(two_back), abs=1e-7), (panel, s)


def test_a_previous_token_head_and_a_two_back_head_are_measured_as_such():
    one = looking_back(1)[None, None]  # (1, 1, t, t)
    two = torch.stack([looking_back(2), looking_back(1)])[None]  # (1, 2, t, t): head 0 two back, head 1 one back
    assert heads_view(one, two, "1 head", 0) == {"weights": looking_back(1).tolist(), "previous": 1.0, "two_back": 0.0}
    assert heads_view(one, two, "2 heads: head 0", 0)["two_back"] == 1.0
    average = heads_view(one, two, "2 heads: average", 0)
    assert (average["previous"], average["two_back"]) == (0.5, 0.5)
    assert average["weights"][5] == [0, 0, 0, 0.5, 0.5, 0, 0, 0]


def test_the_view_keeps_two_decimals_rounded_from_the_exact_numbers():
    assert DECIMALS == 2
    for panel in PANELS:
        exact, kept = heads_view(W_ONE, W_TWO, panel, 1, decimals=None), heads_view(W_ONE, W_TWO, panel, 1)
        assert kept["weights"] == [[round(w, 2) for w in row] for row in exact["weights"]]
        assert (kept["previous"], kept["two_back"]) == (round(exact["previous"], 2), round(exact["two_back"], 2))
        assert kept != exact  # the rounding did something
    assert heads_view(W_ONE, W_TWO, "1 head", 0, decimals=3)["previous"] == round(
        heads_view(W_ONE, W_TWO, "1 head", 0, decimals=None)["previous"], 3)


def test_heads_view_checks_its_input():
    with pytest.raises(ValueError, match=r"w_one must be the 1-head model's weights, shape \(b, 1, t, t\)"):
        heads_view(W_TWO, W_TWO, "1 head", 0)
    with pytest.raises(ValueError, match=r"w_two must be the 2-head model's weights.*TwoBackModel\(num_heads=2\)"):
        heads_view(W_ONE, W_TWO[:, :, :2, :2], "1 head", 0)
    with pytest.raises(ValueError, match="t >= 3"):
        heads_view(W_ONE[..., :2, :2], W_TWO[..., :2, :2], "1 head", 0)
    with pytest.raises(ValueError, match="the same b and t"):
        heads_view(W_ONE[:2], W_TWO, "1 head", 0)
    with pytest.raises(ValueError, match="panel must be one of '1 head', '2 heads: head 0'"):
        heads_view(W_ONE, W_TWO, "head 0", 0)
    with raises_saying(ValueError, "sequence " + INTEGER_BETWEEN + " 0 and 2 (one of the b = 3)"):
        heads_view(W_ONE, W_TWO, "1 head", 3)
    with raises_saying(TypeError, "sequence " + INTEGER_BETWEEN, "got 1.0 (a float); pass sequence=1"):
        heads_view(W_ONE, W_TWO, "1 head", 1.0)
    with pytest.raises(TypeError, match="w_one has dtype torch.int64"):
        heads_view(W_ONE.long(), W_TWO, "1 head", 0)
    with pytest.raises(ValueError, match="w_two contains NaN"):
        heads_view(W_ONE, W_TWO.clone().fill_(float("nan")), "1 head", 0)


def test_heads_explorer_checks_the_size_and_the_labels():
    with pytest.raises(ValueError, match=r"b <= 8 sequences.*w_one\[:4\], w_two\[:4\]"):
        heads_explorer(W_ONE.repeat(3, 1, 1, 1), W_TWO.repeat(3, 1, 1, 1), LABELS * 3,
                       s_one=S_ONE.repeat(3, 1, 1, 1), s_two=S_TWO.repeat(3, 1, 1, 1))
    with pytest.raises(ValueError, match="b lists of t labels"):
        heads_explorer(W_ONE, W_TWO, LABELS[:2], **SCORES)
    with pytest.raises(ValueError, match=r"t <= 8 \(more does not fit a phone\) and t labels for each; got t = 8 and "
                                         r"\[7, 7, 7\] labels"):
        heads_explorer(W_ONE, W_TWO, [row[:7] for row in LABELS], **SCORES)
    with pytest.raises(ValueError, match="sequence"):
        heads_explorer(W_ONE, W_TWO, LABELS, sequence=B, **SCORES)


def test_the_spec_holds_every_settings_view_and_is_the_same_every_time():
    spec = heads_explorer(W_ONE, W_TWO, LABELS, sequence=2, **SCORES).spec()
    again = heads_explorer(W_ONE, W_TWO, LABELS, sequence=2, **SCORES).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(again, sort_keys=True)
    cells, backs = sorted(spec["datasets"].values(), key=len, reverse=True)
    assert len(cells) == B * 64 and len(backs) == B
    for s in range(B):
        views = [heads_view(W_ONE, W_TWO, panel, s) for panel in PANELS]
        rows = [r for r in cells if r["seq"] == s]
        assert [(r["q"], r["k"]) for r in rows] == [(i, j) for i in range(8) for j in range(8)]
        assert [r["by_panel"] for r in rows] == [[v["weights"][r["q"]][r["k"]] for v in views] for r in rows]
        assert [r["scores"] for r in rows] == [
            [round(x.item(), SCORE_DECIMALS) for x in (S_ONE[s, 0, r["q"], r["k"]], S_TWO[s, 0, r["q"], r["k"]],
                                                       S_TWO[s, 1, r["q"], r["k"]])] for r in rows]
        assert backs[s] == {"seq": s, "previous": [v["previous"] for v in views],
                            "two_back": [v["two_back"] for v in views]}
    params = {p["name"]: p for p in spec["params"]}
    assert params["sequence"]["value"] == 2 and params["sequence"]["bind"]["max"] == B - 1
    assert params["tokens"]["value"] == LABELS
    grid, _ = spec["vconcat"]  # the panels, then the picked row's arithmetic
    assert len(grid["concat"]) == len(PANELS) and grid["columns"] == 2  # small multiples, side by side
    assert all(panel["width"] == panel["height"] == 8 * 16 for panel in grid["concat"])
    assert params["pick"]["value"] == [{"q": 2}] and params["head"]["value"] == [{"p": 1}]
    assert len(json.dumps(spec)) < 100_000
    assert f"one of {B} held-out sequences of 8 tokens" in spec["description"]


def test_the_scores_are_the_weights_before_the_softmax():
    """What the test's model_weights computes, as the chapter's cell does, is what the models' softmax takes."""
    assert torch.allclose(S_ONE.softmax(-1), W_ONE, atol=1e-6) and torch.allclose(S_TWO.softmax(-1), W_TWO, atol=1e-6)


def test_a_heads_row_is_the_softmax_of_its_rounded_scores_key_by_key():
    for p, panel in enumerate(HEADS):
        for s in range(B):
            for q in (0, 5):
                row = heads_view(W_ONE, W_TWO, panel, s, query=q, **SCORES)["row"]
                scores = torch.cat([S_ONE, S_TWO], dim=1)[s, p, q].double()  # (8,)
                kept = torch.tensor([round(x, SCORE_DECIMALS) for x in scores.tolist()], dtype=torch.float64)
                assert row["scores"] == row["masked"] == kept.tolist()  # the task masks no key
                assert row["max"] == kept.max().item()
                assert row["exp"] == pytest.approx((kept - kept.max()).exp().tolist(), abs=1e-12)
                assert row["sum"] == pytest.approx(sum(row["exp"]), abs=1e-12)
                assert row["weights"] == pytest.approx(torch.softmax(kept, -1).tolist(), abs=1e-12)
                cells = heads_view(W_ONE, W_TWO, panel, s, decimals=None)["weights"][q]
                assert max(abs(a - b) for a, b in zip(row["weights"], cells, strict=True)) < 0.01, (panel, s, q)
    assert heads_view(W_ONE, W_TWO, "2 heads: average", 0, **SCORES)["row"] is None  # not a softmax
    assert "row" not in heads_view(W_ONE, W_TWO, "1 head", 0)  # no scores given
    with pytest.raises(ValueError, match=r"s_two must be the scores q·k/√d_k behind the weights, of their shape"):
        heads_view(W_ONE, W_TWO, "1 head", 0, s_one=S_ONE, s_two=S_TWO[:, :1])
    with raises_saying(ValueError, "query " + INTEGER_BETWEEN + " 0 and 7"):
        heads_view(W_ONE, W_TWO, "1 head", 0, query=8, **SCORES)
