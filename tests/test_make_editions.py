"""The learners' editions (scripts/make_editions.py) and the learner's folder that make lab fills
(scripts/book_editions/learner_copies.py, scripts/lab.py). Nothing here executes a chapter: the editions are made from
the committed outputs, which nbval checks; tests/test_lab_browser.py opens one in a real JupyterLab."""

import json
import re
import subprocess
import sys
from pathlib import Path

import lab
import nbformat
import pytest
from book_chapters import CHAPTER_1, CHAPTERS, MYST, ROOT, by_name
from book_editions.cells import CAPTION_TAG, is_glue_record
from book_editions.exercise_cells import PREDICTION_PROMPT, PREDICTION_TAG, WORDS_PROMPT, find_exercises, is_solution
from book_editions.learner_copies import ASIDE, MANIFEST, place, report
from book_editions.learners import as_text, learner_edition
from make_editions import main as make_editions_main

from attn_helpers.checks.protocol import SOLUTION_RE, waiting_note

HEADING = re.compile(r"^(#{1,6})\s")


@pytest.fixture(scope="module")
def editions():
    return {chapter.name: learner_edition(chapter) for chapter in CHAPTERS}


def level(cell) -> int | None:
    m = HEADING.match(cell.source) if cell.cell_type == "markdown" else None
    return len(m.group(1)) if m else None


@by_name
def test_edition_has_no_myst_and_shows_each_figure_number_and_caption(chapter, editions):
    book, nb = nbformat.read(chapter, as_version=4), editions[chapter.name]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            left = [m.group(0) for m in MYST.finditer(cell.source)]
            assert not left, f"{chapter.name}, cell {i}: MyST syntax reaches the learner: {left}"
            assert "{glue" not in cell.source and "{numref" not in cell.source and "{cite" not in cell.source
    figures = [c for c in book.cells if c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")]
    for k, figure in enumerate(figures, start=1):
        at = next(j for j, c in enumerate(nb.cells) if c.id == figure.id)
        caption = nb.cells[at + 1]
        assert CAPTION_TAG in caption.metadata.tags, f"{chapter.name}: no caption under figure {k}"
        text = figure.metadata.mystnb.figure.get("caption", "")
        assert caption.source.startswith(f"**Figure {int(chapter.name[:2])}.{k}:** ")
        assert text[:30].split("{")[0] in caption.source
    tags = re.findall(r"\\tag\{([\d.]+)\}", "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    assert len(tags) == len(set(tags)), f"{chapter.name}: an equation number is given twice: {tags}"
    nbformat.validate(nb)
    assert len({c.id for c in nb.cells}) == len(nb.cells)


@by_name
def test_code_and_checks_are_the_chapters_and_solutions_are_folded(chapter, editions):
    book, nb = nbformat.read(chapter, as_version=4), editions[chapter.name]
    by_id = {c.id: c for c in nb.cells}
    book_exercises, exercises = find_exercises(book), find_exercises(nb)
    checks = {book.cells[ex.check_cell].id for ex in book_exercises}
    solutions = {book.cells[i].id: ex for ex in book_exercises for i in ex.solution_cells}
    for cell in book.cells:
        if cell.cell_type == "code":  # every code cell is there, as it is, with its outputs (glue records aside)
            if cell.id in solutions:  # a solution's code under a first line by which the check knows it (_answer.py)
                first, _, rest = by_id[cell.id].source.partition("\n")
                assert rest == cell.source and SOLUTION_RE.match(first) and first.startswith("# The book's solution")
            else:
                assert by_id[cell.id].source == cell.source
            if cell.id not in checks:
                assert by_id[cell.id].outputs == [o for o in cell.outputs if not is_glue_record(o)]
    folded = nb.metadata.colab.collapsed_sections
    assert [(e.label, e.predict) for e in exercises] == [(e.label, e.predict) for e in book_exercises]
    assert len(folded) == len(exercises)
    for ex, ref in zip(exercises, book_exercises, strict=True):
        assert nb.cells[ex.check_cell].source == book.cells[ref.check_cell].source
        number = ex.text.splitlines()[0].split()[2]   # "### Exercise 1.2 (medium): ..."
        heading_text = f"#### Solution to Exercise {number}"
        start = next(i for i in range(ex.cell, ex.check_cell) if nb.cells[i].source == heading_text)
        heading = nb.cells[start]
        assert heading.metadata["jp-MarkdownHeadingCollapsed"] is True and heading.metadata["id"] == heading.id
        assert heading.id in folded
        end = next(i for i in range(start + 1, len(nb.cells)) if (level(nb.cells[i]) or 9) <= 4)
        assert nb.cells[end].source == "#### Your answer", f"{chapter.name}: the fold of {number} ends early"
        inside = range(start + 1, end)
        assert [i for i in ex.solution_cells] == [i for i in inside if is_solution(nb.cells[i])] != []
        assert not any(PREDICTION_TAG in nb.cells[i].metadata.get("tags", []) for i in inside)
        answer = nb.cells[end + 1]
        assert answer.cell_type == "code" and answer.source.startswith(f"# Your answer to Exercise {number}:")
        assert end + 2 == ex.check_cell, "the learner's answer cell sits right above the check"
        assert answer.source.splitlines()[-1] == f'ah.checks.no_answer_yet("{number}")'
        # the check's output is what Run All gives under the untouched answer cell: the book's solution passed
        said = "".join(o.get("text", "") for o in book.cells[ref.check_cell].outputs).splitlines()
        shown = "".join(o.get("text", "") for o in nb.cells[ex.check_cell].outputs).splitlines()
        if said and all(line.startswith("✓ ") for line in said):
            assert shown == [*waiting_note(number).splitlines(), *(f"{line} (the book's solution)" for line in said)]
        else:
            assert shown == said
        if ex.predict:
            assert nb.cells[ex.cell + 1].source.strip() == PREDICTION_PROMPT
        if ex.words:  # an exercise that asks for words (say why) gets a place for them (issue 40)
            assert nb.cells[ex.cell + 1].source.strip() == WORDS_PROMPT


def test_chapter_1_reads_as_the_website_does(editions):
    nb = editions[CHAPTER_1.name]
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "a weight of 0.8808 and the second" in text and "Equation (1.3) computes (1.1) and (1.2)" in text
    assert "**Figure 1.1:** Each row shows how one word" in text and "Each row of Figure 1.1 sums to one" in text
    # the answer to the "predict, then run" question is there, folded under its heading, with its output
    at = next(i for i, c in enumerate(nb.cells) if c.source == "#### Solution to Exercise 1.1")
    assert "The scores double to 8 and 4" in nb.cells[at + 1].source
    assert "tensor([0.9820, 0.0180])" in str(nb.cells[at + 2].outputs)


def test_committed_editions_are_what_the_chapters_make(editions):
    """editions/ (what the Colab and Binder buttons open) is exactly what `make editions` writes now."""
    committed = sorted(p.name for p in (ROOT / "editions").glob("*.ipynb"))
    assert committed == [c.name for c in CHAPTERS], "run `make editions` and commit editions/"
    for chapter in CHAPTERS:
        on_disk = (ROOT / "editions" / chapter.name).read_text(encoding="utf-8")
        assert on_disk == as_text(editions[chapter.name]), \
            f"editions/{chapter.name} is out of date: run `make editions` (make refresh does) and commit it"


def test_the_committed_editions_are_not_collected_twice():
    """pytest looks in tests/ (pyproject's testpaths), make's nbval runs name chapters/; ruff and the build skip
    them."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'testpaths = ["tests"]' in pyproject and '"editions"' in pyproject
    assert '"editions"' in (ROOT / "_config.yml").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "--nbval chapters" in makefile and "editions --nbval" not in makefile


def test_command_line_writes_the_editions(tmp_path, capsys):
    assert make_editions_main([str(CHAPTER_1), "--out", str(tmp_path)]) == 0
    assert (tmp_path / CHAPTER_1.name).read_text() == (ROOT / "editions" / CHAPTER_1.name).read_text()
    assert make_editions_main([str(tmp_path / "missing.ipynb")]) == 2
    assert "is not a notebook file" in capsys.readouterr().err


# --- the learner's folder ------------------------------------------------------------------------------------
def notebook(*sources: str) -> str:
    return as_text(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s, id=f"c{i}")
                                                   for i, s in enumerate(sources)]))


def edit(path: Path, source: str) -> None:
    nb = json.loads(path.read_text())
    nb["cells"][0]["source"] = source
    path.write_text(json.dumps(nb))


def test_a_learners_copy_is_kept_and_the_new_edition_goes_beside_it(tmp_path):
    folder = tmp_path / "my-notebooks"
    first = place({"01_a.ipynb": notebook("x = 1"), "02_b.ipynb": notebook("y = 1")}, folder)
    assert [p.status for p in first] == ["new", "new"] and (folder / MANIFEST).is_file()
    assert [p.status for p in place({"01_a.ipynb": notebook("x = 1")}, folder)] == ["same"]

    edit(folder / "01_a.ipynb", "x = 1  # my note")
    ran = json.loads((folder / "02_b.ipynb").read_text())   # 02 only run: outputs and metadata, no typing
    ran["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    ran["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    (folder / "02_b.ipynb").write_text(json.dumps(ran))
    second = place({"01_a.ipynb": notebook("x = 2"), "02_b.ipynb": notebook("y = 2")}, folder)
    assert [(p.status, p.path.relative_to(folder).as_posix()) for p in second] == [
        ("kept", f"{ASIDE}/01_a.ipynb"), ("updated", "02_b.ipynb")]
    assert "x = 1  # my note" in (folder / "01_a.ipynb").read_text()           # the learner's, untouched
    assert "x = 2" in (folder / ASIDE / "01_a.ipynb").read_text()            # the new edition, beside it
    said = report(second, folder)
    assert (f"kept your {folder / '01_a.ipynb'} (you edited it); "
            f"the new edition is {folder / ASIDE / '01_a.ipynb'}") in said

    edit(folder / ASIDE / "01_a.ipynb", "x = 2  # tried the new one")   # edited the new edition too
    third = place({"01_a.ipynb": notebook("x = 3")}, folder)
    assert third[0].status == "kept" and third[0].path == folder / ASIDE / "01_a-2.ipynb"
    assert "tried the new one" in (folder / ASIDE / "01_a.ipynb").read_text()
    assert "x = 1  # my note" in (folder / "01_a.ipynb").read_text()


def test_make_lab_says_kept_only_when_the_edition_changed(tmp_path):
    """An edited copy gets a word, and a fresh edition beside it, only when the book changed its edition; runs of
    make lab with the book unchanged (before or after that) say nothing new and write nothing (issue 40)."""
    folder = tmp_path / "my-notebooks"
    place({"01_a.ipynb": notebook("x = 1"), "02_b.ipynb": notebook("y = 1")}, folder)
    edit(folder / "01_a.ipynb", "x = 1  # my answer")
    for _ in range(2):  # the book unchanged: no new edition, no word of one
        again = place({"01_a.ipynb": notebook("x = 1"), "02_b.ipynb": notebook("y = 1")}, folder)
        assert [p.status for p in again] == ["edited", "same"] and not (folder / ASIDE).exists()
        said = report(again, folder)
        assert "new edition is" not in said and "kept 1 notebook you edited as you left it (01_a.ipynb)" in said, said
    changed = place({"01_a.ipynb": notebook("x = 2")}, folder)  # the book changed: said once
    assert changed[0].status == "kept" and "the new edition is" in report(changed, folder)
    stamp = (folder / ASIDE / "01_a.ipynb").stat().st_mtime_ns
    for _ in range(2):
        later = place({"01_a.ipynb": notebook("x = 2")}, folder)
        assert later[0].status == "edited" and "new edition is" not in report(later, folder)
    assert (folder / ASIDE / "01_a.ipynb").stat().st_mtime_ns == stamp
    assert "x = 1  # my answer" in (folder / "01_a.ipynb").read_text()
    assert place({"01_a.ipynb": notebook("x = 3")}, folder)[0].status == "kept"  # changed again: said again


def test_the_colab_cell_is_folded_without_a_count_and_make_lab_leaves_it_out(editions, tmp_path):
    """The Colab set-up cell ran in the chapter ([1], no output); an edition shows it folded, with no count that
    the learner did not run, and make lab's copies, opened in JupyterLab on the learner's machine, go without it."""
    for name, nb in editions.items():
        colab = [c for c in nb.cells if "colab-setup" in c.metadata.get("tags", [])]
        assert len(colab) == 1 and colab[0].execution_count is None and colab[0].outputs == [], name
        assert colab[0].metadata["jupyter"]["source_hidden"] is True, name
    assert lab.make_folder(tmp_path, [CHAPTER_1]) == f"wrote {tmp_path / CHAPTER_1.name}"
    mine = nbformat.read(tmp_path / CHAPTER_1.name, as_version=4)
    assert not [c for c in mine.cells if "colab-setup" in c.metadata.get("tags", [])]
    assert not [c for c in mine.cells if c.cell_type == "code" and "google.colab" in c.source]
    assert len(mine.cells) == len(editions[CHAPTER_1.name].cells) - 1


def test_a_file_that_is_not_an_edition_written_here_is_never_overwritten(tmp_path):
    folder = tmp_path / "my-notebooks"
    folder.mkdir()
    (folder / "01_a.ipynb").write_text("my own notes, not even a notebook")
    placed = place({"01_a.ipynb": notebook("x = 1")}, folder)
    assert placed[0].status == "kept" and (folder / "01_a.ipynb").read_text() == "my own notes, not even a notebook"


def tracked_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def test_make_lab_writes_only_the_learners_folder_which_git_ignores(tmp_path, capsys):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked")
    before = tracked_state()
    assert lab.main(["--no-lab", "--folder", str(tmp_path / "mine"), str(CHAPTER_1)]) == 0
    assert f"wrote {tmp_path / 'mine' / CHAPTER_1.name}" in capsys.readouterr().out
    assert tracked_state() == before
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{lab.FOLDER.name}/{CHAPTER_1.name}"], cwd=ROOT)
    assert ignored.returncode == 0, "git must ignore the learner's folder"
    command = lab.lab_command(tmp_path / "mine", "--no-browser")
    assert f"--ServerApp.root_dir={(tmp_path / 'mine').resolve()}" in command


def test_the_learners_lab_runs_as_root_and_without_nbgrader_or_jupyterlab_myst(monkeypatch):
    monkeypatch.setattr(lab.os, "geteuid", lambda: 0, raising=False)
    assert "--allow-root" in lab.lab_command(Path("x"))
    monkeypatch.setattr(lab.os, "geteuid", lambda: 1000, raising=False)
    assert "--allow-root" not in lab.lab_command(Path("x"))
    env = lab.lab_env({"JUPYTER_CONFIG_PATH": "/elsewhere"})
    assert env["JUPYTER_CONFIG_PATH"].split(":")[0] == str(lab.LAB_CONFIG)
    # every server extension of nbgrader and jupyterlab-myst that the environment turns on is off in the learners' lab
    enabled = {}
    for path in (Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d").glob("*.json"):
        enabled.update(json.loads(path.read_text())["ServerApp"]["jpserver_extensions"])
    ours = json.loads((lab.LAB_CONFIG / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    wanted_off = {name for name in enabled if name.startswith(("nbgrader", "jupyterlab_myst"))}
    assert wanted_off and {name for name, on in ours.items() if on is False} >= wanted_off
    page = json.loads((lab.LAB_CONFIG / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"] == {"@jupyter/nbgrader": True, "jupyterlab-myst": True}


def test_launch_buttons_of_a_chapter_open_its_edition(tmp_path):
    """_ext/launch_buttons.py turns the theme's chapters/ addresses into editions/ ones (the built pages are checked
    by tests/test_links.py)."""
    from launch_buttons import point_to_editions

    page = "chapters/01_weighted_average"
    urls = {"Colab": f"https://colab.research.google.com/github/o/r/blob/main/{page}.ipynb",
            "Binder": f"https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/{page}.ipynb"}
    download = {"label": "download-buttons", "buttons": [{"text": ".ipynb", "url": f"{page}.ipynb"}]}
    launch = {"label": "launch-buttons", "buttons": [{"text": k, "url": v} for k, v in urls.items()]}
    context = {"header_buttons": [download, launch]}
    app = type("App", (), {"srcdir": str(ROOT)})()
    point_to_editions(app, page, "page.html", context, None)
    launch = {b["text"]: b["url"] for b in context["header_buttons"][1]["buttons"]}
    assert launch == {k: v.replace(f"{page}.ipynb", "editions/01_weighted_average.ipynb") for k, v in urls.items()}
    assert context["header_buttons"][0]["buttons"][0]["url"] == f"{page}.ipynb"   # the download stays the chapter
    assert (ROOT / "editions" / "01_weighted_average.ipynb").is_file()


def test_binder_starts_the_learners_lab():
    out = subprocess.run([str(ROOT / ".binder" / "start"), "env"], capture_output=True, text=True, check=True).stdout
    paths = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)["JUPYTER_CONFIG_PATH"]
    assert Path(paths.split(":")[0]).resolve() == lab.LAB_CONFIG


def test_make_lab_names_the_notebooks_it_kept_as_edited(tmp_path):
    """ "kept 2 notebooks you edited" says which (issue 47)."""
    folder = tmp_path / "my-notebooks"
    place({"01_a.ipynb": notebook("x = 1"), "02_b.ipynb": notebook("y = 1"), "03_c.ipynb": notebook("z = 1")}, folder)
    edit(folder / "01_a.ipynb", "x = 1  # mine")
    edit(folder / "03_c.ipynb", "z = 1  # mine")
    again = place({"01_a.ipynb": notebook("x = 1"), "02_b.ipynb": notebook("y = 1"), "03_c.ipynb": notebook("z = 1")},
                  folder)
    said = report(again, folder)
    assert "kept 2 notebooks you edited as you left them (01_a.ipynb and 03_c.ipynb)" in said, said
