"""Each step of the editions (scripts/book_editions/) on a small hand-made chapter, doing its one job; and the walk
that runs them. The editions themselves are tested in test_make_editions.py, test_make_student.py and
test_make_nbgrader.py."""

import copy

import nbformat
import pytest
from book_chapters import CHAPTER_1, ROOT
from book_editions.cells import CAPTION_TAG
from book_editions.chapter import Chapter
from book_editions.exercise_cells import CHECK_TAG, EXERCISE_META, PREDICTION_TAG, SOLUTION_TAG, WORDS_TAG
from book_editions.learners import (
    COLLAPSED,
    SOLUTION_TEXT,
    CheckAsRunAllShows,
    DropColabSetup,
    FoldColabSetup,
    FoldSolution,
    HideSolution,
    SolutionLine,
)
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


def test_fold_solution_puts_headings_and_an_answer_cell_for_the_gates(chapter):
    start, end = run(FoldSolution(), chapter, "start1"), run(FoldSolution(), chapter, "end1")
    assert start.cell is None and end.cell is None
    assert [c.source for c in start.added] == ["#### Solution to Exercise 1.1",
                                               SOLUTION_TEXT.format(prose="Three, of course.")]
    assert start.added[0].metadata == {COLLAPSED: True, "id": "start1-solution"}
    assert [c.source.splitlines()[-1] for c in end.added] == ["#### Your answer", 'ah.checks.no_answer_yet("1.1")']
    nb = new_notebook()
    FoldSolution().end(nb, chapter)
    assert nb.metadata["colab"] == {"collapsed_sections": ["start1-solution", "start2-solution"]}


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
