"""Each step of the editions (scripts/book_editions/) on a small hand-made chapter, doing its one job; and the walk
that runs them. The editions themselves are tested in test_make_editions.py, test_make_student.py and
test_make_nbgrader.py."""

import ast
import copy
import importlib
import pkgutil
import re
from pathlib import Path

import book_editions
import nbformat
import pytest
from book_chapters import CHAPTER_1, ROOT
from book_editions.cells import CAPTION_TAG
from book_editions.chapter import Chapter
from book_editions.editions import EDITIONS
from book_editions.exercise_cells import CHECK_TAG, EXERCISE_META, PREDICTION_TAG, SOLUTION_TAG, WORDS_TAG
from book_editions.learners import (
    COLLAPSED,
    SOLUTION_TEXT,
    AnswerCell,
    CheckAsRunAllShows,
    DropColabSetup,
    FoldColabSetup,
    FoldSolution,
    HideSolution,
    SolutionLine,
)
from book_editions.myst_syntax import MystError
from book_editions.nbgrader_course import BEGIN, END, GradedCheck, LockCell, SolutionRegion, WrittenAnswer
from book_editions.steps import (
    DropGated,
    DropGlueRecords,
    ExerciseMetadata,
    FigureCaption,
    PredictionCell,
    ResolveMyst,
)
from book_editions.student import LockCheck, StubSolution
from book_editions.walk import At, Edition, Step
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from attn_helpers.checks.protocol import SOLUTION_LINE, waiting_note

GLUE = new_output("display_data", data={"application/papermill.record/text/plain": "2"},
                  metadata={"scrapbook": {"name": "tiny_x"}})


def printed():
    """What a check prints when it passes (a new output each time: the cells must not share one)."""
    return new_output("stream", name="stdout", text="✓ y: correct\n")


# A hand-made chapter, numbered as chapter 1 (its file name's place in _toc.yml): a figure, then two exercises,
# one "predict, then run" with a gated written solution, one that asks for words.
CELLS = [
    new_code_cell("import torch", id="setup", metadata={"tags": ["colab-setup"]}, execution_count=1),
    new_code_cell("x = 2\nglue('tiny_x', x)", id="plot", outputs=[GLUE, printed()], execution_count=2,
                  metadata={"mystnb": {"figure": {"name": "fig-tiny", "caption": "Two, drawn."}}}),
    new_markdown_cell("Here x is {glue:text}`tiny_x`, as {numref}`fig-tiny` shows.", id="prose"),
    new_markdown_cell("```{exercise} Predict, then run: add one (easy)\n:label: ex-ch01-tiny\n\n"
                      "Predict `y = x + 1`, then compute it.\n```", id="ex1"),
    new_markdown_cell("```{solution-start} ex-ch01-tiny\n:class: dropdown\n```\nThree, of course.", id="start1"),
    new_code_cell("y = x + 1", id="sol1", metadata={"tags": ["solution"]}, outputs=[printed()]),
    new_markdown_cell("```{solution-end}\n```", id="end1"),
    new_code_cell("check.y(y)", id="check1", outputs=[printed()]),
    new_markdown_cell("```{exercise} Say why (medium)\n:label: ex-ch01-why\n\nExplain why y is 3.\n```", id="ex2"),
    new_markdown_cell("```{solution-start} ex-ch01-why\n:class: dropdown\n```", id="start2"),
    new_markdown_cell("Because 2 + 1 = 3.", id="between"),
    new_code_cell("z = y", id="sol2"),
    new_markdown_cell("```{solution-end}\n```", id="end2"),
    new_code_cell("check.z(z)", id="check2", outputs=[printed()]),
]
INDEX = {cell.id: i for i, cell in enumerate(CELLS)}


@pytest.fixture
def chapter():
    return Chapter.read(CHAPTER_1, ROOT, new_notebook(cells=copy.deepcopy(CELLS)))


def run(step: Step, chapter: Chapter, cell_id: str) -> At:
    """``step`` on one cell of ``chapter``."""
    i = INDEX[cell_id]
    at = At(chapter, i, chapter.cells[i])
    step.cell(at)
    return at


def test_the_hand_made_chapter_reads_as_intended(chapter):
    assert [ex.label for ex in chapter.exercises] == ["ex-ch01-tiny", "ex-ch01-why"]
    assert chapter.exercises[0].predict and chapter.exercises[1].words
    assert chapter.solution_code == {INDEX["sol1"], INDEX["sol2"]} and set(chapter.checks) == {INDEX["check1"],
                                                                                        INDEX["check2"]}
    assert [chapter.number(ex) for ex in chapter.exercises] == ["1.1", "1.2"]


# ------------------------------------------------------------------ the steps every edition shares


def test_resolve_myst_turns_a_markdown_cell_into_plain_markdown(chapter):
    assert run(ResolveMyst(), chapter, "prose").cell.source == "Here x is 2, as Figure 1.1 shows."
    assert run(ResolveMyst(), chapter, "plot").cell.source == CELLS[INDEX["plot"]].source  # code: left alone


def test_drop_glue_records_keeps_the_visible_outputs(chapter):
    assert run(DropGlueRecords(), chapter, "plot").cell.outputs == [printed()]


def test_figure_caption_goes_under_a_figure_only(chapter):
    at = run(FigureCaption(), chapter, "plot")
    assert [(c.source, c.metadata["tags"]) for c in at.added] == [("**Figure 1.1:** Two, drawn.", [CAPTION_TAG])]
    assert at.added[0].id == "plot-caption" and at.cell is chapter.cells[INDEX["plot"]]
    assert run(FigureCaption(), chapter, "check1").added == []


def test_exercise_metadata_keeps_the_label_title_level_and_number(chapter):
    assert run(ExerciseMetadata(), chapter, "ex2").cell.metadata[EXERCISE_META] == {
        "label": "ex-ch01-why", "title": "Say why (medium)", "level": "medium", "number": "1.2"}
    assert EXERCISE_META not in run(ExerciseMetadata(), chapter, "prose").cell.metadata


def test_prediction_cell_under_an_exercise_that_asks_for_words(chapter):
    assert [c.metadata["tags"] for c in run(PredictionCell(), chapter, "ex1").added] == [[PREDICTION_TAG]]
    assert [c.metadata["tags"] for c in run(PredictionCell(), chapter, "ex2").added] == [[WORDS_TAG]]
    assert run(PredictionCell(), chapter, "prose").added == []


def test_drop_gated_leaves_out_the_cells_of_its_types_between_the_gates(chapter):
    step = DropGated({"markdown"})
    assert run(step, chapter, "start2").cell is None and run(step, chapter, "between").cell is None
    assert run(step, chapter, "sol2").cell is not None and run(step, chapter, "ex2").cell is not None


# ------------------------------------------------------------------ the learners' editions


def test_check_as_run_all_shows_under_an_untouched_answer(chapter):
    assert run(CheckAsRunAllShows(), chapter, "check1").cell.outputs[0].text == (
        waiting_note("1.1") + "\n✓ y: correct (the book's solution)\n")
    assert run(CheckAsRunAllShows(), chapter, "plot").cell.outputs[1].text == "✓ y: correct\n"


def test_fold_solution_puts_a_folded_heading_in_place_of_the_gates(chapter):
    start, end = run(FoldSolution(), chapter, "start1"), run(FoldSolution(), chapter, "end1")
    assert [c.source for c in [start.cell, *start.added]] == ["#### Solution to Exercise 1.1",
                                                              SOLUTION_TEXT.format(prose="Three, of course.")]
    assert start.cell.metadata == {COLLAPSED: True, "id": "start1-solution"}
    assert end.cell is None and end.added == []  # a gate with no prose: gone
    nb = new_notebook()
    FoldSolution().end(nb, chapter)
    assert nb.metadata["colab"] == {"collapsed_sections": ["start1-solution", "start2-solution"]}


def test_answer_cell_goes_under_the_end_of_a_solution(chapter):
    end = run(AnswerCell(), chapter, "end1")
    assert [c.source.splitlines()[-1] for c in end.added] == ["#### Your answer", 'ah.checks.no_answer_yet("1.1")']
    assert [c.id for c in end.added] == ["end1-answer", "end1-answer-code"] and end.cell is chapter.cells[INDEX["end1"]]
    assert run(AnswerCell(), chapter, "start1").added == [] and run(AnswerCell(), chapter, "check1").added == []


def test_a_gates_prose_stays_above_the_answer_cell(chapter):
    """The end gate's prose is the solution's: FoldSolution (after AnswerCell) puts it above "Your answer"."""
    chapter.cells[INDEX["end1"]].source = "And that is all.\n\n```{solution-end}\n```"
    at = At(chapter, INDEX["end1"], chapter.cells[INDEX["end1"]])
    for step in (AnswerCell(), FoldSolution()):
        step.cell(at)
    assert [c.source.splitlines()[0] for c in [at.cell, *at.added]] == [
        "<details><summary>The book's solution in words (click to open)</summary>", "#### Your answer",
        "# Your answer to Exercise 1.1: write your code here, in place of these three lines,"]


def test_solution_line_marks_a_solution_cell_of_a_learners_edition(chapter):
    assert run(SolutionLine(), chapter, "sol1").cell.source == SOLUTION_LINE.format(number="1.1") + "\ny = x + 1"
    assert run(SolutionLine(), chapter, "sol2").cell.source == "z = y"  # not tagged `solution`


def test_hide_solution_collapses_a_solutions_code_and_closes_its_prose(chapter):
    """Shift+Enter unfolds a solution's heading in JupyterLab: each of its cells keeps itself out of view."""
    code = run(HideSolution(), chapter, "sol1").cell
    assert code.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True} and code.source == "y = x + 1"
    assert run(HideSolution(), chapter, "between").cell.source == SOLUTION_TEXT.format(prose="Because 2 + 1 = 3.")
    assert SOLUTION_TEXT.startswith("<details>") and "open" not in SOLUTION_TEXT.partition(">")[0]
    for other in ("check1", "prose", "ex1", "plot"):
        cell = run(HideSolution(), chapter, other).cell
        assert "jupyter" not in cell.metadata and cell.source == CELLS[INDEX[other]].source, other


def test_the_colab_setup_cell_is_folded_or_dropped(chapter):
    folded = run(FoldColabSetup(), chapter, "setup").cell
    assert folded.execution_count is None and folded.metadata["jupyter"] == {"source_hidden": True}
    assert run(DropColabSetup(), chapter, "setup").cell is None
    assert run(DropColabSetup(), chapter, "plot").cell is not None


# ------------------------------------------------------------------ the student editions


def test_stub_solution_replaces_each_solution_by_a_stub(chapter):
    for cell_id, number in (("sol1", "1.1"), ("sol2", "1.2")):  # tagged, or between the gates
        cell = run(StubSolution(), chapter, cell_id).cell
        assert cell.source.startswith("# YOUR CODE HERE\nraise NotImplementedError(") and f"Exercise {number}" in \
            cell.source and cell.outputs == [] and SOLUTION_TAG in cell.metadata["tags"]
    assert run(StubSolution(), chapter, "check1").cell.source == "check.y(y)"


def test_lock_check_makes_a_check_cell_read_only_and_empty(chapter):
    cell = run(LockCheck(), chapter, "check1").cell
    assert cell.metadata["tags"] == [CHECK_TAG] and cell.outputs == []
    assert cell.metadata["editable"] is False and cell.metadata["deletable"] is False
    assert run(LockCheck(), chapter, "sol1").cell.metadata["tags"] == ["solution"]  # a solution: not a check


# ------------------------------------------------------------------ the nbgrader course


def test_solution_region_marks_the_solution_for_nbgrader(chapter):
    step = SolutionRegion()
    step.begin(chapter)
    first = run(step, chapter, "sol1").cell  # its exercise asks for a prediction: the written solution goes there
    assert first.source == f"{BEGIN}\ny = x + 1\n{END}" and first.outputs == []
    assert first.metadata["nbgrader"] == {"grade": False, "grade_id": "ex-ch01-tiny-solution", "locked": False,
                                          "schema_version": 3, "solution": True}
    assert run(step, chapter, "check1").cell.source == "check.y(y)"


def test_graded_check_is_a_locked_test_worth_the_exercises_points(chapter):
    cell = run(GradedCheck(), chapter, "check2").cell
    assert cell.metadata["nbgrader"]["grade_id"] == "ex-ch01-why-check" and cell.metadata["nbgrader"]["points"] == 2
    assert cell.metadata["nbgrader"]["locked"] and cell.metadata["tags"] == [CHECK_TAG] and cell.outputs == []


def test_lock_cell_locks_every_other_cell(chapter):
    assert run(LockCell(), chapter, "prose").cell.metadata["nbgrader"]["grade_id"] == "ch01-cell-002"
    assert run(LockCell(), chapter, "ex1").cell.metadata["nbgrader"]["grade_id"] == "ex-ch01-tiny-text"
    assert "nbgrader" not in run(LockCell(), chapter, "check1").cell.metadata


def test_written_answer_is_a_manually_graded_cell_holding_the_written_solution(chapter):
    added = run(WrittenAnswer(), chapter, "ex1").added
    assert [c.source for c in added] == [f"{BEGIN}\nThree, of course.\n{END}"]
    assert added[0].metadata["nbgrader"]["grade_id"] == "ex-ch01-tiny-prediction"
    assert run(WrittenAnswer(), chapter, "ex2").added[0].metadata["nbgrader"]["grade_id"] == "ex-ch01-why-words"
    assert run(WrittenAnswer(), chapter, "prose").added == []


# ------------------------------------------------------------------ the walk


class Mark(Step):
    """Test step: append its name to each cell's source, and note that it finished the notebook."""

    def __init__(self, name):
        self.name = name

    def cell(self, at):
        at.cell.source += self.name

    def end(self, nb, chapter):
        nb.metadata.setdefault("ended", []).append(self.name)


class DropFirst(Step):
    def cell(self, at):
        if at.index == 0:
            at.drop()
            at.add(new_markdown_cell("in its place"))


def test_the_walk_runs_each_cell_through_the_steps_in_order():
    chapter = Chapter.read(CHAPTER_1, ROOT, new_notebook(cells=[new_markdown_cell("a"), new_markdown_cell("b")]))
    nb = Edition("test", [Mark("1"), DropFirst(), Mark("2")]).apply(chapter)
    assert [c.source for c in nb.cells] == ["in its place", "b12"]  # a dropped cell: the steps after it skip it
    assert nb.metadata["ended"] == ["1", "2"]


def test_a_chapter_is_read_before_any_step_changes_it(tmp_path):
    nbformat.write(new_notebook(cells=copy.deepcopy(CELLS)), tmp_path / CHAPTER_1.name)
    chapter = Chapter.read(tmp_path / CHAPTER_1.name, ROOT)
    run(StubSolution(), chapter, "sol2")  # now tagged `solution`, but the roles were worked out before
    assert chapter.tagged_solutions == {INDEX["sol1"]: chapter.exercises[0]}


# ------------------------------------------------------------------ the rules of order, and every edition's parts


def test_a_gate_step_must_come_before_resolve_myst(chapter):
    """The rule is real: without a gate step first, ResolveMyst stops at a gate, with a sentence that says so."""
    broken = Edition("broken", [ResolveMyst(), DropGated({"markdown"})])
    assert broken.order_errors() == [
        "the edition 'broken' has no gate step (FoldSolution, DropGated of markdown cells) before ResolveMyst, which "
        "cannot resolve a {solution-start} or {solution-end} cell: put one before it (book_editions/walk.py)"]
    with pytest.raises(MystError, match="a gate step .* must come before ResolveMyst"):
        broken.apply(chapter)
    assert Edition("code only", [DropGated({"code"}), ResolveMyst()]).order_errors()  # drops no gate
    assert Edition("fine", [FoldSolution(), ResolveMyst()]).order_errors() == []


def test_answer_cell_must_come_before_fold_solution(chapter):
    """The rule is real: after FoldSolution, which drops a bare gate, AnswerCell never sees it."""
    late = Edition("late", [FoldSolution(), AnswerCell(), ResolveMyst()])
    assert late.order_errors() == ["in the edition 'late', AnswerCell must come before FoldSolution "
                                   "(AnswerCell.comes_before): move it up"]
    assert "#### Your answer" not in [c.source for c in late.apply(chapter).cells]


@pytest.mark.parametrize("made", EDITIONS, ids=lambda m: m.target)
def test_every_edition_keeps_the_rules_of_order(made):
    errors = made.edition.order_errors()
    assert not errors, "\n".join(errors)


def editions_defined() -> dict[str, Edition]:
    """Every Edition that a module of book_editions defines, by its module and name."""
    found = {}
    for info in pkgutil.iter_modules(book_editions.__path__):
        module = importlib.import_module(f"book_editions.{info.name}")
        found |= {f"{info.name}.{name}": obj for name, obj in vars(module).items() if isinstance(obj, Edition)}
    return found


def test_every_edition_is_listed_with_a_make_target_that_runs_its_script():
    listed = [made.edition for made in EDITIONS]
    for where, edition in editions_defined().items():
        if not any(edition is e for e in listed):
            pytest.fail(f"the edition {where} ({edition.name!r}) is not in book_editions/editions.py's EDITIONS: "
                        "add it there with the make target and the script that write it", pytrace=False)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for made in EDITIONS:
        recipe = re.search(rf"^{re.escape(made.target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        if recipe is None or made.script not in recipe.group(1):
            pytest.fail(f"the edition {made.edition.name!r} has no make target {made.target!r} that runs "
                        f"{made.script}: add one to the Makefile (with a ## line for make help)", pytrace=False)
        if not (ROOT / made.script).is_file():
            pytest.fail(f"{made.script}, which makes the edition {made.edition.name!r}, does not exist", pytrace=False)


def step_classes() -> dict[str, type]:
    """Every Step class that a module of book_editions defines, by name."""
    found = {}
    for info in pkgutil.iter_modules(book_editions.__path__):
        module = importlib.import_module(f"book_editions.{info.name}")
        found |= {name: obj for name, obj in vars(module).items() if isinstance(obj, type) and issubclass(obj, Step)
                  and obj is not Step and obj.__module__ == module.__name__}
    return found


def test_every_step_is_in_an_edition_and_tested_here():
    used = {type(step).__name__ for made in EDITIONS for step in made.edition.steps}
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    tested = {node.id for fn in tree.body if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")
              for node in ast.walk(fn) if isinstance(node, ast.Name)}
    for name, cls in step_classes().items():
        if name not in used:
            pytest.fail(f"the step {name} ({cls.__module__}) is in no edition's list: add it to one, or delete it",
                        pytrace=False)
        if name not in tested:
            pytest.fail(f"the step {name} ({cls.__module__}) has no test in tests/test_edition_steps.py: add one that "
                        "runs it on the hand-made chapter", pytrace=False)


@pytest.mark.parametrize("made", EDITIONS, ids=lambda m: m.target)
def test_the_rules_of_order_are_all_the_order_that_matters(made):
    """Swap any two steps of an edition: if the edition made from the hand-made chapter changes (or fails), the
    swapped list breaks a rule of order. A swap that changes it and breaks none is a rule nobody wrote down."""

    def make(steps):
        try:
            return nbformat.writes(Edition("swapped", steps).apply(
                Chapter.read(CHAPTER_1, ROOT, new_notebook(cells=copy.deepcopy(CELLS)))))
        except MystError as exc:
            return f"MystError: {exc}"

    steps = list(made.edition.steps)
    made_as_listed = make(steps)
    for i in range(len(steps)):
        for j in range(i + 1, len(steps)):
            swapped = steps[:i] + [steps[j]] + steps[i + 1:j] + [steps[i]] + steps[j + 1:]
            if make(swapped) != made_as_listed and not Edition("swapped", swapped).order_errors():
                pytest.fail(f"in the edition {made.edition.name!r}, swapping {steps[i]!r} and {steps[j]!r} changes "
                            "what it makes, and no rule of order says which comes first: write the rule "
                            "(Step.comes_before, book_editions/walk.py)", pytrace=False)
