"""Find the exercises of a chapter notebook by the book's exercise convention.

An exercise is, in this order (see instructors.md, "Adding a chapter"):

1. a markdown cell with an ``{exercise}`` directive and a ``:label:`` (``ex-chNN-name``);
2. a markdown cell with ``{solution-start} <label>`` and ``:class: dropdown``;
3. one or more code cells tagged ``solution``;
4. a markdown cell with ``{solution-end}``;
5. an untagged code cell that calls ``check.<fn>(...)``.

Student editions (book_editions/student.py) drop cells 2 and 4, stub cells 3, tag cell 5 ``exercise-check``,
turn cell 1 into a plain Markdown heading ("### Exercise 1.2 (medium): ...", EXERCISE_HEADING) whose cell metadata
``exercise`` keeps the label and the directive's title, and add after a "predict, then run" exercise's
text a markdown answer cell tagged ``exercise-prediction`` (``exercise-words`` after one that asks for an answer in
words, see WORDS_RE). The parser accepts both forms. Used by
the editions (book_editions/chapter.py), the grader (grading/assemble.py), chapter_times.py and the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import nbformat

SOLUTION_TAG = "solution"
CHECK_TAG = "exercise-check"  # student editions tag their check cells, so a moved answer cell cannot pass for one
PREDICTION_TAG = "exercise-prediction"  # the markdown cell of a student edition where the prediction is written
# The first line of that cell, so that it is visibly a place to write (an empty markdown cell renders as a thin gap).
PREDICTION_PROMPT = (
    "**Your prediction** (double-click this cell and write it below this line, before you run anything):"
)
# An exercise that asks for words ("say why", "explain", "in one sentence", a question "Why …?") gets a cell for them
# too, tagged WORDS_TAG, and in nbgrader's course a manually graded cell; an author can mark one that the words
# below miss with the line WORDS_MARKER in its {exercise} cell (a MyST comment: the website does not show it).
WORDS_TAG = "exercise-words"
WORDS_PROMPT = "**Your answer in words** (double-click this cell and write it below this line):"
WORDS_MARKER = "% answer-in-words"
WORDS_MARKER_RE = re.compile(r"^[ \t]*% ?answer-in-words[ \t]*$\n?", re.MULTILINE)
WORDS_RE = re.compile(
    r"\b(?:say|explain|tell)\b[^.?!]*\bwhy\b|\bexplain\b|\bwhy\b[^.?!]*\?"
    r"|\bin (?:one|a|two) sentences?\b|\bin (?:your own )?words\b",
    re.IGNORECASE,
)
_CODE_OR_MATH = re.compile(r"^(```+|:::+)[^\n]*$|`[^`\n]+`|\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL | re.MULTILINE)
EXERCISE_META = "exercise"  # cell metadata of a student edition's exercise heading: {"label", "title", "number"}
EXERCISE_RE = re.compile(r"^(```+|:::+)\{exercise\}[ \t]*(?P<title>.*)$", re.MULTILINE)
LABEL_RE = re.compile(r"^:label:[ \t]*(?P<label>\S+)", re.MULTILINE)
GATE_RE = re.compile(r"^(```+|:::+)\{solution-(?P<kind>start|end)\}[ \t]*(?P<label>\S*)", re.MULTILINE)
# A whole {solution-start} or {solution-end} block (fence, options, closing fence), to take it out of a cell's text.
GATE_BLOCK = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution-(?:start|end)\}.*?^(?P=fence)[ \t]*$\n?",
                        re.MULTILINE | re.DOTALL)
CHECK_CALL_RE = re.compile(r"\bcheck\.\w+\(")
LEVEL_RE = re.compile(r"\b(easy|medium|hard)\b", re.IGNORECASE)
LEVEL_SUFFIX_RE = re.compile(r"\s*(?:\((easy|medium|hard)\)|[—–-]\s*(easy|medium|hard))\s*$", re.IGNORECASE)
# An edition's exercise heading and the line under its text that shows its label: the one format the editions
# write (book_editions/plain_markdown.py) and the grader reads back when a notebook lost its cell metadata
# (grading/assemble.py). ``level`` is " (medium)" or "", ``title`` ": Self-attention as a function" or "".
EXERCISE_HEADING = "### Exercise {number}{level}{title}"
SHOWN_LABEL = "*Label: `{label}`*"
# Their parsers: any heading level (a learner may change it), the number right after the word.
EXERCISE_HEADING_RE = re.compile(r"^#{1,6}[ \t]*Exercise[ \t]+(?P<number>\d+\.\d+)\b")
SHOWN_LABEL_RE = re.compile(r"^[ \t]*\*Label: `(?P<label>ex-ch\d+-[\w-]+)`\*[ \t]*$", re.MULTILINE)
PREDICT_RE = re.compile(r"predict,? (then|and) run", re.IGNORECASE)


@dataclass
class Exercise:
    """One exercise: indices into ``nb.cells`` of the cells that make it up."""

    label: str | None
    title: str
    cell: int                                                  # the {exercise} directive
    text: str = ""                                             # the directive cell's source
    gates: list[tuple[str, str, int]] = field(default_factory=list)  # (start|end, label, index)
    solution_cells: list[int] = field(default_factory=list)    # code cells tagged `solution`
    answer_cells: list[int] = field(default_factory=list)      # all code cells before the check cell
    check_cell: int | None = None                              # the untagged cell calling check.<fn>
    prediction_cell: int | None = None  # a student edition's cell for the written prediction (or answer in words)

    @property
    def level(self) -> str | None:
        """'easy', 'medium' or 'hard' as written in the title (the last one if several), else None."""
        found = LEVEL_RE.findall(self.title)
        return found[-1].lower() if found else None

    @property
    def predict(self) -> bool:
        """True for a "predict, then run" exercise (said in its title or its text)."""
        return bool(re.search(r"predict", self.title, re.IGNORECASE) or PREDICT_RE.search(self.text))

    @property
    def words(self) -> bool:
        """True for an exercise, not "predict, then run" (whose prediction cell takes the words), that asks for
        words: its text says so (WORDS_RE, outside code and math) or holds the line WORDS_MARKER."""
        prose = _CODE_OR_MATH.sub(" ", self.text)
        return not self.predict and bool(WORDS_MARKER_RE.search(self.text) or WORDS_RE.search(prose))

    @property
    def written(self) -> bool:
        """True when the exercise asks for written words: a prediction, or an answer in words."""
        return self.predict or self.words


def exercise_heading(number: str, title: str) -> str:
    """'### Exercise 1.2 (medium): Self-attention as a function' from the directive's title (EXERCISE_HEADING)."""
    levels = LEVEL_RE.findall(title)
    bare = LEVEL_SUFFIX_RE.sub("", title).strip()
    return EXERCISE_HEADING.format(number=number, level=f" ({levels[-1].lower()})" if levels else "",
                                   title=f": {bare}" if bare else "")


def shown_label(label: str) -> str:
    """The line at the end of an exercise's text in an edition that shows its label: '*Label: `ex-ch01-batch`*'."""
    return SHOWN_LABEL.format(label=label)


def read_heading(source: str) -> tuple[str, str | None] | None:
    """(number, the label its text shows or None) of a markdown cell that is an edition's exercise heading (as
    EXERCISE_HEADING and SHOWN_LABEL write it), else None."""
    if not (m := EXERCISE_HEADING_RE.match(source)):
        return None
    shown = SHOWN_LABEL_RE.search(source)
    return m.group("number"), shown.group("label") if shown else None


def written_prediction(source: str) -> str:
    """What a learner wrote in a prediction (or words) cell: its text without the prompt line (empty if nothing
    was written)."""
    text = source.strip()
    for prompt in (PREDICTION_PROMPT, WORDS_PROMPT):
        if text.startswith(prompt):
            return text.removeprefix(prompt).strip()
    return text


def is_solution(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def is_gate(cell: nbformat.NotebookNode) -> bool:
    """True for a markdown cell that opens or closes a gated solution."""
    return cell.cell_type == "markdown" and bool(GATE_RE.search(cell.source))


def exercise_meta(cell: nbformat.NotebookNode) -> dict | None:
    """The ``exercise`` metadata of a student edition's exercise heading cell, else None."""
    meta = cell.get("metadata", {}).get(EXERCISE_META)
    return meta if cell.cell_type == "markdown" and isinstance(meta, dict) and meta.get("label") else None


def find_exercises(nb: nbformat.NotebookNode) -> list[Exercise]:
    """The exercises of ``nb`` in order. Cells before the first exercise belong to none."""
    exercises: list[Exercise] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and (m := EXERCISE_RE.search(cell.source)):
            label = LABEL_RE.search(cell.source)
            exercises.append(Exercise(label.group("label") if label else None, m.group("title").strip(), i,
                                      cell.source))
        elif meta := exercise_meta(cell):
            exercises.append(Exercise(meta["label"], str(meta.get("title", "")), i, cell.source))
    ends = [ex.cell for ex in exercises[1:]] + [len(nb.cells)] if exercises else []
    for ex, end in zip(exercises, ends, strict=True):
        span = range(ex.cell + 1, end)
        for i in span:
            cell = nb.cells[i]
            if cell.cell_type == "markdown":
                ex.gates += [(m.group("kind"), m.group("label"), i) for m in GATE_RE.finditer(cell.source)]
            if is_solution(cell):
                ex.solution_cells.append(i)
        # The check cell comes after the solution: after the last solution-tagged cell and gate cell.
        after = max([ex.cell, *ex.solution_cells, *(g[2] for g in ex.gates)])
        tagged = [i for i in span if CHECK_TAG in nb.cells[i].get("metadata", {}).get("tags", [])]
        written = {PREDICTION_TAG, WORDS_TAG}
        ex.prediction_cell = next((i for i in span if nb.cells[i].cell_type == "markdown"
                                   and written & set(nb.cells[i].get("metadata", {}).get("tags", []))),
                                  None)
        ex.check_cell = tagged[0] if tagged else next(
            (i for i in range(after + 1, end) if nb.cells[i].cell_type == "code"
             and CHECK_CALL_RE.search(nb.cells[i].source)), None)
        last = ex.check_cell if ex.check_cell is not None else end
        ex.answer_cells = [i for i in range(ex.cell + 1, last) if nb.cells[i].cell_type == "code"]
    return exercises


def read(path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)
