"""Rows of the grade table: printed as a plain-text table with a summary per student, and as CSV."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("student", "exercise", "result", "detail")
RESULTS = ("passed", "failed", "error", "timeout", "missing", "unverified")
OTHER = "(other cells)"  # the row for errors outside the exercises
WHOLE = "(notebook)"     # the row for a file that could not be graded as a whole, or a note about it


@dataclass
class Row:
    student: str
    exercise: str
    result: str   # one of RESULTS
    detail: str = ""


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
    return "\n".join(line.rstrip() for line in lines)


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows((r.student, r.exercise, r.result, r.detail) for r in rows)
