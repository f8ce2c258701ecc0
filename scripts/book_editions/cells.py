"""The cells an edition adds to its chapter, and the small facts about a chapter's cells the steps share.

Every edition is a notebook made for plain Jupyter and Colab from a MyST chapter, and adds cells the chapter
does not have: a visible "**Figure 1.1:** caption" under each figure (the website prints the caption from the
code cell's metadata, which Jupyter never shows), a prediction cell under each "predict, then run" exercise,
a stub in place of a solution. A new cell's id is made from the id of the chapter's cell it belongs to, so an
edition made twice from the same chapter is the same file (tests/test_make_editions.py compares the committed
editions with freshly made ones).
"""

from __future__ import annotations

import textwrap

import nbformat

from .exercise_cells import PREDICTION_PROMPT, PREDICTION_TAG, WORDS_PROMPT, WORDS_TAG, Exercise
from .plain_markdown import ChapterText

CAPTION_TAG = "figure-caption"  # the markdown cell under a figure that shows its number and caption


def is_glue_record(output) -> bool:
    """True for the invisible ``display_data`` output through which myst-nb's ``glue`` records a value."""
    return output.get("output_type") == "display_data" and "scrapbook" in output.get("metadata", {})


def tag(cell: nbformat.NotebookNode, name: str) -> None:
    """Add the tag ``name`` to ``cell``'s tags, unless it has it already."""
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if name not in tags:
        tags.append(name)


def exercise_metadata(ex: Exercise, text: ChapterText) -> dict:
    """The ``exercise`` cell metadata of an exercise's heading: its label, title, level and number."""
    return {"label": ex.label, "title": ex.title, "level": ex.level, "number": text.exercise_number(ex.label)}


def derived_id(cell: nbformat.NotebookNode, suffix: str) -> str:
    """The id of a cell an edition adds after (or in place of) the chapter's ``cell``: that cell's id and a suffix."""
    return f"{cell.get('id') or 'cell'}-{suffix}"[-64:]  # nbformat allows 64 characters


def new_markdown(after: nbformat.NotebookNode, suffix: str, source: str, **metadata) -> nbformat.NotebookNode:
    """A markdown cell to put after (or in place of) the chapter's cell ``after``, its id derived from that cell's."""
    return nbformat.v4.new_markdown_cell(source, id=derived_id(after, suffix), metadata=metadata)


def figure_caption(cell: nbformat.NotebookNode, text: ChapterText) -> nbformat.NotebookNode | None:
    """The caption cell to put under ``cell`` when it draws a numbered figure, else None."""
    figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
    if cell.cell_type != "code" or not figure.get("name"):
        return None
    number = text.targets[figure["name"]].number
    caption = text.plain(str(figure.get("caption", ""))).strip()
    source = f"**Figure {number}:** {caption}" if caption else f"**Figure {number}**"
    return new_markdown(cell, "caption", source, tags=[CAPTION_TAG])


def prediction_cell(exercise: nbformat.NotebookNode, words: bool = False) -> nbformat.NotebookNode:
    """The markdown cell, under a "predict, then run" exercise's text, where the learner writes the prediction;
    with ``words``, under an exercise that asks for an answer in words, where the learner writes it."""
    if words:
        return new_markdown(exercise, "words", WORDS_PROMPT + "\n\n", tags=[WORDS_TAG])
    return new_markdown(exercise, "prediction", PREDICTION_PROMPT + "\n\n", tags=[PREDICTION_TAG])


STUB_WIDTH = 79  # a stub's lines fit a notebook cell's width, which does not wrap code


def stub(number: str, label: str | None) -> str:
    """A student edition's solution cell: nbgrader's stub, whose error says which exercise waits and what to do,
    its message written over short lines (one long line would run past the cell's edge)."""
    name = f"Exercise {number}" + (f" ({label})" if label else "")
    message = (f"{name} is not answered yet: replace the lines of this cell with your code, run it, "
               "then run the check cell below it.")
    pieces = textwrap.wrap(message, STUB_WIDTH - 6, drop_whitespace=False, break_long_words=False)
    return "# YOUR CODE HERE\nraise NotImplementedError(\n" + "\n".join(f"    {piece!r}" for piece in pieces) + ")"


__all__ = ["CAPTION_TAG", "STUB_WIDTH", "derived_id", "exercise_metadata", "figure_caption", "is_glue_record",
           "new_markdown", "prediction_cell", "stub", "tag"]
