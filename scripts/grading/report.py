"""Rows of the grade table: printed as a plain-text table with a summary per student, and as CSV (with the
written predictions in a last column)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from .outcome import Result

COLUMNS = ("student", "exercise", "result", "detail")
PREDICTION = "prediction"  # the CSV's last column: a "predict, then run" exercise's written prediction, to read
NOT_WRITTEN = "(not written)"
NO_CELL = "(no prediction cell: not a student edition)"
UNTOUCHED = ("", "YOUR ANSWER HERE")  # a prediction cell as handed out (student edition, nbgrader's release)
RESULTS = tuple(r.value for r in Result)
OTHER = "(other cells)"  # the row for errors outside the exercises
WHOLE = "(notebook)"     # the row for a file that could not be graded as a whole, or a note about it


@dataclass
class Row:
    student: str
    exercise: str
    result: str   # one of RESULTS
    detail: str = ""
    prediction: str = ""  # for a "predict, then run" exercise: the written prediction, or why there is none


def prediction_text(written: str | None) -> str:
    """What the CSV's prediction column says of a prediction cell's text (None: the submission has no such cell)."""
    if written is None:
        return NO_CELL
    return NOT_WRITTEN if written.strip() in UNTOUCHED else written.strip()


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
        counts = ", ".join(f"{n} {k}" for k in RESULTS if (n := sum(r.result == k for r in mine)) or k == "passed")
        lines.append(f"{student}: {counts} (of {len(mine)} exercises)" if mine else f"{student}: not graded")
    written = sum(r.prediction not in ("", NOT_WRITTEN, NO_CELL) for r in rows)
    if any(r.prediction for r in rows):
        lines += ["", f"{written} written prediction{'s' if written != 1 else ''} to read and grade by hand: "
                      f"the '{PREDICTION}' column of the CSV"]
    return "\n".join(line.rstrip() for line in lines)


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow((*COLUMNS, PREDICTION))
        writer.writerows((r.student, r.exercise, r.result, r.detail, r.prediction) for r in rows)
