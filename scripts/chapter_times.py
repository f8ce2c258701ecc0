"""Estimate how long each chapter takes a learner, and write the table into the instructors' page.

    python scripts/chapter_times.py chapters/*.ipynb --write instructors.md

Measured: the words of prose before the exercises (math and HTML comments left out), the code cells before the
exercises (not counting cells the website hides, such as the Colab set-up cell),
the exercises by level, and the seconds the notebook takes to execute top to bottom (in a fresh kernel,
as `make refresh` runs it). Estimated from them, with the rates below: reading and running the chapter,
then doing its exercises. Rerun it after adding or changing a chapter; tests/test_chapter_times.py
fails while the table in instructors.md is out of date (except for the execution times, which vary).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from book_editions.exercise_cells import find_exercises
from nbclient import NotebookClient

WORDS_PER_MINUTE = 150          # careful reading of technical prose
MINUTES_PER_CODE_CELL = 1       # read a cell, run it, look at its output
MINUTES_PER_EXERCISE = {"easy": 5, "medium": 10, "hard": 20}
BEGIN, END = "<!-- chapter-times:begin -->", "<!-- chapter-times:end -->"
MATH_RE = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)  # shown nowhere, such as a listing's mark (tests/test_listings.py)
WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*")


@dataclass
class ChapterTime:
    name: str            # e.g. "1. Self-attention is a weighted average"
    words: int
    code_cells: int
    levels: dict[str, int]
    seconds: float | None = None

    @property
    def reading_minutes(self) -> int:
        return _round5(self.words / WORDS_PER_MINUTE + self.code_cells * MINUTES_PER_CODE_CELL)

    @property
    def exercise_minutes(self) -> int:
        return sum(MINUTES_PER_EXERCISE[level] * n for level, n in self.levels.items())

    @property
    def total_minutes(self) -> int:
        return _round5(self.reading_minutes + self.exercise_minutes)


def _round5(minutes: float) -> int:
    return max(5, 5 * round(minutes / 5))


def measure(path: Path, execute: bool = False) -> ChapterTime:
    """Count what a learner reads and does in the chapter at ``path``; time its execution if asked."""
    nb = nbformat.read(path, as_version=4)
    exercises = find_exercises(nb)
    first = exercises[0].cell if exercises else len(nb.cells)
    teaching = [c for c in nb.cells[:first] if "remove-cell" not in c.metadata.get("tags", [])]  # what readers see
    title = next((line[2:].strip() for c in teaching if c.cell_type == "markdown"
                  for line in c.source.splitlines() if line.startswith("# ")), path.stem)
    number = path.name.split("_")[0].lstrip("0") or "0"
    prose = [MATH_RE.sub(" ", COMMENT_RE.sub(" ", c.source)) for c in teaching if c.cell_type == "markdown"]
    words = sum(len(WORD_RE.findall(text)) for text in prose)
    levels = {level: sum(ex.level == level for ex in exercises) for level in MINUTES_PER_EXERCISE}
    seconds = None
    if execute:
        start = time.perf_counter()
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - start
    return ChapterTime(f"{number}. {title}", words, sum(c.cell_type == "code" for c in teaching), levels, seconds)


def table(rows: list[ChapterTime]) -> str:
    """A markdown table, one row per chapter; the last column is the measured execution time."""
    lines = ["| Chapter | Prose and code | Exercises (easy / medium / hard) "
             "| Learner time (reading + exercises) | Executes in |",
             "|---|--:|:-:|--:|--:|"]
    for r in rows:
        levels = " / ".join(str(r.levels[k]) for k in MINUTES_PER_EXERCISE)
        secs = "not measured" if r.seconds is None else f"{r.seconds:.0f} s"
        lines.append(f"| {r.name} | {r.words} words, {r.code_cells} cells | {levels} "
                     f"| {r.reading_minutes} + {r.exercise_minutes} = **{r.total_minutes} min** | {secs} |")
    return "\n".join(lines)


def replace_table(page: str, new_table: str) -> str:
    """``page`` with the text between the BEGIN and END markers replaced by ``new_table``."""
    if BEGIN not in page or END not in page:
        raise ValueError(f"the page has no {BEGIN} … {END} markers; add them where the table goes")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{new_table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="chapter notebooks, e.g. chapters/*.ipynb")
    parser.add_argument("--write", type=Path, help="page whose table to replace (e.g. instructors.md)")
    parser.add_argument("--no-execute", action="store_true", help="skip timing the execution")
    args = parser.parse_args(argv)
    rows = []
    for path in sorted(args.chapters):
        rows.append(measure(path, execute=not args.no_execute))
        print(f"measured {path}", file=sys.stderr)
    text = table(rows)
    if args.write:
        args.write.write_text(replace_table(args.write.read_text(encoding="utf-8"), text), encoding="utf-8")
        print(f"wrote the table into {args.write}", file=sys.stderr)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
