"""Chapter 11's explorers: RoPE's score at an offset, and RoPE's frequencies stretched by a scale s."""

from __future__ import annotations

import json
import math

import pytest
import torch
from messages import MUST_BE_EVEN, NON_NEGATIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers.explorers import rounded

Q, K = torch.randn(2, 8, generator=torch.Generator().manual_seed(11)).double()  # (d,) each, d = 8


def test_rope_offset_view_rotates_as_chapter_8s_rope():
    view = ah.explorers.rope_offset_view(Q, K, p=5, r=3)
    assert view["q"] == pytest.approx(ah.position.rope(Q[None], [8])[0].tolist(), abs=1e-12)
    assert view["k"] == pytest.approx(ah.position.rope(K[None], [5])[0].tolist(), abs=1e-12)
    theta = ah.position.frequencies(8)
    assert view["q"] == pytest.approx(ah.long_context.rope_with_frequencies(Q[None], theta, [8])[0].tolist(), abs=1e-12)
    assert sum(view["pairs"]) == pytest.approx(view["score"], abs=1e-12)
    q_rot, k_rot = torch.tensor(view["q"], dtype=torch.float64), torch.tensor(view["k"], dtype=torch.float64)
    assert view["score"] == pytest.approx(float(q_rot @ k_rot), abs=1e-12)


def test_the_score_depends_on_the_offset_only():
    """Pair i's share is |q_i| |k_i| cos(r θ_i + angle of q_i - angle of k_i): no p in it (equation eq-ch08-rope)."""
    theta = ah.position.frequencies(8)
    q, k = torch.view_as_complex(Q.view(4, 2).contiguous()), torch.view_as_complex(K.view(4, 2).contiguous())  # (4,)
    for r in (0, 1, 7, 32):
        by_formula = (q * k.conj() * torch.polar(torch.ones(4, dtype=torch.float64), r * theta)).real  # (4,)
        for p in (0, 3, 64):
            view = ah.explorers.rope_offset_view(Q, K, p, r)
            assert view["pairs"] == pytest.approx(by_formula.tolist(), abs=1e-12), f"p = {p}, r = {r}"
    assert ah.explorers.rope_offset_view(Q, K, 0, 1)["score"] != pytest.approx(
        ah.explorers.rope_offset_view(Q, K, 0, 2)["score"], abs=1e-3)


def test_rope_offset_view_checks_its_input():
    with pytest.raises(ValueError, match=r"same shape \(d,\), got shapes \(8,\) and \(6,\)"):
        ah.explorers.rope_offset_view(Q, K[:6], 0, 1)
    with pytest.raises(ValueError, match=r"shapes \(2, 8\) and \(2, 8\).*q\[0\]"):
        ah.explorers.rope_offset_view(torch.zeros(2, 8), torch.ones(2, 8), 0, 1)
    with raises_saying(ValueError, MUST_BE_EVEN + ", got 7"):
        ah.explorers.rope_offset_view(Q[:7], K[:7], 0, 1)
    with pytest.raises(TypeError, match="k has dtype torch.int64"):
        ah.explorers.rope_offset_view(Q, torch.ones(8, dtype=torch.long), 0, 1)
    with raises_saying(ValueError, "p " + NON_NEGATIVE_INTEGER):
        ah.explorers.rope_offset_view(Q, K, -1, 1)
    with pytest.raises(ValueError, match=r"p \+ r >= 0"):
        ah.explorers.rope_offset_view(Q, K, 2, -3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        ah.explorers.rope_offset_view(Q.tolist(), K, 0, 1)


def test_the_angle_between_the_arrows_is_r_theta_plus_the_unrotated_angle():
    """Pair i's arrows turn by (p + r) θ_i and p θ_i: the angle from k's to q's is r θ_i plus the one at p = r = 0,
    and p leaves it, the score and the score line as they are."""
    theta = ah.position.frequencies(8)
    start = torch.tensor(ah.explorers.rope_offset_view(Q, K, 0, 0)["angles"], dtype=torch.float64)
    for r in (0, 1, 7, 32):
        turned = torch.remainder(start + torch.rad2deg(r * theta) + 180, 360) - 180  # (4,), in [-180, 180)
        views = [ah.explorers.rope_offset_view(Q, K, p, r) for p in (0, 3, 64)]
        for view in views:
            gap = (torch.tensor(view["angles"], dtype=torch.float64) - turned + 180) % 360 - 180
            assert gap.abs().max() < 1e-9
            assert view["scores"][r] == pytest.approx(view["score"], abs=1e-12)
            assert view["scores"] == pytest.approx(views[0]["scores"], abs=1e-12)
    view = ah.explorers.rope_offset_view(Q, K, 5, 3)
    norms = lambda x: torch.tensor(x, dtype=torch.float64).view(4, 2).norm(dim=-1)  # noqa: E731
    assert norms(view["q"]) == pytest.approx(Q.view(4, 2).norm(dim=-1).tolist(), abs=1e-12)
    cosines = torch.cos(torch.deg2rad(torch.tensor(view["angles"], dtype=torch.float64)))
    assert view["pairs"] == pytest.approx((norms(view["q"]) * norms(view["k"]) * cosines).tolist(), abs=1e-12)
    assert len(view["scores"]) == 33 and len(set(round(x, 6) for x in view["scores"])) > 30


def test_rope_offset_explorer_carries_the_rounded_vectors_and_two_sliders():
    spec = ah.explorers.rope_offset_explorer(Q, K).spec()
    (rows,) = [rows for rows in spec["datasets"].values() if "qe" in rows[0]]
    assert [row["qe"] for row in rows] == [rounded(x) for x in Q[0::2].tolist()]
    assert [row["ko"] for row in rows] == [rounded(x) for x in K[1::2].tolist()]
    assert [row["theta"] for row in rows] == [1.0, 0.1, 0.01, 0.001]
    sliders = {param["name"]: param["bind"] for param in spec["params"]}
    assert sliders["position_p"]["max"] == 64 and sliders["offset_r"]["max"] == 32
    assert len(json.dumps(spec)) < 100_000
    with pytest.raises(ValueError, match="slider's range"):
        ah.explorers.rope_offset_explorer(Q, K, p=65)
    with pytest.raises(ValueError, match="slider's range"):
        ah.explorers.rope_offset_explorer(Q, K, p=10, r=-1)


def test_rope_offset_explorer_draws_four_pairs_at_most_and_says_which():
    assert "Pairs 0, 1, 2, 3 (all of them)" in ah.explorers.rope_offset_explorer(Q, K).description
    big = ah.explorers.rope_offset_explorer(torch.ones(128), torch.ones(128))
    assert "Pairs 0, 21, 42, 63 (of 64)" in big.description
    titles = [panel["title"] for panel in big.spec()["vconcat"][0]["concat"]]
    assert titles == ["pair 0, θ = 1", "pair 21, θ = 0.0487", "pair 42, θ = 0.00237", "pair 63, θ = 0.000115"]


def test_stretch_view_is_chapter_11s_formulas():
    for s in (1.0, 2.5, 4.0):
        view = ah.explorers.stretch_view(8, s, 16)
        theta = ah.position.frequencies(8)
        assert view["frequencies"]["interpolation"] == pytest.approx((theta / s).tolist())
        ntk = ah.position.frequencies(8, 10000 * s ** (8 / 6))  # the base raised to b s^(d/(d-2))
        assert view["frequencies"]["NTK-aware"] == pytest.approx(ntk.tolist())
        assert view["frequencies"]["YaRN as printed"] == ah.long_context.yarn(8, s, 16).tolist()
        assert view["frequencies"]["YaRN as coded"] == ah.long_context.yarn(8, s, 16, beta=2).tolist()  # chapter 11
        assert view["factors"]["NTK-aware"][0] == 1 and view["factors"]["NTK-aware"][-1] == pytest.approx(1 / s)
        assert view["yarn_factor"] == pytest.approx(0.1 * math.log(s) + 1)
    assert all(f == pytest.approx(1) for fs in ah.explorers.stretch_view(8, 1, 16)["factors"].values() for f in fs)


def test_stretch_explorer_checks_its_input_and_is_deterministic():
    one, two = ah.explorers.stretch_explorer(8, 16).spec(), ah.explorers.stretch_explorer(8, 16).spec()
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    assert len(json.dumps(one)) < 100_000
    with pytest.raises(ValueError, match="slider's range"):
        ah.explorers.stretch_explorer(8, 16, s=9)
    with pytest.raises(ValueError, match="at least 1"):
        ah.explorers.stretch_explorer(8, 16, s=0.5)
    with pytest.raises(ValueError, match="at least 4"):
        ah.explorers.stretch_explorer(2, 16)


def test_at_llamas_sizes_the_stretch_view_has_yarns_ramp_between_its_bounds():
    """d = 128, L = 4096 (chapter 11's paragraph): pairs 0-20 turn more than 32 times, 46-63 less than once."""
    theta = ah.position.frequencies(128)
    turns = 4096 * theta / (2 * math.pi)
    view = ah.explorers.stretch_view(128, 4, 4096)
    beta_at, alpha_at = view["bounds"]["beta"], view["bounds"]["alpha"]
    assert (turns[20] > 32 > turns[21]) and 20 < beta_at < 21 and (turns[45] > 1 > turns[46]) and 45 < alpha_at < 46
    for name in ("YaRN as printed", "YaRN as coded"):
        factors = torch.tensor(view["factors"][name], dtype=torch.float64)
        assert torch.equal(factors[:21], torch.ones(21, dtype=torch.float64)), name
        assert torch.allclose(factors[46:], torch.full((18,), 0.25, dtype=torch.float64)), name
        assert ((factors[21:46] < 1) & (factors[21:46] > 0.25)).all(), name
    assert view["frequencies"]["YaRN as coded"] == ah.long_context.yarn(128, 4, 4096, rounded=True).tolist()
    assert view["frequencies"]["YaRN as coded"] != pytest.approx(view["frequencies"]["YaRN as printed"], rel=1e-3)


def test_the_stretch_explorer_at_llamas_sizes_stays_small_and_marks_the_ramp():
    explorer = ah.explorers.stretch_explorer(128, 4096)
    spec = explorer.spec()
    assert len(json.dumps(spec)) < 20_000
    (rules,) = [rows for rows in spec["datasets"].values() if "at" in rows[0]]
    bounds = ah.explorers.stretch_view(128, 4, 4096)["bounds"]
    assert [row["at"] for row in rules] == [rounded(bounds["beta"]), rounded(bounds["alpha"])]
    assert "ramp runs between the dashed rules" in explorer.description
    small = ah.explorers.stretch_explorer(8, 16).spec()  # no pair turns 32 times over 16 tokens: no rule for β
    assert [row["text"] for rows in small["datasets"].values() if "at" in rows[0] for row in rows] == ["rᵢ = 1"]
