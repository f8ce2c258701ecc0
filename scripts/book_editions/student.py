"""The student editions: each solution a stub, the checks locked, the text in plain Markdown.

scripts/make_student.py says what an edition holds; here it is as its list of steps, ``STUDENT``, run by
``StudentEdition``, an nbconvert preprocessor, so that other nbconvert exports can reuse it.
"""

from __future__ import annotations

from pathlib import Path

from book_toc import ROOT
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import Preprocessor
from traitlets import Unicode

from .cells import stub, tag
from .chapter import Chapter
from .exercise_cells import CHECK_TAG, SOLUTION_TAG
from .steps import DropGated, DropGlueRecords, ExerciseMetadata, FigureCaption, PredictionCell, ResolveMyst
from .walk import At, Edition, Step


class StubSolution(Step):
    """A solution code cell (tagged ``solution``, or between the gates) holds nbgrader's stub, whose error names
    the exercise and says what to do, and no output."""

    def cell(self, at: At) -> None:
        if at.index not in at.chapter.solution_code:
            return
        ex = at.chapter.owner.get(at.index)
        at.cell.source, at.cell.outputs, at.cell.execution_count = stub(at.chapter.number(ex), ex.label), [], None
        tag(at.cell, SOLUTION_TAG)


class LockCheck(Step):
    """A check cell is tagged ``exercise-check``, has no output, and is read-only in JupyterLab and Jupyter
    Notebook, so that no answer is typed into it."""

    def cell(self, at: At) -> None:
        if at.is_code and at.index in at.chapter.checks and at.index not in at.chapter.solution_code:
            tag(at.cell, CHECK_TAG)
            at.cell.metadata.update(editable=False, deletable=False)
            at.cell.outputs, at.cell.execution_count = [], None


# The gate step, DropGated, comes before ResolveMyst (book_editions/walk.py's rules of order).
STUDENT = Edition("student", [DropGated({"markdown", "raw"}), ResolveMyst(), ExerciseMetadata(), PredictionCell(),
                              StubSolution(), LockCheck(), DropGlueRecords(), FigureCaption()])


def chapter_path(resources: dict) -> Path:
    """The path of the notebook nbconvert read, from its ``resources``."""
    meta = resources.get("metadata", {})
    return Path(meta.get("path", ".")) / f"{meta.get('name', 'chapter')}.ipynb"


class StudentEdition(Preprocessor):
    """Turn a chapter (read by nbconvert) into its student edition: ``STUDENT``'s steps."""

    root = Unicode(str(ROOT), help="the book's folder: its _toc.yml numbers the chapters").tag(config=True)

    def preprocess(self, nb, resources):
        return STUDENT.apply(Chapter.read(chapter_path(resources), Path(self.root), nb)), resources


def student_exporter(root: Path = ROOT) -> NotebookExporter:
    """An nbconvert exporter that writes the student edition of a chapter of the book in ``root``."""
    exporter = NotebookExporter()
    exporter.register_preprocessor(StudentEdition(root=str(root)), enabled=True)
    return exporter


def make_student(chapter: Path, out_dir: Path, root: Path = ROOT) -> Path:
    """Write the student edition of ``chapter`` to ``out_dir`` (same file name) and return its path."""
    body, _ = student_exporter(root).from_filename(str(chapter))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / Path(chapter).name
    target.write_text(body, encoding="utf-8")
    return target


__all__ = ["STUDENT", "LockCheck", "StubSolution", "StudentEdition", "chapter_path", "make_student",
           "student_exporter"]
