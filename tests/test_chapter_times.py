"""The learner-time table on the instructors' page matches the chapters (all but the measured execution times)."""

from pathlib import Path

import book_toc
import pytest

ROOT = Path(__file__).resolve().parent.parent

from chapter_times import BEGIN, END, ChapterTime, measure, replace_table, table  # noqa: E402

CHAPTERS = book_toc.chapters()
REFRESH = "run: .venv/bin/python scripts/chapter_times.py chapters/*.ipynb --write instructors.md"


def without_last_column(text: str) -> list[str]:
    return [line.rsplit("|", 2)[0] for line in text.strip().splitlines()]


def test_instructors_table_is_up_to_date():
    page = (ROOT / "instructors.md").read_text(encoding="utf-8")
    committed = page.split(BEGIN, 1)[1].split(END, 1)[0]
    expected = table([measure(path) for path in CHAPTERS])
    assert without_last_column(committed) == without_last_column(expected), f"the table is out of date; {REFRESH}"
    assert "not measured" not in committed, f"the table lacks execution times; {REFRESH}"


def test_estimate_for_chapter_1():
    ch01 = measure(ROOT / "chapters" / "01_weighted_average.ipynb")
    assert ch01.name == "1. Self-attention is a weighted average"
    assert ch01.levels == {"easy": 1, "medium": 1, "hard": 1}
    assert ch01.exercise_minutes == 35
    assert ch01.words > 500 and ch01.code_cells >= 10


def test_rounding_and_rates():
    row = ChapterTime("9. Test", words=1500, code_cells=12, levels={"easy": 2, "medium": 0, "hard": 1})
    assert row.reading_minutes == 20            # 1500 / 150 + 12 = 22 -> 20
    assert row.exercise_minutes == 30
    assert row.total_minutes == 50
    assert ChapterTime("x", 0, 0, {"easy": 0, "medium": 0, "hard": 0}).total_minutes == 5
    assert "| 9. Test | 1500 words, 12 cells | 2 / 0 / 1 | 20 + 30 = **50 min** | 3 s |" in table([
        ChapterTime("9. Test", 1500, 12, {"easy": 2, "medium": 0, "hard": 1}, seconds=3.2)])


def test_replace_table_needs_the_markers():
    page = f"intro\n{BEGIN}\nold\n{END}\noutro\n"
    assert replace_table(page, "new") == f"intro\n{BEGIN}\nnew\n{END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        replace_table("no markers here", "new")
