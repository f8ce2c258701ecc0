"""Run the self-checks on a folder of submitted notebooks and report, per student and exercise, the result.

    python scripts/grade.py path/to/submissions [--csv grades.csv] [--timeout 60]
    (what `make grade SUBMISSIONS=path/to/submissions` runs)

Each ``*.ipynb`` under the folder (searched recursively) is one student's submission, named by its path
relative to the folder without ``.ipynb``. It is executed top to bottom in a fresh kernel, in its own
folder, with errors allowed, so one broken exercise does not hide the others. Each exercise (found by the
book's convention, see exercise_cells.py) is then

    passed   its check cell ran without error and printed its "✓ ... correct" lines;
    failed   its check raised CheckFailed; the detail is the check's hint;
    error    one of its answer cells or its check cell raised something else (for example
             NotImplementedError when the stub is still there); the detail is the exception.

The table goes to stdout and the same rows to a CSV file (default: <folder>/grades.csv).
Submitted notebooks are code: run this only on submissions you are willing to execute.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from exercise_cells import find_exercises
from nbclient import NotebookClient

COLUMNS = ("student", "exercise", "result", "detail")
OTHER = "(other cells)"  # the row for errors outside the exercises
WHOLE = "(notebook)"     # the row for a notebook that could not be graded at all


@dataclass
class Row:
    student: str
    exercise: str
    result: str   # passed | failed | error
    detail: str = ""


def _error(cell) -> str | None:
    """'ExceptionType: message' of the first error a cell raised, else None."""
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            return f"{out.ename}: {out.evalue}".strip().rstrip(":")
    return None


def _stdout(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.output_type == "stream")


def grade_notebook(path: Path, student: str, timeout: int = 60) -> list[Row]:
    """Execute one submission and return one row per exercise."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook, ...
        return [Row(student, WHOLE, "error", f"cannot read the notebook: {type(exc).__name__}: {exc}")]
    exercises = find_exercises(nb)
    if not exercises:
        return [Row(student, WHOLE, "error", "no exercises found (is this a chapter of the book?)")]
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    stopped = None
    try:
        client.execute()
    except Exception as exc:  # the kernel died or could not start; grade what ran
        stopped = f"{type(exc).__name__}: {exc}".splitlines()[0]
    rows = []
    for ex in exercises:
        label = ex.label or f"exercise at cell {ex.cell}"
        rows.append(Row(student, label, *_result(nb, ex, timeout, stopped)))
    graded = {i for ex in exercises for i in [*ex.answer_cells, ex.check_cell]}
    others = [(i, err) for i, cell in enumerate(nb.cells) if i not in graded and (err := _error(cell))]
    if others:  # a broken teaching cell can explain failing exercises further down
        i, err = others[0]
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        rows.append(Row(student, OTHER, "error", f"cell {i}: {_explain(err, timeout)}{more}"))
    return rows


def _result(nb, ex, timeout: int, stopped: str | None) -> tuple[str, str]:
    if ex.check_cell is None:
        return "error", "no check cell calling check.<fn>(...) after the answer"
    for i in ex.answer_cells:
        if err := _error(nb.cells[i]):
            return "error", _explain(err, timeout)
    check = nb.cells[ex.check_cell]
    if err := _error(check):
        if err.startswith("CheckFailed"):
            return "failed", err.removeprefix("CheckFailed:").strip()
        return "error", _explain(err, timeout)
    if check.get("execution_count") is None:
        return "error", f"the check cell did not run ({stopped or 'the notebook stopped early'})"
    if "✓" not in _stdout(check):
        return "error", "the check cell printed no '✓ … correct' line (was it changed?)"
    return "passed", ""


def _explain(err: str, timeout: int) -> str:
    if err.startswith("NotImplementedError"):
        return f"{err} (not answered: the stub is still there)"
    if err.startswith("KeyboardInterrupt"):
        return f"TimeoutError: a cell ran longer than {timeout} s and was interrupted"
    return err


def grade_folder(folder: Path, timeout: int = 60) -> list[Row]:
    """Grade every notebook under ``folder`` (sorted by path), one kernel per notebook."""
    rows = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        student = path.relative_to(folder).with_suffix("").as_posix()
        print(f"grading {student} ...", file=sys.stderr)
        rows += grade_notebook(path, student, timeout)
    return rows


def format_table(rows: list[Row]) -> str:
    """The rows as a plain-text table, then one summary line per student."""
    cells = [COLUMNS] + [(r.student, r.exercise, r.result, r.detail) for r in rows]
    widths = [max(len(c[k]) for c in cells) for k in range(3)]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(c[k].ljust(widths[k]) for k in range(3)) + "  " + c[3])
        if n == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(COLUMNS[3]))
    lines.append("")
    for student in dict.fromkeys(r.student for r in rows):
        mine = [r for r in rows if r.student == student and r.exercise not in (OTHER, WHOLE)]
        counts = ", ".join(f"{sum(r.result == k for r in mine)} {k}" for k in ("passed", "failed", "error"))
        lines.append(f"{student}: {counts} (of {len(mine)} exercises)" if mine else f"{student}: not graded")
    return "\n".join(line.rstrip() for line in lines)


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows((r.student, r.exercise, r.result, r.detail) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder with the submitted notebooks")
    parser.add_argument("--csv", type=Path, help="where to write the CSV (default: <submissions>/grades.csv)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a single cell may run (default: 60)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"error: {args.submissions} is not a folder; pass the folder that holds the submitted .ipynb files",
              file=sys.stderr)
        return 2
    rows = grade_folder(args.submissions, args.timeout)
    if not rows:
        print(f"error: no .ipynb files under {args.submissions}", file=sys.stderr)
        return 2
    print(format_table(rows))
    csv_path = args.csv or args.submissions / "grades.csv"
    write_csv(rows, csv_path)
    print(f"\nwrote {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
