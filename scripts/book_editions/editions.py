"""Every edition of the chapters, with the make target and the script that write it.

A new edition is added here too (CONTRIBUTING.md, "Adding an edition"): tests/test_edition_steps.py checks that
each edition defined in book_editions is listed, that its make target runs its script, that its steps keep the
rules of order (book_editions/walk.py) and that each step is tested.
"""

from __future__ import annotations

from dataclasses import dataclass

from .learners import LAB, LEARNERS
from .nbgrader_course import NBGRADER
from .student import STUDENT
from .walk import Edition


@dataclass(frozen=True)
class Made:
    """An edition and what makes it: ``make <target>``, which runs ``script``."""

    edition: Edition
    target: str
    script: str


EDITIONS = (
    Made(LEARNERS, "editions", "scripts/make_editions.py"),  # committed in editions/, opened by Colab and Binder
    Made(LAB, "lab", "scripts/lab.py"),                      # the learner's own copies, in my-notebooks/
    Made(STUDENT, "student", "scripts/make_student.py"),
    Made(NBGRADER, "nbgrader", "scripts/make_nbgrader.py"),
)

__all__ = ["EDITIONS", "Made"]
