"""scripts/make_nbgrader.py: an nbgrader course source that real nbgrader can release and autograde.

The structural tests cover every chapter without executing anything. One test runs the real
``nbgrader generate_assignment`` and ``nbgrader autograde`` on a small chapter-like notebook that uses chapter 1's
checks, with a correct submission and a blank one whose check cells print the pass mark (a few seconds each).
"""

import copy
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import book_toc
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.heavy  # runs real nbgrader, with real kernels: scheduled first (conftest.py)

from book_editions.exercise_cells import find_exercises, is_solution  # noqa: E402
from book_editions.nbgrader_course import BEGIN, END, POINTS, as_comments, make_nbgrader, nbgrader_source  # noqa: E402
from make_nbgrader import main as make_nbgrader_main  # noqa: E402

CHAPTERS = book_toc.chapters()
MYST = re.compile(r"\{[a-z][a-z0-9_:-]*\}`|^\s*(`{3,}|:{3,})\{|^\s*:[a-z-]+:|\$\$\s*\([^)\s]+\)\s*$", re.MULTILINE)
HAVE_NBGRADER = importlib.util.find_spec("nbgrader") is not None


def nbgrader_cells(nb):
    return [(cell, cell.metadata.get("nbgrader")) for cell in nb.cells]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_cell_has_its_nbgrader_role(chapter):
    book = nbformat.read(chapter, as_version=4)
    source = nbgrader_source(chapter)
    exercises = {ex.label: ex for ex in find_exercises(book)}
    ids = [meta["grade_id"] for _, meta in nbgrader_cells(source)]
    assert len(ids) == len(set(ids)) == len(source.cells), "every cell needs its own grade_id"
    solutions = sum(is_solution(c) for c in book.cells)
    seen = {"solution": 0, "check": set(), "prediction": set(), "words": set()}
    for cell, meta in nbgrader_cells(source):
        assert meta["schema_version"] == 3
        label = re.sub(r"-(solution(-\d+)?|check|prediction|words|text)$", "", meta["grade_id"])
        if meta["grade_id"].endswith(("-solution",)) or re.search(r"-solution-\d+$", meta["grade_id"]):
            assert (meta["solution"], meta["grade"], meta["locked"]) == (True, False, False)
            assert cell.cell_type == "code"
            assert cell.source.startswith(BEGIN + "\n") and cell.source.endswith("\n" + END)
            assert cell.outputs == []
            seen["solution"] += 1
        elif meta["grade_id"].endswith("-check"):
            assert (meta["solution"], meta["grade"], meta["locked"]) == (False, True, True)
            assert meta["points"] == POINTS[exercises[label].level] and "check." in cell.source
            seen["check"].add(label)
        elif meta["grade_id"].endswith(("-prediction", "-words")):  # graded by hand: a prediction, words (say why)
            kind = meta["grade_id"].rsplit("-", 1)[1]
            assert cell.cell_type == "markdown"
            assert (meta["solution"], meta["grade"], meta["locked"]) == (True, True, False)
            assert meta["points"] == POINTS[exercises[label].level]
            assert exercises[label].predict if kind == "prediction" else exercises[label].words
            assert cell.source.startswith(BEGIN + "\n") and cell.source.endswith("\n" + END)
            assert len(cell.source) > len(BEGIN + END) + 20  # the chapter's written answer, for the instructor
            seen[kind].add(label)
        else:  # teaching text and code, and the exercises' texts: read-only
            assert (meta["solution"], meta["grade"], meta["locked"]) == (False, False, True)
            assert BEGIN not in cell.source
            if cell.cell_type == "markdown":
                assert not MYST.search(cell.source), f"MyST left in {meta['grade_id']}: {cell.source[:200]}"
    assert seen["solution"] == solutions
    assert seen["check"] == set(exercises)
    assert seen["prediction"] == {label for label, ex in exercises.items() if ex.predict}
    assert seen["words"] == {label for label, ex in exercises.items() if ex.words}  # 3.1 and 10.2 ask why
    if HAVE_NBGRADER:  # nbgrader's own validator: metadata, grade ids, markdown answer cells graded
        from nbgrader.nbgraderformat import MetadataValidator

        MetadataValidator().validate_nb(source)


def test_the_course_is_the_same_at_every_build():
    """Cell ids included: a rebuilt course differs from the last one only where a chapter changed (issue 50)."""
    chapter = ROOT / "chapters" / "05_multi_head.ipynb"  # it has a prediction cell, which the build adds
    first, again = nbgrader_source(chapter), nbgrader_source(chapter)
    assert [c.id for c in first.cells] == [c.id for c in again.cells]
    assert len({c.id for c in first.cells}) == len(first.cells)
    assert nbformat.writes(first) == nbformat.writes(again)


def test_written_solutions_stay_inside_the_solution_regions():
    source = nbgrader_source(ROOT / "chapters" / "01_weighted_average.ipynb")
    text = "\n".join(c.source for c in source.cells)
    outside = re.sub(rf"{re.escape(BEGIN)}.*?{re.escape(END)}", "", text, flags=re.DOTALL)
    assert "The scores double to 8 and 4" in text and "The scores double to 8 and 4" not in outside
    assert "q_doubled" in text and "q_doubled" not in outside and "solution-start" not in text


def test_written_solutions_become_comments_wrapped_by_paragraph():
    # the source's line breaks do not count: no short orphan line where the Markdown happened to break
    joined = "# The single head looks back, halfway between.\n"
    assert as_comments("The single head looks back,\nhalfway between.") == joined
    long = " ".join(["word"] * 60)
    lines = as_comments(f"{long}\n\n- first item\n  continues\n- {long}\n1. numbered").splitlines()
    assert all(len(line) <= 100 for line in lines) and lines.count("#") == 1
    assert lines[lines.index("#") + 1:] == ["# - first item continues", *as_comments(f"- {long}").splitlines(),
                                            "# 1. numbered"]
    assert as_comments(f"- {long}").splitlines()[1].startswith("#   word")  # a list item's lines stay under it
    assert as_comments("") == ""


def test_command_line_writes_a_course_and_rejects_what_is_not_a_chapter(tmp_path, capsys):
    assert make_nbgrader_main([str(ROOT / "chapters" / "01_weighted_average.ipynb"), "--out", str(tmp_path)]) == 0
    assert "(4 graded cells, 7 points)" in capsys.readouterr().out
    assert (tmp_path / "source" / "ch01" / "01_weighted_average.ipynb").is_file()
    assert "course_id" in (tmp_path / "nbgrader_config.py").read_text()
    assert make_nbgrader_main([str(ROOT / "intro.md")]) == 2
    assert "is not a chapter notebook" in capsys.readouterr().err
    variation = tmp_path / "01_my_variation.ipynb"  # a renamed copy: its number is unknown to _toc.yml
    variation.write_bytes((ROOT / "chapters" / "01_weighted_average.ipynb").read_bytes())
    assert make_nbgrader_main([str(variation), "--out", str(tmp_path / "course2")]) == 2
    assert "01_my_variation.ipynb is not a chapter listed in" in capsys.readouterr().err


# --- real nbgrader ------------------------------------------------------------------------------------------

PREDICT_SOLUTION = ("q_doubled = torch.tensor([2.0, 2.0])\n"
                    "w_doubled = torch.softmax(torch.stack([q_doubled @ k1, q_doubled @ k2]), dim=0)")
FUNCTION_SOLUTION = "def self_attention(X):\n    W = torch.softmax(X @ X.T, dim=-1)  # (t, t)\n    return W @ X, W"
BATCH_SOLUTION = ("Xs = check.sequence_first_batch()\nXb = Xs.transpose(0, 1)  # (2, 4, 3)\n"
                  "Wb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=-1)\n"
                  "Ys = torch.bmm(Wb, Xb).transpose(0, 1)")
PROSE = "The scores double, so the softmax becomes more decisive."


def exercise(label: str, title: str, solution: str, check: str, prose: str = "") -> list:
    return [new_markdown_cell(f"```{{exercise}} {title}\n:label: {label}\n\nDo it.\n```"),
            new_markdown_cell(f"```{{solution-start}} {label}\n:class: dropdown\n```\n{prose}".rstrip()),
            new_code_cell(solution, metadata={"tags": ["solution"]}),
            new_markdown_cell("```{solution-end}\n```"),
            new_code_cell(check)]


def tiny_book(root: Path) -> Path:
    """A chapter-like notebook with three of chapter 1's exercises (easy predict, medium, hard) and their checks."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n- chapters:\n  - file: chapters/01_tiny\n")
    (root / "references.bib").write_text("")
    glued = new_output("display_data", data={"application/papermill.record/text/plain": "0.8807970285415649"},
                       metadata={"scrapbook": {"name": "tiny_w1"}})
    nb = new_notebook(cells=[
        new_markdown_cell("# A tiny chapter\n\nThe first weight is {glue:text}`tiny_w1:.4f`."),
        new_code_cell("import torch\nfrom myst_nb import glue\n\nfrom attn_helpers.checks import ch01 as check\n\n"
                      "k1, k2 = torch.tensor([2.0, 2.0]), torch.tensor([1.0, 1.0])\n"
                      "glue('tiny_w1', 0.8807970285415649, display=False)", outputs=[glued], execution_count=1),
        *exercise("ex-ch01-predict", "Predict, then run: a longer query (easy)", PREDICT_SOLUTION,
                  "check.doubled_query_weights(w_doubled)", PROSE),
        *exercise("ex-ch01-function", "Self-attention as a function (medium)", FUNCTION_SOLUTION,
                  "check.self_attention_function(self_attention)"),
        *exercise("ex-ch01-batch", "A batch, by hand (hard)", BATCH_SOLUTION, "check.sequence_first_attention(Wb, Ys)"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    path = root / "chapters" / "01_tiny.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return path


def nbgrader(course: Path, *args: str) -> None:
    """Run ``nbgrader *args`` in the course folder, as instructors.md says; it must succeed and print only
    nbgrader's own log lines: INFO, and the warning that a locked cell was changed (the edited submission's
    check cells), but no SQLAlchemy warning and no kernel warning, which look like failures."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    lines = (done.stdout + done.stderr).splitlines()
    noise = [line for line in lines if line.strip() and not re.match(
        r"\[\w+App \| (INFO\] |WARNING\] Attribute 'checksum' for cell [\w-]+ has changed!)", line)]
    assert not noise, f"nbgrader {' '.join(args)} printed more than its own log lines:\n" + "\n".join(noise)


def collect_as_instructors_md_says(course: Path, handed_in: Path, notebook: str) -> None:
    """Run instructors.md's loop that files each handed-in notebook as submitted/<student>/ch01/<notebook>."""
    text = (ROOT / "instructors.md").read_text(encoding="utf-8")
    loop = re.search(r"^for f in \.\./handed-in/\*\.ipynb; do.*?^done$", text, re.MULTILINE | re.DOTALL)
    assert loop, "instructors.md no longer shows the loop that files the handed-in notebooks"
    script = loop.group(0).replace("../handed-in", str(handed_in)).replace("01_weighted_average.ipynb", notebook)
    done = subprocess.run(["bash", "-c", script], cwd=course, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def test_real_nbgrader_releases_no_solution_and_scores_submissions(tmp_path):
    if not HAVE_NBGRADER:
        missing = "nbgrader is not installed in this environment: run `make setup` (requirements.txt pins it)"
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; CI must run this test, not skip it")
        pytest.skip(missing)
    course = tmp_path / "course"
    source = make_nbgrader(tiny_book(tmp_path / "book"), course, root=tmp_path / "book")
    nbgrader(course, "generate_assignment", "ch01")
    release = nbformat.read(course / "release" / "ch01" / source.name, as_version=4)
    released = "\n".join(c.source for c in release.cells)
    for secret in ("q_doubled", "def self_attention", "Xs.transpose(0, 1)", PROSE, "BEGIN SOLUTION"):
        assert secret not in released, f"the release gives away {secret!r}"
    assert released.count("raise NotImplementedError()") == 3 and "YOUR ANSWER HERE" in released
    assert "The first weight is 0.8808." in released and "### Exercise 1.2 (medium)" in released

    solutions = {grade_id(c): re.sub(rf"{BEGIN}\n|\n{END}", "", c.source)
                 for c in nbformat.read(source, as_version=4).cells if c.metadata.nbgrader["solution"]}
    # Two submissions (each autograded in its own kernel, seconds of CPU): the solutions, and the release
    # untouched but for its check cells, rewritten to print the pass mark. Once nbgrader restores the checks,
    # the second is a blank submission, so it also shows that untouched stubs score nothing.
    correct, edited = copy.deepcopy(release), copy.deepcopy(release)
    for cell in correct.cells:
        cell.source = solutions.get(grade_id(cell), cell.source)
    for cell in edited.cells:
        if grade_id(cell).endswith("-check"):
            cell.source = 'print("✓ correct")'
    handed_in = tmp_path / "handed-in"  # the notebooks as learners hand them in, named after each learner
    handed_in.mkdir()
    for student, nb in {"correct": correct, "edited": edited}.items():
        nbformat.write(nb, handed_in / f"{student}.ipynb")
    collect_as_instructors_md_says(course, handed_in, source.name)
    assert sorted(p.relative_to(course).as_posix() for p in (course / "submitted").rglob("*.ipynb")) == [
        f"submitted/{student}/ch01/{source.name}" for student in ("correct", "edited")]
    nbgrader(course, "autograde", "ch01")
    nbgrader(course, "export")
    assert (course / "grades.csv").read_text().count("ch01,") == 2  # one line per student

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = {student: gb.find_submission_notebook(source.stem, "ch01", student).grades
                  for student in ("correct", "edited")}
        scores = {student: {g.name: g.auto_score for g in found} for student, found in grades.items()}
    assert scores["correct"] == {"ex-ch01-predict-check": 1, "ex-ch01-function-check": 2, "ex-ch01-batch-check": 3,
                                 "ex-ch01-predict-prediction": None}  # the written prediction waits for a person
    assert scores["edited"] == dict.fromkeys(scores["correct"], 0)  # an untouched answer cell scores 0 too
    graded = nbformat.read(course / "autograded" / "edited" / "ch01" / source.name, as_version=4)
    checks = {grade_id(c): c.source for c in release.cells if grade_id(c).endswith("-check")}
    assert {grade_id(c): c.source for c in graded.cells if grade_id(c).endswith("-check")} == checks
