"""The trained claims (scripts/claims/): each names an assert its chapter makes, and types no experiment or bound."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from claims import Claim, chapter_asserts, normalised
from margins import all_claims

CLAIMS_DIR = Path(__file__).resolve().parent.parent / "scripts" / "claims"
CLAIM_MODULES = sorted(CLAIMS_DIR.glob("ch[0-9][0-9]*.py"))  # ch13.py, ch13_heads.py …


def test_a_claims_room_is_its_distance_inside_the_chain():
    def never_called(seed: int) -> dict:
        raise AssertionError("room needs no experiment")

    above = Claim(8, "accuracy > 0.9", never_called)
    between = Claim(8, "2 / 24 < share < 0.25", never_called)
    ranking = Claim(12, "share['a'] > share['b'] >= share['c']", never_called)
    assert above.room([0.95, 0.9]) == pytest.approx(0.05) and above.room([0.85, 0.9]) < 0
    assert between.room([2 / 24, 0.2, 0.25]) == pytest.approx(0.05) and between.room([2 / 24, 0.3, 0.25]) < 0
    assert ranking.room([0.9, 0.5, 0.45]) == pytest.approx(0.05) and ranking.room([0.9, 0.95, 0.4]) < 0
    assert above.measured([0.95, 0.9]) == 0.95 and ranking.measured([0.9, 0.5, 0.45]) == pytest.approx(0.05)


def test_a_claim_reads_its_operands_from_the_names_it_is_given():
    claim = Claim(8, 'knocked["layer 1"] < 0.25', lambda seed: {"knocked": {"layer 1": seed / 10}})
    assert claim.values(2) == [0.2, 0.25] and claim.room(claim.values(2)) == pytest.approx(0.05)


@pytest.mark.parametrize("text", ["accuracy", "a == b", "a < b or c", "a <"])
def test_a_claim_is_a_chain_of_inequalities(text):
    with pytest.raises(ValueError, match="chapter 8"):
        _ = Claim(8, text, dict).comparison


@pytest.mark.parametrize("claim", all_claims(), ids=lambda c: f"ch{c.chapter:02d}: {c.asserts}")
def test_each_claim_is_an_assert_its_chapter_makes(claim):
    found = set(chapter_asserts(claim.chapter))
    assert normalised(claim.asserts) in found, (
        f"chapter {claim.chapter} asserts no comparison {claim.asserts!r}: a claim stands for an assert of its "
        f"chapter, typed as the chapter types it; change the claim in scripts/claims/ch{claim.chapter:02d}.py with "
        f"the chapter, or put the assert back.")


@pytest.mark.parametrize("module", CLAIM_MODULES, ids=lambda p: p.name)
def test_a_claims_module_types_no_number(module):
    """Settings and bounds live once: in the package function the chapter calls, and in the chapter's assert."""
    tree = ast.parse(module.read_text())
    chapter_numbers = {id(call.args[0]) for call in ast.walk(tree) if isinstance(call, ast.Call)
                       and getattr(call.func, "id", None) == "Claim" and call.args}
    numbers = [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in chapter_numbers
               and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)]
    assert not numbers, (
        f"{module.name} types the number(s) {[n.value for n in numbers]} (line {numbers[0].lineno if numbers else 0}): "
        f"an experiment's settings belong in the attn_helpers function that the chapter's cell and the claim both "
        f"call, and a bound in the chapter's assert.")


@pytest.mark.parametrize("module", CLAIM_MODULES, ids=lambda p: p.name)
def test_a_claims_module_lists_its_own_chapters_claims(module):
    listed = importlib.import_module(f"claims.{module.stem}").CLAIMS
    assert listed and {c.chapter for c in listed} == {int(module.stem[2:4])}, (
        f"{module.name}: CLAIMS lists chapter {int(module.stem[2:4])}'s claims, and only those")
