"""Write an nbgrader course source from the chapters, ready for ``nbgrader generate_assignment``.

    python scripts/make_nbgrader.py chapters/*.ipynb --out nbgrader-course      (what `make nbgrader` runs)

For each chapter ``chapters/NN_slug.ipynb`` it writes ``<out>/source/chNN/NN_slug.ipynb``, and it writes
``<out>/nbgrader_config.py`` (the course's settings) if there is none. In the notebook, with nbgrader's cell
metadata (schema version 3; ``grade_id`` values are built from the exercise labels):

- each code cell tagged ``solution`` is an autograded answer: its code sits between ``### BEGIN SOLUTION``
  and ``### END SOLUTION``, which ``nbgrader generate_assignment`` replaces by the stub. A written
  solution from the chapter's solution dropdown goes in as comments inside the same region;
- each check cell is a locked autograded test cell worth 1, 2 or 3 points for an easy, medium or hard
  exercise (``<label>-check``); nbgrader restores it from this source before autograding;
- after each "predict, then run" exercise's text comes a manually graded answer cell (markdown,
  ``<label>-prediction``, the same points) holding the chapter's written answer between the markers, which
  the release replaces by "YOUR ANSWER HERE"; so does an exercise that asks for words (say why, explain:
  ``<label>-words``, see scripts/exercise_cells.py), whose written solution goes there rather than into comments;
- every other cell is locked read-only, and the markdown is plain Markdown as in the student editions
  (scripts/plain_markdown.py); the ``{solution-start}``/``{solution-end}`` cells are gone.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

import nbformat
from book_toc import ROOT
from exercise_cells import CHECK_TAG, EXERCISE_META, GATE_BLOCK, SOLUTION_TAG, Exercise, find_exercises, is_solution
from make_student import exercise_metadata, inside_gates, is_glue_record
from plain_markdown import ChapterText, MystError

POINTS = {"easy": 1, "medium": 2, "hard": 3}
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CONFIG = '''\
# nbgrader's settings for this course folder, written by scripts/make_nbgrader.py (edit freely: it is kept).
import os
import warnings

from jupyter_core.paths import jupyter_runtime_dir
from sqlalchemy.exc import SAWarning

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "self-attention-from-scratch"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.Execute.timeout = 120          # seconds a cell may run when autograding; the chapters' cells take a few

# nbgrader 0.9 with SQLAlchemy 2 warns "Object of type <SubmittedAssignment> not in session" on every
# submission, and stores the grades all the same.
warnings.filterwarnings("ignore", category=SAWarning, module="nbgrader")
# ipykernel 7 warns "Kernel is running over TCP without encryption" when its sockets are TCP ports on
# localhost: as files in Jupyter's runtime folder (IPC, on Linux and macOS), they do not use the network.
if os.name == "posix":
    os.makedirs(jupyter_runtime_dir(), exist_ok=True)
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(jupyter_runtime_dir(), f"nbgrader-{os.getpid()}")
'''


def nbgrader_meta(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                  points: int | None = None) -> dict:
    """The ``nbgrader`` cell metadata, schema version 3."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def written_solution(nb: nbformat.NotebookNode, cells: set[int], text: ChapterText) -> str:
    """The prose of an exercise's solution dropdown (its gate cells and markdown between them), in plain Markdown."""
    parts = [GATE_BLOCK.sub("", nb.cells[i].source).strip() for i in sorted(cells) if nb.cells[i].cell_type == "markdown"]
    return text.plain("\n\n".join(p for p in parts if p))


LIST_ITEM_RE = re.compile(r"^(?:[-*+]|\d+\.)\s+")


def as_comments(notes: str, width: int = 100) -> str:
    """``notes`` as Python comment lines: each paragraph, or list item, wrapped to ``width`` as a whole (its
    source's line breaks do not count), with a bare ``#`` line between paragraphs."""
    lines: list[str] = []
    for para in re.split(r"\n[ \t]*\n", notes.strip()) if notes.strip() else []:
        items: list[str] = []
        for line in para.splitlines():
            if not items or LIST_ITEM_RE.match(line.strip()):
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        lines += ["#"] if lines else []
        for item in items:
            marker = LIST_ITEM_RE.match(item)
            lines += [f"# {line}" for line in textwrap.wrap(item, width - 2, break_long_words=False,
                                                             break_on_hyphens=False,
                                                             subsequent_indent=" " * len(marker.group(0)) if marker else "")]
    return "".join(line + "\n" for line in lines)


def points(ex: Exercise) -> int:
    if ex.level not in POINTS:
        raise ValueError(f"exercise {ex.label}: say easy, medium or hard in its title so it can be given points")
    return POINTS[ex.level]


def nbgrader_source(chapter: Path, root: Path = ROOT) -> nbformat.NotebookNode:
    """The nbgrader source notebook of ``chapter``; see the module's docstring."""
    nb = nbformat.read(chapter, as_version=4)
    text = ChapterText.of(nb, chapter, root)
    exercises = find_exercises(nb)
    gated = inside_gates(nb)
    stem = f"ch{Path(chapter).name[:2]}"
    owner = {i: ex for ex in exercises for i in range(ex.cell, (ex.check_cell or ex.cell) + 1)}
    prose = {ex.label: written_solution(nb, {i for i in gated if owner.get(i) is ex}, text) for ex in exercises}
    checks = {ex.check_cell: ex for ex in exercises}
    cells = []
    for i, cell in enumerate(nb.cells):
        ex = owner.get(i)
        if cell.cell_type == "markdown" and i in gated:
            continue  # the gates and the written solution, which went into `prose`
        if cell.cell_type == "code" and (is_solution(cell) or i in gated):
            n = sum(1 for c in cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(
                f"{ex.label}-solution"))
            notes = prose[ex.label] if not ex.written and n == 0 else ""
            comments = as_comments(notes)
            cell.source = f"{BEGIN}\n{comments}{cell.source.rstrip()}\n{END}"
            cell.outputs, cell.execution_count = [], None
            cell.metadata["nbgrader"] = nbgrader_meta(f"{ex.label}-solution" + (f"-{n + 1}" if n else ""),
                                                      solution=True)
            tags = cell.metadata.setdefault("tags", [])
            tags += [] if SOLUTION_TAG in tags else [SOLUTION_TAG]
        elif i in checks:
            cell.outputs, cell.execution_count = [], None
            cell.metadata["nbgrader"] = nbgrader_meta(f"{ex.label}-check", grade=True, locked=True, points=points(ex))
            cell.metadata["tags"] = [CHECK_TAG]
        else:
            if cell.cell_type == "markdown":
                cell.source = text.plain(cell.source)
            elif cell.cell_type == "code":
                cell.outputs = [out for out in cell.outputs if not is_glue_record(out)]
            is_text = ex is not None and i == ex.cell
            if is_text:
                cell.metadata[EXERCISE_META] = exercise_metadata(ex, text)
            cell.metadata["nbgrader"] = nbgrader_meta(f"{ex.label}-text" if is_text else f"{stem}-cell-{i:03d}",
                                                      locked=True)
            if is_text and ex.written:
                cells.append(cell)
                answer = prose[ex.label] or ("Write your answer in words here." if ex.words
                                             else "Write your prediction and your reasoning here.")
                cell = nbformat.v4.new_markdown_cell(f"{BEGIN}\n{answer}\n{END}", metadata={"nbgrader": nbgrader_meta(
                    f"{ex.label}-{'words' if ex.words else 'prediction'}", solution=True, grade=True,
                    points=points(ex))})
        cells.append(cell)
    nb.cells = cells
    return nb


def make_nbgrader(chapter: Path, course: Path, root: Path = ROOT) -> Path:
    """Write ``chapter``'s nbgrader source into the course folder ``course``; return the notebook's path."""
    nb = nbgrader_source(chapter, root)
    target = course / "source" / f"ch{Path(chapter).name[:2]}" / Path(chapter).name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="chapter notebooks (chapters/NN_slug.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("nbgrader-course"),
                        help="the nbgrader course folder (default: nbgrader-course)")
    args = parser.parse_args(argv)
    for chapter in args.chapters:
        if chapter.suffix != ".ipynb" or not chapter.is_file() or not re.match(r"\d\d_", chapter.name):
            print(f"error: {chapter} is not a chapter notebook (chapters/NN_slug.ipynb)", file=sys.stderr)
            return 2
    for chapter in args.chapters:
        try:
            target = make_nbgrader(chapter, args.out)
        except MystError as exc:  # not a chapter of _toc.yml, say
            print(f"error: {exc}", file=sys.stderr)
            return 2
        graded = [c.metadata["nbgrader"] for c in nbformat.read(target, as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("grade")]
        print(f"wrote {target} ({len(graded)} graded cells, {sum(m['points'] for m in graded)} points)")
    print(f"Next: cd {args.out} && nbgrader generate_assignment chNN   (see instructors.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
