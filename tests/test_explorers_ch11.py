"""Chapter 11's explorers: RoPE's score at an offset, and RoPE's frequencies stretched by a scale s."""

from __future__ import annotations

import json
import math

import pytest
import torch
from messages import NON_NEGATIVE_INTEGER, raises_saying

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
    with pytest.raises(ValueError, match="same shape"):
        ah.explorers.rope_offset_view(Q, K[:6], 0, 1)
    with pytest.raises(ValueError, match="even"):
        ah.explorers.rope_offset_view(Q[:7], K[:7], 0, 1)
    with raises_saying(ValueError, "p " + NON_NEGATIVE_INTEGER):
        ah.explorers.rope_offset_view(Q, K, -1, 1)
    with pytest.raises(ValueError, match=r"p \+ r >= 0"):
        ah.explorers.rope_offset_view(Q, K, 2, -3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        ah.explorers.rope_offset_view(Q.tolist(), K, 0, 1)


def test_rope_offset_explorer_carries_the_rounded_vectors_and_two_sliders():
    spec = ah.explorers.rope_offset_explorer(Q, K).spec()
    (rows,) = spec["datasets"].values()
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
