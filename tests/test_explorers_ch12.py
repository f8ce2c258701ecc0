"""attn_helpers.explorers._speculative: chapter 12's speculative-sampling explorer and its view function, against the
exact enumeration of ``ah.speculative`` and the papers' formula."""

from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from attn_helpers.explorers import speculative_explorer, speculative_view
from attn_helpers.explorers._speculative import K_MAX
from attn_helpers.speculative import emitted_distribution, mixed_draft

P = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]  # chapter 12's p and q
Q = [F(1, 8), F(1, 2), F(1, 4), F(1, 8)]


def test_the_view_at_mix_0_is_the_chapters_q_and_its_table():
    view = speculative_view(P, Q, 0, 4)
    assert view["draft"] == [float(x) for x in Q] and view["alpha"] == 0.625
    assert view["overlap"] == [0.125, 0.25, 0.125, 0.125] and view["residual"] == [1.0, 0.0, 0.0, 0.0]
    for k in range(K_MAX + 1):  # the papers' formula, as the chapter's table checks it
        assert view["tokens"][k] == pytest.approx((1 - 0.625 ** (k + 1)) / (1 - 0.625), abs=1e-15)
    assert view["at_k"] == view["tokens"][4]


def test_the_ends_of_the_slider_are_uniform_and_p():
    uniform = speculative_view(P, Q, -1, 2)
    assert uniform["draft"] == [0.25] * 4 and uniform["alpha"] == 0.75
    same = speculative_view(P, Q, 1, 3)
    assert same["draft"] == [float(x) for x in P] and same["alpha"] == 1.0
    assert same["residual"] == [0.0] * 4 and same["tokens"] == [k + 1 for k in range(K_MAX + 1)]


def test_every_draft_on_the_slider_is_a_distribution_the_rule_turns_into_p():
    for step in range(-20, 21):
        mix = step / 20
        draft = mixed_draft(P, Q, mix)
        assert sum(draft) == 1 and min(draft) >= 0
        assert emitted_distribution(P, draft) == P
        view = speculative_view(P, Q, mix, 1)
        assert view["alpha"] == pytest.approx(sum(view["overlap"])) and view["at_k"] == pytest.approx(
            1 + view["alpha"])
        if view["alpha"] < 1:
            assert sum(view["residual"]) == pytest.approx(1.0)
    assert mixed_draft(P, Q, 0.35) == [F(13, 20) * b + F(7, 20) * a for a, b in zip(P, Q, strict=True)]


def test_speculative_view_checks_its_input():
    with pytest.raises(ValueError, match="mix"):
        speculative_view(P, Q, 1.5, 4)
    with pytest.raises(ValueError, match="k"):
        speculative_view(P, Q, 0, K_MAX + 1)
    with pytest.raises(ValueError, match="same vocabulary"):
        speculative_view(P, [F(1, 3)] * 3, 0, 4)
    with pytest.raises(ValueError, match="sum to exactly 1"):
        speculative_view(P, [F(1, 2)] * 4, 0, 4)


def test_the_spec_holds_the_chapters_p_and_q_and_is_the_same_every_time():
    spec = speculative_explorer(P, Q, mix=0, k=4).spec()
    assert json.dumps(spec, sort_keys=True) == json.dumps(speculative_explorer(P, Q, mix=0, k=4).spec(),
                                                          sort_keys=True)
    rows = next(rows for rows in spec["datasets"].values() if "q" in rows[0])
    assert [(r["p"], r["q"], r["u"]) for r in rows] == [(0.5, 0.125, 0.25), (0.25, 0.5, 0.25), (0.125, 0.25, 0.25),
                                                        (0.125, 0.125, 0.25)]
    params = {p["name"]: p for p in spec["params"]}
    assert params["mix"]["value"] == 0 and params["drafts"]["value"] == 4
    assert spec["title"]["text"] == "Move the draft q and k: watch α and tokens"
    assert len(json.dumps(spec)) < 20_000
