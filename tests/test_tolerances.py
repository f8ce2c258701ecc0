"""Every tolerance of the book has measured room: at least 10x on every kernel set (scripts/tolerances.py).

The record (tests/tolerance_room.json) is what `make margins` measured; a tolerance that is new, or whose cell or
check changed since, has no record and fails here until it is measured again.
"""

from __future__ import annotations

import ast
import json
import math

import pytest
import tolerances
import torch
from book_chapters import CHAPTERS

RECORD = json.loads(tolerances.RECORD.read_text()) if tolerances.RECORD.exists() else {"kernel_sets": [], "sites": []}
MEASURED = {(s["file"], s["where"], s["code"]): s for s in RECORD["sites"]}
BY_PLACE = {(s["file"], s["where"]) for s in RECORD["sites"]}
AGAIN = "measure it: `make tolerances` (or .venv/bin/python scripts/tolerances.py chapters/NN_x.ipynb)"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name[:2])
def test_every_tolerance_in_a_chapter_is_measured(chapter):
    file = f"chapters/{chapter.name}"
    missing = [code for where, code in tolerances.chapter_sites(chapter)
               if (file, f"cell {where}", code) not in MEASURED]
    assert not missing, f"{chapter.name}: no measured room for {missing[:3]} (new, or its cell changed): {AGAIN}"


# Comparisons the book's own solutions never reach, so that executing the chapters cannot measure them.
NEVER_REACHED = {
    "ch09.py:_run_gqa": "compares an answer with the copied-heads shortcut only once the check has seen a copy",
}


def test_every_check_that_compares_numbers_is_measured():
    missing = [f"{module}:{key.split(':')[0]}" for module, key in tolerances.check_sites()
               if (f"attn_helpers/checks/{module}", f"{module}:{key}") not in BY_PLACE
               and f"{module}:{key.split(':')[0]}" not in NEVER_REACHED]
    assert not missing, f"no measured room for the checks {missing[:5]} (new, or changed): {AGAIN}"


def test_the_record_covers_every_kernel_set_it_names():
    assert RECORD["kernel_sets"], "the record was measured under no kernel set"
    for site in RECORD["sites"]:
        assert set(site["room"]) == set(RECORD["kernel_sets"]), f"{site['file']} {site['code']}: not every set"


@pytest.mark.parametrize("site", RECORD["sites"], ids=lambda s: f"{s['file'].split('/')[-1]} {s['code'][:40]}")
def test_every_tolerance_has_ten_times_room(site):
    room = tolerances.least_room(site)
    assert room >= tolerances.REQUIRED_ROOM, (
        f"{site['file']} ({site['where']}): {site['code']} has {room:.3g}x room on {site['room']}: another CPU can "
        f"flip it. Derive the bound (float32's eps times the computation's growth), compute in float64 where the "
        f"point is exactness, or loosen it with 10x room over every kernel set.")


# ------------------------------------------------------------------ the tool itself

def run_recorded(code: str, **names: object) -> dict:
    recorder = tolerances.Recorder({code: "k"})
    recorder.cell = "k"
    tree = ast.fix_missing_locations(recorder.visit(ast.parse(code)))
    exec(compile(tree, "<cell>", "exec"), {"__tolerance__": recorder, "torch": torch, "math": math, **names})  # noqa: S102
    return {entry["code"]: entry["room"] for entry in recorder.rooms.values()}


def test_a_bound_on_a_gap_has_the_room_of_their_ratio():
    assert run_recorded("assert gap <= 1e-6", gap=1e-7) == {"gap <= 1e-06": pytest.approx(10)}
    assert run_recorded("assert 1e-3 > x.abs().max()", x=torch.tensor([1e-5, -4e-5])) == \
        {"0.001 > x.abs().max()": pytest.approx(25)}
    assert run_recorded("ok = drift > 1e-3", drift=0.5) == {"drift > 0.001": pytest.approx(500)}


def test_a_comparison_that_does_not_hold_counts_its_room_from_the_other_side():
    with pytest.raises(AssertionError):
        run_recorded("assert gap <= 1e-6", gap=2e-6)
    layers = "first = next(i for i, r in enumerate(residuals) if r < 1e-12)"  # a search: most comparisons fail
    assert run_recorded(layers, residuals=[0.5, 1e-3, 1e-15]) == {"r < 1e-12": pytest.approx(1e3)}


def test_allclose_keeps_its_answer_and_records_its_room():
    a, b = torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([1.0, 2.0 + 1e-7], dtype=torch.float64)
    rooms = run_recorded("same = torch.allclose(a, b, atol=1e-6, rtol=0)\nassert same", a=a, b=b)
    assert list(rooms.values()) == [pytest.approx(1e-6 / 1e-7, rel=1e-3)]
    far = run_recorded("assert not torch.allclose(a, b + 1, atol=1e-6)", a=a, b=b)
    assert list(far.values())[0] > 1e4  # a result that must differ: how far outside the tolerance it is


def test_math_isclose_uses_its_relative_tolerance():
    rooms = run_recorded("assert math.isclose(x, 1.0)", x=1.0 + 1e-11)
    assert list(rooms.values()) == [pytest.approx(100, rel=1e-3)]


def test_claims_sized_comparisons_are_not_tolerances():
    assert not tolerances.is_tolerance(ast.parse("accuracy > 0.85", mode="eval").body)
    assert tolerances.is_tolerance(ast.parse("gap < 1e-6", mode="eval").body)
    assert not tolerances.is_tolerance(ast.parse("1e-6 < 1e-5", mode="eval").body)
