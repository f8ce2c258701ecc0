"""What a check says, in the words other programs read (every chapter): the one place its lines are written and parsed.

A check prints one line per answer it accepts, :func:`correct_line` ("✓ W: correct"); in a learners' edition, for the
book's folded solution under an untouched answer cell, "✓ W: correct (the book's solution)" after the two lines of
:func:`waiting_note`. It fails by raising ``CheckFailed`` (a wrong answer, with a hint) or ``NotAnswered`` (the
answer cell defines no answer of the learner's), which a kernel reports as "CheckFailed: <message>". Each solution
code cell of a learners' edition begins with :data:`SOLUTION_LINE`, by which a check tells the folded solution's
names from the learner's.

Three programs read these: the checks themselves (``_answer.py``), the editions (``scripts/book_editions/``, which
write the solution line and show what Run All prints under an untouched answer cell) and the grader
(``scripts/grading/``, which reads a check cell's output and error). They import the formats and their parsers from
here, so a change of wording is one edit.
"""

from __future__ import annotations

import re

from ._failure import CheckFailed, NotAnswered

__all__ = [
    "BOOK_SOLUTION",
    "PASS_MARK",
    "SOLUTION_LINE",
    "SOLUTION_RE",
    "book_solution_passed",
    "correct_line",
    "failure",
    "parse_correct_line",
    "shows_a_pass",
    "waiting_note",
]

#: The first line of every solution code cell of a learners' edition (every chapter; ``{number}``: "1.2"), written
#: by ``scripts/book_editions/learners.py``'s SolutionLine step.
SOLUTION_LINE = ("# The book's solution to Exercise {number} (folded, and run without output): write yours under "
                 "\"Your answer\" below.")
#: :data:`SOLUTION_LINE`'s parser: its ``number`` group is the exercise's number (every chapter).
SOLUTION_RE = re.compile(r"^# The book's solution to Exercise (?P<number>\d+\.\d+)\b")
#: What every line of an accepted answer begins with (every chapter).
PASS_MARK = "✓"
#: How a line of an accepted answer ends when the answer was the book's folded solution (every chapter).
BOOK_SOLUTION = "(the book's solution)"
_CORRECT_RE = re.compile(rf"^{PASS_MARK} (?P<name>.+?): correct(?: (?P<book>{re.escape(BOOK_SOLUTION)}))?$")


def correct_line(name: str, book_solution: bool = False) -> str:
    """'✓ W: correct', or for the book's own solution '✓ W: correct (the book's solution)' (every chapter)."""
    return f"{PASS_MARK} {name}: correct" + (f" {BOOK_SOLUTION}" if book_solution else "")


def parse_correct_line(line: str) -> tuple[str, bool] | None:
    """(name, whether it was the book's solution) of a :func:`correct_line`, else None (every chapter)."""
    found = _CORRECT_RE.match(line)
    return (found["name"], found["book"] is not None) if found else None


def waiting_note(number: str) -> str:
    """The two lines a check prints, once, when it checked the book's solution to Exercise ``number`` (every
    chapter)."""
    return (f"Exercise {number} is not answered yet: this checked the book's folded solution.\n"
            f"Write your code in the cell above, in place of its three lines (or in cells you add between the "
            f"solution and this check), run it, then run this check.")


def shows_a_pass(stdout: str) -> bool:
    """True when a check cell's printed text shows an accepted answer (a :data:`PASS_MARK`) (every chapter)."""
    return PASS_MARK in stdout


def book_solution_passed(stdout: str) -> bool:
    """True when a check cell's printed text says it accepted the book's folded solution (every chapter)."""
    return BOOK_SOLUTION in stdout


def failure(error: str) -> tuple[str, str] | None:
    """For a check's error as a kernel reports it, "CheckFailed: <message>": ("failed", message) for a wrong answer,
    ("not answered", message) when the answer cell defines no answer; None for any other error (every chapter)."""
    kind, _, message = error.partition(":")
    found = {NotAnswered.__name__: "not answered", CheckFailed.__name__: "failed"}.get(kind.strip())
    return (found, message.strip()) if found else None
