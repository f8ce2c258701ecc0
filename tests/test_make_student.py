"""Student editions: each is its chapter minus the solutions (stubs in their place), gates gone, checks kept, in
plain Markdown. Checked structurally for every chapter; execution is tested on one small synthetic chapter
(nbval already executes the chapters themselves)."""

import copy
import re
from pathlib import Path

import nbformat
import pytest
from book_chapters import CHAPTER_1, CHAPTERS, MYST, by_name
from book_editions.cells import CAPTION_TAG, STUB_WIDTH
from book_editions.exercise_cells import (
    CHECK_TAG,
    PREDICTION_PROMPT,
    PREDICTION_TAG,
    WORDS_MARKER,
    WORDS_PROMPT,
    WORDS_TAG,
    Exercise,
    find_exercises,
    is_gate,
    is_solution,
    written_prediction,
)
from book_editions.student import make_student
from grading.assemble import assemble, read_book
from make_student import main as make_student_main
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

# The parts of a chapter's markdown that resolving leaves alone: everything between roles and MyST-only lines.
MYST_PIECES = re.compile(r"\{[a-z][a-z0-9_:-]*\}`[^`]*`|^.*(?:`{3,}|:{3,})\{.*$|^\s*:[a-z-]+:.*$"
                         r"|^\$\$.*$|^\(.*\)=$|^`{3,}$", re.MULTILINE)


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return {chapter.name: nbformat.read(make_student(chapter, out), as_version=4) for chapter in CHAPTERS}


def is_glue_record(output) -> bool:
    return output.get("output_type") == "display_data" and "scrapbook" in output.get("metadata", {})


def gated(nb) -> set[int]:
    """Cells from each {solution-start} to its {solution-end}, both included."""
    cells, start = set(), None
    for i, cell in enumerate(nb.cells):
        if is_gate(cell):
            if "{solution-start}" in cell.source:
                start = i
            else:
                cells.update(range(start, i + 1))
    return cells


@by_name
def test_edition_is_the_chapter_minus_its_solutions(chapter, editions):
    book, student = nbformat.read(chapter, as_version=4), editions[chapter.name]
    exercises = {ex.cell: ex for ex in find_exercises(book)}
    checks = {ex.check_cell for ex in exercises.values()}
    hidden = gated(book)
    owner = {i: ex for ex in exercises.values() for i in range(ex.cell, (ex.check_cell or ex.cell) + 1)}
    numbers = {ex.label: f"{int(chapter.name[:2])}.{k}" for k, ex in enumerate(exercises.values(), start=1)}
    figures = 0
    cells = iter(student.cells)
    for i, b in enumerate(book.cells):
        if i in hidden and b.cell_type == "markdown":
            continue  # gates, and written solutions inside them, are gone
        s = next(cells)
        assert s.cell_type == b.cell_type, f"{chapter.name}: cell {i} changed type"
        if b.cell_type == "code":
            if is_solution(b):
                label = owner[i].label
                assert s.source.startswith("# YOUR CODE HERE\nraise NotImplementedError(") and is_solution(s)
                assert f"Exercise {numbers[label]} ({label}) is not answered yet" in s.source
                # every line fits the cell, which does not wrap code (one line of 200 characters ran past its edge)
                assert max(len(line) for line in s.source.splitlines()) <= STUB_WIDTH == 79
                assert s.outputs == [] and s.execution_count is None
            elif i in checks:
                assert s.source == b.source and s.outputs == [] and CHECK_TAG in s.metadata.tags
                assert s.metadata.editable is False and s.metadata.deletable is False
            else:
                assert s.source == b.source
                assert s.outputs == [o for o in b.outputs if not is_glue_record(o)]
                assert s.execution_count == b.execution_count
            if b.metadata.get("mystnb", {}).get("figure", {}).get("name"):  # its caption, visibly, right below
                figures += 1
                caption = next(cells)
                assert CAPTION_TAG in caption.metadata.tags
                assert caption.source.startswith(f"**Figure {int(chapter.name[:2])}.{figures}:** ")
        elif i in exercises:
            ex = exercises[i]
            number = f"{int(chapter.name[:2])}.{list(exercises).index(i) + 1}"
            assert s.source.startswith(f"### Exercise {number} ({ex.level}): "), s.source.splitlines()[0]
            assert s.metadata.exercise["label"] == ex.label and f"`{ex.label}`" in s.source
            if ex.written:  # a prediction, or an answer in words (say why, explain)
                answer = next(cells)
                tag, prompt = (WORDS_TAG, WORDS_PROMPT) if ex.words else (PREDICTION_TAG, PREDICTION_PROMPT)
                assert answer.cell_type == "markdown" and tag in answer.metadata.tags
                assert answer.source.strip() == prompt  # visibly a place to write, and nothing written
        else:  # teaching text: resolved where it had MyST, otherwise untouched but for display math as equation*
            if not MYST.search(b.source):
                assert s.source.replace("$$\\begin{equation*}", "$$").replace("\\end{equation*}$$", "$$") == b.source
                assert s.source.count("$$\\begin{equation*}") == s.source.count("\\end{equation*}$$") \
                    == b.source.count("$$") // 2
            for piece in MYST_PIECES.split(b.source):
                for line in (piece or "").splitlines():
                    assert line.strip() in s.source, f"{chapter.name} cell {i}: lost the text {line!r}"
    assert next(cells, None) is None, f"{chapter.name}: the edition has cells the chapter does not"
    nbformat.validate(student)
    assert len({c.id for c in student.cells}) == len(student.cells)


@by_name
def test_edition_has_no_myst_syntax(chapter, editions):
    for i, cell in enumerate(editions[chapter.name].cells):
        if cell.cell_type == "markdown":
            left = [m.group(0) for m in MYST.finditer(cell.source)]
            assert not left, f"{chapter.name}, cell {i}: MyST syntax reaches plain Jupyter: {left}"


@by_name
def test_edition_parses_as_the_chapters_exercises(chapter, editions):
    book, student = find_exercises(nbformat.read(chapter, as_version=4)), find_exercises(editions[chapter.name])
    assert [(e.label, e.level, e.predict) for e in student] == [(e.label, e.level, e.predict) for e in book]
    for ex in student:
        assert ex.check_cell is not None and ex.solution_cells
        assert (ex.prediction_cell is not None) == ex.written


@by_name
def test_edition_that_lost_its_metadata_is_graded_by_its_headings(chapter, editions, tmp_path):
    """The grader finds every exercise of an edition whose cell metadata was lost, from its headings, and
    puts the book's checks exactly where the edition's check cells were: no answer cell is taken for one,
    not even one that calls a helper of the checks (``Xs = check.sequence_first_batch()``)."""
    edition = editions[chapter.name]
    lost = copy.deepcopy(edition)
    answers = iter(c.source for c in nbformat.read(chapter, as_version=4).cells if is_solution(c))
    for cell in lost.cells:
        if is_solution(cell):  # the student answered with the book's solutions
            cell.source = next(answers)
        cell.metadata = {}
    book = read_book(chapter)
    asm = assemble(lost, book, tmp_path)
    assert asm.missing == [] and asm.recovered == [e.label for e in book.exercises]
    checks = [i for i, c in enumerate(edition.cells) if CHECK_TAG in c.metadata.get("tags", [])]
    assert [asm.origin[i] for i in sorted(asm.origin)] == [i for i in range(len(lost.cells)) if i not in checks]


def test_chapter_1_reads_as_the_website_does(editions):
    book, student = nbformat.read(CHAPTER_1, as_version=4), editions[CHAPTER_1.name]
    glued = {o.metadata.scrapbook["name"]: o.data["application/papermill.record/text/plain"]
             for c in book.cells if c.cell_type == "code" for o in c.outputs if is_glue_record(o)}
    text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert f"a weight of {float(glued['ch01_w1']):.4f} and the second" in text
    assert f"The scores {glued['ch01_s1']} and {glued['ch01_s2']} differ" in text
    assert "Equation (1.3) computes (1.1) and (1.2)" in text and "\\tag{1.3}" in text
    assert "Each row of Figure 1.1 sums to one" in text
    assert "follows Bloem (2019)" in text and "transformer (Vaswani et al., 2017)" in text
    assert "### Exercise 1.2 (medium): Self-attention as a function" in text
    assert "The scores double to 8 and 4" not in text and "w_doubled = ah.softmax" not in "\n".join(
        c.source for c in student.cells)


def synthetic_book(root: Path) -> Path:
    """A one-chapter book: a glued value, a figure reference, then one "predict, then run" exercise."""
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n- chapters:\n  - file: chapters/01_tiny\n")
    (root / "references.bib").write_text("")
    nb = new_notebook(cells=[
        new_markdown_cell("# A tiny chapter"),
        new_code_cell("from types import SimpleNamespace\n\nfrom myst_nb import glue\n\nx = 2\n"
                      "glue('tiny_x', x, display=False)\n"
                      "check = SimpleNamespace(y=lambda y: print('✓ y: correct') if y == 3 else 1 / 0)",
                      execution_count=1, outputs=[new_output(
                          "display_data", data={"application/papermill.record/text/plain": "2"},
                          metadata={"scrapbook": {"name": "tiny_x"}})]),
        new_markdown_cell("Here x is {glue:text}`tiny_x`."),
        new_markdown_cell("```{exercise} Predict, then run: add one (easy)\n:label: ex-ch01-tiny\n\n"
                          "Predict `y = x + 1`, then compute it.\n```"),
        new_markdown_cell("```{solution-start} ex-ch01-tiny\n:class: dropdown\n```\nThree, of course."),
        new_code_cell("y = x + 1", metadata={"tags": ["solution"]}),
        new_markdown_cell("```{solution-end}\n```"),
        new_code_cell("check.y(y)"),
    ])
    path = root / "chapters" / "01_tiny.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return path


def test_an_edition_runs_up_to_its_first_stub(tmp_path):
    edition = make_student(synthetic_book(tmp_path), tmp_path / "student", root=tmp_path)
    nb = nbformat.read(edition, as_version=4)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "markdown", "markdown", "markdown", "code", "code"]
    assert nb.cells[4].source.startswith(PREDICTION_PROMPT)
    assert nb.cells[2].source == "Here x is 2." and "Three, of course" not in str(nb)
    client = NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as info:
        client.execute()
    assert info.value.ename == "NotImplementedError"
    assert info.value.evalue.startswith("Exercise 1.1 (ex-ch01-tiny) is not answered yet: replace the lines of this "
                                      "cell with your code, run it, then run the check cell below it.")
    assert nb.cells[1].execution_count == 1 and nb.cells[6].execution_count is None
    assert [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any(o.output_type == "error" for o in c.outputs)] == [5]


def test_command_line_writes_every_chapter_and_rejects_bad_input(tmp_path, capsys):
    assert make_student_main([str(CHAPTER_1), "--out", str(tmp_path)]) == 0
    assert (tmp_path / CHAPTER_1.name).is_file()
    assert "3 solution cells replaced by stubs" in capsys.readouterr().out
    assert make_student_main([str(tmp_path / "missing.ipynb")]) == 2
    assert "is not a notebook file" in capsys.readouterr().err
    variation = tmp_path / "01_my_variation.ipynb"  # a renamed copy: its number is unknown to _toc.yml
    variation.write_bytes(CHAPTER_1.read_bytes())
    assert make_student_main([str(variation), "--out", str(tmp_path / "out")]) == 2
    assert "01_my_variation.ipynb is not a chapter listed in" in capsys.readouterr().err


def test_exercises_that_ask_for_words_are_found_by_their_text_or_a_marker():
    """"Say why", "explain", "in one sentence", a question "Why …?" (not in code or math), or the author's marker
    line: such an exercise gets a cell for its words (issue 40). "Predict, then run" ones have theirs already."""
    asking = {label for path in CHAPTERS for ex in find_exercises(nbformat.read(path, as_version=4)) if ex.words
              for label in [ex.label]}
    assert {"ex-ch03-cat", "ex-ch10-delta"} <= asking, asking

    def ex(text: str, title: str = "A task — easy") -> Exercise:
        return Exercise("ex-ch01-x", title, 0, f"```{{exercise}} {title}\n:label: ex-ch01-x\n\n{text}\n```")

    for text in ["Then say, in one sentence, why they agree.", "Explain the difference.",
                 "Why are the two rows identical?", f"Compute `x`.\n{WORDS_MARKER}"]:
        assert ex(text).words and ex(text).written, text
    for text in ["Compute `why = x.sum()` of shape $(2, 3)$.", "Write a function `f(x)` that returns y.",
                 "Use $\\text{why?}$ as a name."]:
        assert not ex(text).words, text
    from book_editions.plain_markdown import ChapterText

    text = ChapterText.of(nbformat.read(CHAPTER_1, as_version=4), CHAPTER_1)
    assert text.plain(f"Compute `x`.\n{WORDS_MARKER}\nThen stop.") == "Compute `x`.\nThen stop."  # unseen in editions
    predicted = ex("Predict, then run: what changes, and why?", "Predict, then run — easy")
    assert predicted.predict and not predicted.words and predicted.written
    assert written_prediction(f"{WORDS_PROMPT}\n\nThe rows are equal because the word is.") == (
        "The rows are equal because the word is.")


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.name[:2] in ("03", "10")], ids=lambda p: p.name)
def test_an_exercise_that_asks_for_words_has_a_place_for_them_and_the_grader_reads_it(chapter, tmp_path):
    from book_editions.learners import learner_edition

    book = read_book(chapter)
    asking = [ex for ex in find_exercises(nbformat.read(chapter, as_version=4)) if ex.words]
    student = nbformat.read(make_student(chapter, tmp_path), as_version=4)
    for edition in (student, learner_edition(chapter)):
        found = {ex.label: ex for ex in find_exercises(edition)}
        for ex in asking:
            cell = edition.cells[found[ex.label].prediction_cell]
            assert WORDS_TAG in cell.metadata.tags and cell.source.strip() == WORDS_PROMPT
            assert found[ex.label].prediction_cell == found[ex.label].cell + 1  # right under the exercise's text
    label = asking[0].label
    student_exercises = find_exercises(student)
    cell = student.cells[student_exercises[[e.label for e in student_exercises].index(label)].prediction_cell]
    cell.source += "They agree because each row of P sums to one."
    assert assemble(student, book, tmp_path).predictions[label] == "They agree because each row of P sums to one."
