"""attn_helpers.explorers.average_explorer (chapter 1): the query in the plane, its scores, weights and output."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attn_helpers.explorers import average_explorer, average_view, rounded
from attn_helpers.explorers._average import _hull

K = torch.tensor([[2.0, 2.0], [1.0, 1.0]])  # chapter 1's keys k1, k2
V = torch.tensor([[3.0, 3.0], [4.0, 4.0]])  # and values v1, v2
LABELS = ["k₁, v₁", "k₂, v₂"]


def test_the_view_at_the_chapters_query_is_the_chapters_example():
    view = average_view(K, V, 45, math.sqrt(2))  # q = (1, 1)
    assert view["query"] == pytest.approx([1.0, 1.0])
    assert view["scores"] == pytest.approx([4.0, 2.0])
    assert view["weights"] == pytest.approx(torch.softmax(torch.tensor([4.0, 2.0]), -1).tolist())
    assert view["output"] == pytest.approx([3.0 + view["weights"][1]] * 2)


def test_the_output_stays_inside_the_hull_and_a_long_query_along_a_key_picks_it():
    X = torch.tensor([[2.0, 2.0], [1.0, 1.0], [-1.5, 1.0]])
    for angle in range(-180, 181, 15):
        for length in (0.0, 0.5, 2.0, 4.0):
            w = torch.tensor(average_view(X, X, angle, length)["weights"])
            assert w.min() >= 0 and w.sum().item() == pytest.approx(1.0)
    along = average_view(K, V, 45, 4.0)  # the query points along k1, stretched
    assert along["weights"][0] > 0.99 and along["output"] == pytest.approx([3.0, 3.0], abs=0.02)
    away = average_view(K, V, -135, 2.0)
    assert away["weights"][1] > away["weights"][0]  # pointing away from both keys, the shorter one wins
    assert average_view(K, V, 10, 0.0)["weights"] == [0.5, 0.5]  # no query: every key alike


def test_the_hull_has_its_corners_in_order():
    assert _hull([(0, 0), (1, 0), (1, 1), (0, 1), (0.5, 0.5)]) == [(0, 0), (1, 0), (1, 1), (0, 1)]
    assert _hull([(3.0, 3.0), (4.0, 4.0)]) == [(3.0, 3.0), (4.0, 4.0)]


def test_the_spec_holds_the_chapters_vectors_and_is_the_same_every_time():
    spec = average_explorer(K, V, LABELS, angle=45, length=1.41).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(
        average_explorer(K, V, LABELS, angle=45, length=1.41).spec(), sort_keys=True)
    rows = next(rows for rows in spec["datasets"].values() if "kx" in rows[0])
    assert [(r["name"], r["kx"], r["ky"], r["vx"], r["vy"]) for r in rows] == [
        ("k₁, v₁", 2.0, 2.0, 3.0, 3.0), ("k₂, v₂", 1.0, 1.0, 4.0, 4.0)]
    params = {p["name"]: p for p in spec["params"]}
    assert params["angle"]["value"] == 45 and params["length"]["value"] == 1.41
    assert spec["title"]["text"] == "Turn and stretch the query: watch the output"
    assert len(json.dumps(spec)) < 20_000 and rounded(1.41) == 1.41


def test_average_explorer_checks_its_input():
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        average_explorer(torch.ones(2, 3), torch.ones(2, 3), LABELS)
    with pytest.raises(ValueError, match="one label a key"):
        average_explorer(K, V, LABELS[:1])
    with pytest.raises(ValueError, match="length"):
        average_explorer(K, V, LABELS, length=5)
    with pytest.raises(ValueError, match="angle"):
        average_view(K, V, float("nan"), 1.0)
