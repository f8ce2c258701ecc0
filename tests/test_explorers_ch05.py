"""attn_helpers.explorers._heads: chapter 5's heads explorer and its view function, against the chapter's own figure
and its ``weight_at``, on the weights of the book's ``TwoBackModel``."""

from __future__ import annotations

import json

import pytest
import torch
from messages import INTEGER_BETWEEN, raises_saying

from attn_helpers.explorers import heads_explorer, heads_view
from attn_helpers.explorers._heads import DECIMALS, PANELS
from attn_helpers.heads_task import TwoBackModel, two_back_batch
from attn_helpers.training import token_labels

B = 3


def model_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Untrained one-head and two-head models' weights, (B, 1, 8, 8) and (B, 2, 8, 8), and the B sequences."""
    x, tokens, _ = two_back_batch(B, generator=torch.Generator().manual_seed(5))
    weights = []
    for num_heads in (1, 2):
        torch.manual_seed(num_heads)
        with torch.no_grad():
            weights.append(TwoBackModel(num_heads)(x)[1])
    return weights[0], weights[1], tokens


W_ONE, W_TWO, TOKENS = model_weights()
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
    with pytest.raises(ValueError, match=r"b <= 8 sequences of t <= 8 tokens.*w_one\[:4\], w_two\[:4\]"):
        heads_explorer(W_ONE.repeat(3, 1, 1, 1), W_TWO.repeat(3, 1, 1, 1), LABELS * 3)
    with pytest.raises(ValueError, match="b lists of t labels"):
        heads_explorer(W_ONE, W_TWO, LABELS[:2])
    with pytest.raises(ValueError, match="b lists of t labels"):
        heads_explorer(W_ONE, W_TWO, [row[:7] for row in LABELS])
    with pytest.raises(ValueError, match="sequence"):
        heads_explorer(W_ONE, W_TWO, LABELS, sequence=B)


def test_the_spec_holds_every_settings_view_and_is_the_same_every_time():
    spec = heads_explorer(W_ONE, W_TWO, LABELS, sequence=2).spec()
    again = heads_explorer(W_ONE, W_TWO, LABELS, sequence=2).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(again, sort_keys=True)
    cells, backs = sorted(spec["datasets"].values(), key=len, reverse=True)
    assert len(cells) == B * 64 and len(backs) == B
    for s in range(B):
        views = [heads_view(W_ONE, W_TWO, panel, s) for panel in PANELS]
        rows = [r for r in cells if r["s"] == s]
        assert [(r["q"], r["k"]) for r in rows] == [(i, j) for i in range(8) for j in range(8)]
        assert [r["by_panel"] for r in rows] == [[v["weights"][r["q"]][r["k"]] for v in views] for r in rows]
        assert backs[s] == {"s": s, "previous": [v["previous"] for v in views],
                            "two_back": [v["two_back"] for v in views]}
    params = {p["name"]: p for p in spec["params"]}
    assert params["sequence"]["value"] == 2 and params["sequence"]["bind"]["max"] == B - 1
    assert params["tokens"]["value"] == LABELS
    assert len(spec["concat"]) == len(PANELS) and spec["columns"] == 2  # small multiples, side by side
    assert all(panel["width"] == panel["height"] == 8 * 16 for panel in spec["concat"])
    assert len(json.dumps(spec)) < 100_000
    assert f"one of {B} held-out sequences of 8 tokens" in spec["description"]
