"""Every chapter follows the exercise convention that student editions, grading and the instructors' page rely on.

The convention (instructors.md, "Adding a chapter"): at least three exercises, graded easy / medium / hard in
the title, one of them "Predict, then run"; each is an {exercise} directive labelled ex-chNN-name, then a
{solution-start} cell (:class: dropdown), code cells tagged `solution`, a {solution-end} cell, and an untagged
check cell calling check.<fn>(...) from attn_helpers/checks/chNN.py; tests/test_checks_chNN.py tests the checks.
"""

import importlib
import re
from functools import cache
from pathlib import Path

import book_toc
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent

from book_editions.exercise_cells import CHECK_CALL_RE, find_exercises, is_solution  # noqa: E402

CHAPTERS = book_toc.chapters()
by_name = pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)


@cache
def load(chapter: Path):
    nb = nbformat.read(chapter, as_version=4)
    return nb, find_exercises(nb)


def number(chapter: Path) -> str:
    return chapter.name[:2]


def test_chapter_1_is_checked():
    assert ROOT / "chapters" / "01_weighted_average.ipynb" in CHAPTERS


@by_name
def test_at_least_three_labelled_graded_exercises(chapter):
    _, exercises = load(chapter)
    assert len(exercises) >= 3, f"{chapter.name} has {len(exercises)} exercises; the book asks for at least 3"
    pattern = re.compile(rf"ex-ch{number(chapter)}-[a-z0-9-]+")
    for ex in exercises:
        assert ex.label and pattern.fullmatch(ex.label), \
            f"exercise {ex.title!r} needs a ':label: ex-ch{number(chapter)}-name' line, got {ex.label!r}"
        assert ex.level, f"{ex.label}: say easy, medium or hard in the title, e.g. '{ex.title} (medium)'"


@by_name
def test_a_predict_then_run_exercise(chapter):
    _, exercises = load(chapter)
    assert any(re.search(r"predict", ex.title, re.I) or re.search(r"predict,? (then|and) run", ex.text, re.I)
               for ex in exercises), f"{chapter.name} needs a 'Predict, then run' exercise"


@by_name
def test_each_solution_is_gated_and_tagged(chapter):
    nb, exercises = load(chapter)
    for ex in exercises:
        kinds = [(kind, label) for kind, label, _ in ex.gates]
        assert kinds == [("start", ex.label), ("end", "")], \
            f"{ex.label}: expected one '{{solution-start}} {ex.label}' cell and then one '{{solution-end}}' cell"
        start, end = ex.gates[0][2], ex.gates[1][2]
        assert ":class: dropdown" in nb.cells[start].source, f"{ex.label}: the solution-start needs :class: dropdown"
        inside = [i for i in range(start + 1, end) if is_solution(nb.cells[i])]
        assert inside, f"{ex.label}: tag the solution's code cell(s) between the gates with 'solution'"
        assert all(start < i < end for i in ex.solution_cells), \
            f"{ex.label}: a cell tagged 'solution' lies outside its solution-start/solution-end gates"


@by_name
def test_solution_cells_belong_to_exercises(chapter):
    nb, exercises = load(chapter)
    owned = {i for ex in exercises for i in ex.solution_cells}
    stray = [i for i, c in enumerate(nb.cells) if is_solution(c) and i not in owned]
    assert not stray, f"{chapter.name}: cells {stray} are tagged 'solution' outside any exercise"


@by_name
def test_each_exercise_has_a_passing_check_cell(chapter):
    nb, exercises = load(chapter)
    module = importlib.import_module(f"attn_helpers.checks.ch{number(chapter)}")
    for ex in exercises:
        assert ex.check_cell is not None, f"{ex.label}: add an untagged cell calling check.<fn>(...) after the solution"
        cell = nb.cells[ex.check_cell]
        assert not cell.metadata.get("tags"), f"{ex.label}: the check cell must not be tagged"
        for fn in re.findall(r"\bcheck\.(\w+)\(", cell.source):
            assert callable(getattr(module, fn, None)), f"{ex.label}: {module.__name__} has no function {fn}"
        assert CHECK_CALL_RE.search(cell.source)
        outputs = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert "✓" in outputs and not any(o.output_type == "error" for o in cell.outputs), \
            f"{ex.label}: the committed check cell should show the reference solution passing (run the chapter)"


@by_name
def test_chapter_imports_its_checks(chapter):
    nb, _ = load(chapter)
    wanted = f"from attn_helpers.checks import ch{number(chapter)} as check"
    assert any(wanted in c.source for c in nb.cells if c.cell_type == "code"), f"{chapter.name}: add `{wanted}`"


@by_name
def test_checks_have_tests(chapter):
    path = ROOT / "tests" / f"test_checks_ch{number(chapter)}.py"
    assert path.is_file(), f"{path.relative_to(ROOT)} should test every check of {chapter.name}"


def test_labels_are_unique_across_the_book():
    labels = [ex.label for chapter in CHAPTERS for ex in load(chapter)[1]]
    assert len(labels) == len(set(labels)), f"duplicate exercise labels: {sorted(labels)}"


def test_a_notebook_without_exercises_has_none():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Just prose"),
                                         nbformat.v4.new_code_cell("x = 1")])
    assert find_exercises(nb) == []


@by_name
def test_exercise_titles_have_no_brackets_of_their_own(chapter):
    # sphinx-exercise prints "Exercise 1.1 (<title>)": a title ending in "(easy)" reads "(… (easy))".
    for ex in load(chapter)[1]:
        assert "(" not in ex.title.replace("$", ""), f"{ex.label}: write the level as '— easy', not in brackets"
        assert ex.level, f"{ex.label}: the title names no level (easy, medium or hard)"
