"""scripts/book_editions/plain_markdown.py: MyST roles and directives become the plain Markdown the website shows."""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent

import book_toc  # noqa: E402
from book_editions.plain_markdown import ChapterText, MystError, chapter_number, exercise_heading, myst_left  # noqa: E402

BIB = """
@misc{solo2020, author = {Solo, Han}, title = {One}, year = {2020}}
@misc{duo2021, author = {First, Ann and Second, Bob}, title = {Two}, year = {2021}}
@misc{trio2022, author = {Uno, A. and Dos, B. and Tres, C.}, title = {Three}, year = {2022}}
"""


def glue_output(name: str, text: str):
    return new_output("display_data", data={"application/papermill.record/text/plain": text},
                      metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


@pytest.fixture
def book(tmp_path):
    """A two-chapter book: _toc.yml, references.bib and chapter 2 with a figure, equations and exercises."""
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n- caption: Chapters\n  numbered: true\n  chapters:\n"
        "  - file: chapters/01_a\n  - file: chapters/02_b\n- caption: More\n  chapters:\n  - file: api\n")
    (tmp_path / "references.bib").write_text(BIB)
    nb = new_notebook(cells=[
        new_markdown_cell("# Chapter\n\n(sec-start)=\n## Getting started\n\n$$\na = b\n$$ (eq-one)"),
        new_code_cell("glue(...)", outputs=[glue_output("w", "0.8807970285415649"), glue_output("n", "16384"),
                                            glue_output("s", "'hello'")]),
        new_code_cell("plot()", metadata={"mystnb": {"figure": {"name": "fig-first", "caption": "A plot."}}}),
        new_markdown_cell("```{math}\n:label: eq-two\nc = d\n```"),
        new_code_cell("plot()", metadata={"mystnb": {"figure": {"name": "fig-second", "caption": "Another."}}}),
        new_markdown_cell("```{exercise} Predict, then run: first (easy)\n:label: ex-first\n\nDo it.\n```"),
        new_markdown_cell("```{exercise} Second (hard)\n:label: ex-second\n\nDo more, see {eq}`eq-one`.\n```"),
    ])
    path = tmp_path / "chapters" / "02_b.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    first = new_notebook(cells=[new_markdown_cell("# The first chapter\n\n$$\nx\n$$ (eq-first)"),
                                new_code_cell("plot()", metadata={"mystnb": {"figure": {"name": "fig-other"}}})])
    nbformat.write(first, tmp_path / "chapters" / "01_a.ipynb")
    return ChapterText.of(nb, path, tmp_path)


def test_numbers_follow_the_toc_and_the_order_of_appearance(book):
    assert book.chapter == 2
    assert {label: t.number for label, t in book.targets.items() if t.kind != "section"} == {
        "eq-one": "2.1", "fig-first": "2.1", "eq-two": "2.2", "fig-second": "2.2", "ex-first": "2.1",
        "ex-second": "2.2"}
    assert book.plain("See {numref}`fig-second`, {numref}`ex-second` and {ref}`sec-start`.") == \
        "See Figure 2.2, Exercise 2.2 and Getting started."
    assert book.plain("Equation {eq}`eq-two` follows from {eq}`eq-one`.") == "Equation (2.2) follows from (2.1)."
    assert book.plain("{numref}`Plot %s <fig-first>`") == "Plot 2.1"


def test_references_to_other_chapters_and_pages(book):
    assert book.plain("As {numref}`fig-other` and equation {eq}`eq-first` showed") == \
        "As Figure 1.1 and equation (1.1) showed"
    assert book.plain("See {doc}`01_a`, {doc}`the start <01_a>`.") == "See The first chapter, the start."


def test_small_inline_roles(book):
    assert book.plain("H{sub}`2`O, x{sup}`2`, {kbd}`Ctrl`, {term}`softmax`, {abbr}`GQA (grouped-query attention)`") == \
        'H<sub>2</sub>O, x<sup>2</sup>, <kbd>Ctrl</kbd>, softmax, <abbr title="grouped-query attention">GQA</abbr>'


def test_a_kind_named_before_the_reference_is_not_repeated(book):
    assert book.plain("the exercise {ref}`ex-first` and Figure {numref}`fig-first`") == \
        "the exercise 2.1 and Figure 2.1"


def test_glued_values_are_formatted_as_myst_nb_formats_them(book):
    assert book.plain("{glue:text}`w:.4f`, {glue:text}`w:.1%`, {glue:text}`n:,d`, {glue:text}`s`, {glue}`n`") == \
        "0.8808, 88.1%, 16,384, hello, 16384"


def test_citations_are_author_year(book):
    assert book.plain("{cite:t}`solo2020`, {cite:t}`duo2021`, {cite:p}`trio2022`, {cite:p}`solo2020,duo2021`") == \
        "Solo (2020), First and Second (2021), (Uno et al., 2022), (First and Second, 2021, Solo, 2020)"
    # several in one role: in the bibliography's order (by author), as sphinxcontrib-bibtex writes them


def test_directives_become_plain_markdown(book):
    exercise = book.plain("```{exercise} Predict, then run: first (easy)\n:label: ex-first\n\nDo it.\n```")
    assert exercise == "### Exercise 2.1 (easy): Predict, then run: first\n\nDo it.\n\n*Label: `ex-first`*"
    assert book.plain("```{note}\nMind the gap.\n\nTwice.\n```") == "> **Note**\n>\n> Mind the gap.\n>\n> Twice."
    assert book.plain(":::{admonition} Why?\nBecause.\n:::") == "> **Why?**\n>\n> Because."
    assert book.plain("```{dropdown} More\n:open:\nHidden.\n```") == "> **More**\n>\n> Hidden."
    assert book.plain("```{margin}\nAside.\n```") == "> Aside."
    assert book.plain("(sec-start)=\n## Getting started") == "## Getting started"
    assert book.plain("$$\na = b\n$$ (eq-one)") == "$$\\begin{equation*}\na = b\n\\tag{2.1}\n\\end{equation*}$$"
    assert book.plain("so $$x^2$$ and $y$") == "so $$\\begin{equation*}x^2\\end{equation*}$$ and $y$"  # not numbered
    assert book.plain("````{tip}\n```{math}\n:label: eq-two\nc = d\n```\n````") == \
        "> **Tip**\n>\n> $$\\begin{equation*}\n> c = d\n> \\tag{2.2}\n> \\end{equation*}$$"
    assert book.plain("```{solution} ex-first\nThe answer.\n```\nAfter.") == "After."


@pytest.mark.parametrize("source, message", [
    ("{download}`data.csv`", "the role {download} has no plain-Markdown form; add one to ROLES in "
                             "scripts/book_editions/plain_markdown.py (it has abbr, cite,"),
    ("{doc}`missing`", "no page missing.ipynb or missing.md"),
    ("```{figure-md} x\ny\n```", "the directive {figure-md} has no plain-Markdown form; add one to DIRECTIVES"),
    ("```{solution-start} ex-first\n```", "the gate {solution-start} reached ResolveMyst: in the edition's list of "
                                          "steps, a gate step (FoldSolution, DropGated) must come before ResolveMyst"),
    ("```{exercise} No label (easy)\nDo it.\n```", "an {exercise} has no :label:; give it one"),
    ("```{note}\nnever closed", "is never closed"),
    ("{numref}`fig-elsewhere`", "points to no figure, equation, exercise or labelled section of the book's chapters"),
    ("{glue:text}`missing:.2f`", "no cell glues 'missing'"),
    ("{cite:p}`nobody1999`", "not in references.bib"),
])
def test_what_cannot_be_resolved_is_an_error_that_says_what(book, source, message):
    with pytest.raises(MystError, match=message.replace("{", r"\{").replace("}", r"\}").replace("(", r"\(")
                       .replace(")", r"\)")):
        book.plain(source)


def test_chapter_number_rejects_a_file_outside_the_toc(tmp_path):
    assert chapter_number(ROOT / "chapters" / "01_weighted_average.ipynb") == 1
    with pytest.raises(MystError, match="not a chapter listed in"):
        chapter_number(ROOT / "chapters" / "99_missing.ipynb")


def test_exercise_heading_and_myst_left():
    assert exercise_heading("1.2", "Self-attention as a function (medium)") == \
        "### Exercise 1.2 (medium): Self-attention as a function"
    assert exercise_heading("3.1", "Untitled") == "### Exercise 3.1: Untitled"
    assert myst_left("$\\mathbf{x}_{ij}$ and `code` and {{ subst }}") == []
    assert myst_left("a {numref}`x` b\n```{note}\n:label: y\n$$ (z)\n(t)=") == \
        ["{numref}`x`", "```{note}", ":label: y", "$$ (z)", "(t)="]


def test_exercise_heading_takes_the_level_after_a_dash(book):
    exercise = book.plain("```{exercise} Predict, then run: first — easy\n:label: ex-first\n\nDo it.\n```")
    assert exercise.startswith("### Exercise 2.1 (easy): Predict, then run: first\n")


def test_the_tables_are_the_list_of_supported_syntax(book):
    """Every role and directive in ROLES and DIRECTIVES resolves; the chapters use nothing else (test_make_student)."""
    from book_editions.plain_markdown import DIRECTIVES, ROLES

    samples = {"glue": "n", "glue:text": "w:.2f", "glue:md": "s", "math": "x", "eq": "eq-one", "numref": "fig-first",
               "ref": "sec-start", "cite": "solo2020", "cite:p": "solo2020", "cite:ps": "solo2020",
               "cite:t": "duo2021", "cite:ts": "duo2021", "sub": "2", "sup": "2", "kbd": "C", "abbr": "A (a)",
               "term": "softmax", "doc": "01_a"}
    assert set(samples) == set(ROLES)
    for role, content in samples.items():
        assert "{" not in book.plain(f"{{{role}}}`{content}`"), role
    for name in DIRECTIVES:
        options = ":label: ex-first\n" if name == "exercise" else ""
        assert myst_left(book.plain(f"```{{{name}}} Title\n{options}Body.\n```")) == [], name


def test_an_exercise_has_one_number_and_one_heading_format(book):
    """The number comes from numbering.py, the heading from EXERCISE_HEADING; the grader reads both back."""
    from book_editions.exercise_cells import find_exercises, read_heading
    from book_editions.numbering import exercise_number

    assert book.exercise_number("ex-second") == exercise_number(book.targets, "ex-second", book.name) == "2.2"
    with pytest.raises(MystError, match="no {exercise} of the chapter has the label 'fig-first'"):
        book.exercise_number("fig-first")
    assert read_heading(book.plain("```{exercise} Second (hard)\n:label: ex-second\n\nDo more.\n```")) == (
        "2.2", None)  # a label that is not the book's ex-chNN-name is not read back
    for path in book_toc.chapters():  # what the editions write, read back
        nb = nbformat.read(path, as_version=4)
        text = ChapterText.of(nb, path)
        for ex in find_exercises(nb):
            assert read_heading(text.plain(nb.cells[ex.cell].source)) == (text.exercise_number(ex.label), ex.label)
    assert read_heading("## Exercise 2.2: edited by a learner") == ("2.2", None)
    assert read_heading("### Exercises") is None
