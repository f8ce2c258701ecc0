"""Every file a chapter needs beside its notebook (CONTRIBUTING.md, "Adding a chapter"), each forgotten one named in
a sentence: its self-checks and their tests, its learners' edition, its claims and margins if it trains a model,
the API page's "(chapter N)", the instructors' time table, the introduction's list, an explorer's browser test.

What the other tests already hold for every chapter of ``_toc.yml`` (nbval, the exercise convention, the nbgrader
course, the Colab cell, tolerances, listings) needs no file of its own; ``tests/test_book.py`` holds ``_toc.yml``
and ``chapters/`` to each other.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from functools import cache
from pathlib import Path

import book_toc
import pytest
import torch
from book_editions.exercise_cells import find_exercises

ROOT = Path(__file__).resolve().parent.parent


@cache
def trainers() -> frozenset[str]:
    """The functions of attn_helpers that train a model: those that reach ``training.fit`` (the one training loop),
    but for names an ``nn.Module`` method shares (``.train()``)."""
    calls: dict[str, set[str]] = {}
    for path in (ROOT / "attn_helpers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                called = (n.func for n in ast.walk(node) if isinstance(n, ast.Call))
                calls.setdefault(node.name, set()).update(getattr(f, "attr", getattr(f, "id", None)) for f in called)
    found = {"fit"}
    while more := {f for f, called in calls.items() if called & found} - found:
        found |= more
    return frozenset(n for n in found if not n.startswith("_") and n not in dir(torch.nn.Module))


@cache
def named_chapters() -> frozenset[int]:
    """The chapters some docstring of attn_helpers names, "(chapter N)" (the API page groups them so)."""
    import attn_api

    return frozenset(n for n in attn_api.chapter_index() if isinstance(n, int))


def code_of(nb: dict) -> str:
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def missing_steps(chapter: Path, root: Path = ROOT) -> list[str]:
    """A sentence for each file chapter ``NN_slug.ipynb`` needs in ``root`` and lacks (none: an empty list)."""
    import nbformat

    n, nn = int(chapter.name[:2]), chapter.name[:2]
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    code = code_of(nb)
    said = []
    if find_exercises(nbformat.reads(json.dumps(nb), as_version=4)):
        if not (root / "attn_helpers" / "checks" / f"ch{nn}.py").is_file():
            said.append(f"chapter {n} has exercises but no self-checks: write attn_helpers/checks/ch{nn}.py (its check "
                        f"cells call `check.<function>(...)` after `from attn_helpers.checks import ch{nn} as check`)")
        if not (root / "tests" / f"test_checks_ch{nn}.py").is_file():
            said.append(f"chapter {n}'s self-checks have no tests: write tests/test_checks_ch{nn}.py (each check "
                        f"accepts the solution and rejects the wrong answers and shortcuts its hints name)")
    if not (root / "editions" / chapter.name).is_file():
        said.append(f"chapter {n} has no learners' edition: run `make refresh CHAPTERS=chapters/{chapter.name}` (or "
                    f"`make editions`) and commit editions/{chapter.name}")
    if trains := sorted(t for t in trainers() if re.search(rf"\b{t}\(", code)):
        if not (root / "scripts" / "claims" / f"ch{nn}.py").is_file():
            said.append(f"chapter {n} trains a model ({', '.join(trains)} reaches training.fit) but has no "
                        f"scripts/claims/ch{nn}.py: name each trained assert there and measure it with "
                        f"`scripts/margins.py --chapter {n}`")
        contributing = root / "CONTRIBUTING.md"
        table = contributing.read_text(encoding="utf-8").split("<!-- margins:begin -->")[-1].split(
            "<!-- margins:end -->")[0] if contributing.is_file() else ""
        if f"\n| {n} | " not in table:
            said.append(f"chapter {n} trains a model but CONTRIBUTING.md's margins table has no row for it: add the "
                        f"rows `scripts/margins.py --chapter {n}` prints between the margins markers")
    if n not in named_chapters():
        said.append(f"no docstring of attn_helpers names chapter {n}: add \"(chapter {n})\" to the docstring of each "
                    f"function the chapter introduces (the API page lists it under the chapter)")
    instructors = root / "instructors.md"
    if not instructors.is_file() or not re.search(rf"^\| {n}\. ", instructors.read_text(encoding="utf-8"), re.M):
        said.append(f"instructors.md's learner-time table has no row for chapter {n}: run `.venv/bin/python "
                    f"scripts/chapter_times.py chapters/*.ipynb --write instructors.md`")
    intro = root / "intro.md"
    if not intro.is_file() or not re.search(rf"^{n}\. \*\*", intro.read_text(encoding="utf-8"), re.M):
        said.append(f"intro.md's list of chapters has no item for chapter {n}: add '{n}. **<its title>**: <what it "
                    f"does>' in order")
    if "explorers" in code and not (root / "tests" / f"test_explorer_ch{nn}_browser.py").is_file():
        said.append(f"chapter {n} shows an explorer but has no tests/test_explorer_ch{nn}_browser.py, which moves its "
                    f"controls in Chromium and compares the numbers it draws")
    return said


@pytest.mark.parametrize("chapter", book_toc.chapters(), ids=lambda p: p.name)
def test_a_chapter_has_every_file_it_needs(chapter):
    said = missing_steps(chapter)
    assert not said, "; ".join(said) + " (CONTRIBUTING.md, 'Adding a chapter')"


def test_a_new_chapter_with_exercises_that_trains_is_told_every_file_it_lacks(tmp_path):
    """A chapter 99 (a copy of chapter 12, which has exercises and trains a model, with an explorer cell) that
    nothing else knows: each missing file is named."""
    twelve = book_toc.chapter(12)
    nb = json.loads(twelve.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "explorer", "metadata": {}, "outputs": [],
                        "source": "ah.explorers.masks(X)"})
    new = tmp_path / "99_new_chapter.ipynb"
    new.write_text(json.dumps(nb), encoding="utf-8")
    said = " ".join(missing_steps(new))
    for needed in ["attn_helpers/checks/ch99.py", "tests/test_checks_ch99.py", "editions/99_new_chapter.ipynb",
                   "scripts/claims/ch99.py", "margins table has no row", "names chapter 99", "instructors.md",
                   "intro.md", "tests/test_explorer_ch99_browser.py"]:
        assert needed in said, needed
    assert "compare_recall" in said  # what makes it a chapter that trains


def test_a_chapter_without_exercises_or_training_needs_no_checks_or_claims(tmp_path):
    root = tmp_path / "book"
    (root / "editions").mkdir(parents=True)
    new = root / "01_prose.ipynb"
    shutil.copy(book_toc.chapter(1), new)
    nb = json.loads(new.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if c["cell_type"] == "code" and "explorers" not in "".join(c["source"])]
    new.write_text(json.dumps(nb), encoding="utf-8")
    (root / "editions" / new.name).write_text("{}")
    (root / "instructors.md").write_text("| 1. Prose | 1 words |\n")
    (root / "intro.md").write_text("1. **Prose**: words\n")
    assert missing_steps(new, root) == []
