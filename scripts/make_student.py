"""Write student editions of chapters: solutions become stubs, the self-check cells stay.

    python scripts/make_student.py chapters/*.ipynb --out student      (what `make student` runs)

In a student edition each code cell tagged ``solution`` holds nbgrader's stub (``# YOUR CODE HERE``,
``raise NotImplementedError()``) and no output, the ``{solution-start}`` and ``{solution-end}`` cells are
gone (so no empty dropdowns), and the check cells are kept with their outputs cleared. Everything else,
including the outputs of the teaching cells, is as in the book.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exercise_cells import CHECK_TAG, find_exercises, is_gate, is_solution, read
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import Preprocessor, TagRemovePreprocessor

STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
GATE_TAG = "solution-gate"  # added to the solution-start/-end cells, which TagRemovePreprocessor then drops;
# check cells get CHECK_TAG, and TagRemovePreprocessor clears their outputs and those of the solution cells


class StubSolutions(Preprocessor):
    """Replace each solution cell's source by the stub; tag the gate and check cells for removal."""

    def preprocess(self, nb, resources):
        for ex in find_exercises(nb):
            if ex.check_cell is not None:
                _tag(nb.cells[ex.check_cell], CHECK_TAG)
        for cell in nb.cells:
            if is_solution(cell):
                cell.source = STUB
            elif is_gate(cell):
                _tag(cell, GATE_TAG)
        return nb, resources


def _tag(cell, tag: str) -> None:
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


def student_exporter() -> NotebookExporter:
    """An nbconvert exporter that writes a chapter's student edition."""
    exporter = NotebookExporter()
    exporter.register_preprocessor(StubSolutions(), enabled=True)
    exporter.register_preprocessor(TagRemovePreprocessor(
        remove_cell_tags={GATE_TAG}, remove_all_outputs_tags={"solution", CHECK_TAG}), enabled=True)
    return exporter


def make_student(chapter: Path, out_dir: Path) -> Path:
    """Write the student edition of ``chapter`` to ``out_dir`` (same file name) and return its path."""
    body, _ = student_exporter().from_filename(str(chapter))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / chapter.name
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
        target = make_student(chapter, args.out)
        stubs = sum(1 for cell in read(target).cells if is_solution(cell))
        print(f"wrote {target} ({stubs} solution cells replaced by stubs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
