"""Write student editions of chapters: solutions become stubs, the self-check cells stay, and the text reads
well in plain Jupyter.

    python scripts/make_student.py chapters/*.ipynb --out student      (what `make student` runs)

In a student edition:

- each code cell tagged ``solution`` holds nbgrader's stub (``# YOUR CODE HERE``, ``raise NotImplementedError(...)``,
  whose message names the exercise and says what to do, so that Run All stops there with a sentence rather than
  a bare error) and no output; the ``{solution-start}`` and ``{solution-end}`` cells, and whatever lies between them that is
  not code, are gone (so no empty dropdowns and no written solutions);
- each exercise is a heading ("### Exercise 1.2 (medium): Self-attention as a function") whose cell metadata
  ``exercise`` keeps its label; a "predict, then run" exercise is followed by a markdown cell, tagged
  ``exercise-prediction``, for the written prediction: it starts with a line that says so (an empty markdown
  cell is an invisible gap in JupyterLab);
- the check cells stay, tagged ``exercise-check``, with their outputs cleared, and cannot be edited or deleted
  (cell metadata ``editable`` and ``deletable`` false, which JupyterLab and Jupyter Notebook respect);
- every markdown cell is plain Markdown (scripts/plain_markdown.py): glued values, references, citations and
  directives are resolved as the website resolves them; the glue records in the outputs are dropped;
- under each figure, a markdown cell (tagged ``figure-caption``) shows its number and caption, as the website does;
- everything else, including the outputs of the teaching cells, is as in the book.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from book_toc import ROOT
from edition_cells import figure_caption, is_glue_record, prediction_cell, stub
from exercise_cells import CHECK_TAG, EXERCISE_META, SOLUTION_TAG, find_exercises, is_solution, read
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import Preprocessor
from plain_markdown import ChapterText, MystError
from traitlets import Unicode


def inside_gates(nb: nbformat.NotebookNode) -> set[int]:
    """Indices of the cells between a ``{solution-start}`` cell and its ``{solution-end}`` cell (gates included)."""
    inside, open_at = set(), None
    for ex in find_exercises(nb):
        for kind, _, i in ex.gates:
            if kind == "start":
                open_at = i
            elif open_at is not None:
                inside.update(range(open_at, i + 1))
                open_at = None
    return inside


def chapter_path(resources: dict) -> Path:
    meta = resources.get("metadata", {})
    return Path(meta.get("path", ".")) / f"{meta.get('name', 'chapter')}.ipynb"


def exercise_metadata(ex, text: ChapterText) -> dict:
    return {"label": ex.label, "title": ex.title, "level": ex.level,
            "number": text.targets[ex.label].number if ex.label in text.targets else None}


class StudentEdition(Preprocessor):
    """Turn a chapter (read by nbconvert) into its student edition; see the module's docstring."""

    root = Unicode(str(ROOT), help="the book's folder: its _toc.yml numbers the chapters").tag(config=True)

    def preprocess(self, nb, resources):
        text = ChapterText.of(nb, chapter_path(resources), Path(self.root))
        exercises = {ex.cell: ex for ex in find_exercises(nb)}
        checks = {ex.check_cell for ex in exercises.values()}
        owner = {i: ex for ex in exercises.values() for i in range(ex.cell, (ex.check_cell or ex.cell) + 1)}
        gated = inside_gates(nb)
        cells = []
        for i, cell in enumerate(nb.cells):
            if i in gated and not (cell.cell_type == "code"):
                continue  # the gates, and any written solution between them
            if cell.cell_type == "markdown":
                cell.source = text.plain(cell.source)
                if i in exercises:
                    cell.metadata[EXERCISE_META] = exercise_metadata(exercises[i], text)
                    cells.append(cell)
                    if exercises[i].written:
                        cells.append(prediction_cell(cell, words=exercises[i].words))
                    continue
            elif cell.cell_type == "code":
                if is_solution(cell) or i in gated:
                    ex = owner.get(i)
                    number = text.targets[ex.label].number if ex and ex.label in text.targets else "?"
                    cell.source, cell.outputs, cell.execution_count = stub(number, ex and ex.label), [], None
                    _tag(cell, SOLUTION_TAG)
                elif i in checks:  # read-only in JupyterLab and Jupyter Notebook, so no answer is typed into one
                    _tag(cell, CHECK_TAG)
                    cell.metadata.update(editable=False, deletable=False)
                    cell.outputs, cell.execution_count = [], None
                else:
                    cell.outputs = [out for out in cell.outputs if not is_glue_record(out)]
            cells.append(cell)
            if caption := figure_caption(cell, text):
                cells.append(caption)
        nb.cells = cells
        return nb, resources


def _tag(cell, tag: str) -> None:
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="chapter notebooks (.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("student"), help="output folder (default: student)")
    args = parser.parse_args(argv)
    for chapter in args.chapters:
        if chapter.suffix != ".ipynb" or not chapter.is_file():
            print(f"error: {chapter} is not a notebook file; pass chapters/*.ipynb", file=sys.stderr)
            return 2
    for chapter in args.chapters:
        try:
            target = make_student(chapter, args.out)
        except MystError as exc:  # not a chapter of _toc.yml, say
            print(f"error: {exc}", file=sys.stderr)
            return 2
        stubs = sum(1 for cell in read(target).cells if is_solution(cell))
        print(f"wrote {target} ({stubs} solution cells replaced by stubs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
