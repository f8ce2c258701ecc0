"""scripts/colab_cell.py: the Colab set-up cell is inserted once, kept current, silent outside Colab,
and on Colab clones the repository named in _config.yml, installs it and points at its GloVe data."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import nbformat
import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import colab_cell  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def toy_notebook(with_ids: bool = True) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\nWhat you will learn."),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_markdown_cell("## A section"),
        nbformat.v4.new_code_cell("x = 1"),
    ])
    if not with_ids:
        nb.nbformat_minor = 4
        for cell in nb.cells:
            cell.pop("id", None)
    return nb


@pytest.fixture
def source() -> str:
    return colab_cell.cell_source(*colab_cell.repository())


def test_repository_comes_from_config_yml():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url, branch = colab_cell.repository()
    assert url == config["repository"]["url"].rstrip("/") and url.startswith("https://")
    assert branch == config["repository"].get("branch", "main")
    assert url in colab_cell.cell_source(url, branch)


def test_inserted_as_first_code_cell_with_tags(source):
    nb = toy_notebook()
    assert colab_cell.apply(nb, source) is True
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "markdown", "code"]
    cell = nb.cells[1]
    assert cell.source == source and cell.metadata["tags"] == ["remove-cell", "colab-setup"]
    assert cell.outputs == [] and cell.execution_count is None
    nbformat.validate(nb)


def test_idempotent_on_disk(tmp_path, source):
    path = tmp_path / "nb.ipynb"
    nbformat.write(toy_notebook(), path)
    assert colab_cell.main([str(path)]) == 0
    once = path.read_bytes()
    assert colab_cell.main([str(path)]) == 0
    assert path.read_bytes() == once
    nb = nbformat.read(path, as_version=4)
    assert sum(colab_cell.is_setup_cell(c) for c in nb.cells) == 1
    assert colab_cell.main(["--check", str(path)]) == 0


def test_notebook_without_cell_ids_stays_valid(source):
    nb = toy_notebook(with_ids=False)
    colab_cell.apply(nb, source)
    assert "id" not in nb.cells[1]
    nbformat.validate(nb)


def test_stale_or_misplaced_cell_is_replaced_not_duplicated(source):
    nb = toy_notebook()
    old = colab_cell.make_cell("# an older version of the set-up")
    old["id"] = "old-setup"
    nb.cells.append(old)  # misplaced: last instead of first code cell
    assert colab_cell.is_current(nb, source) is False
    assert colab_cell.apply(nb, source) is True
    assert sum(colab_cell.is_setup_cell(c) for c in nb.cells) == 1
    assert colab_cell.is_current(nb, source)
    assert colab_cell.apply(nb, source) is False


def test_check_mode_reports_a_chapter_without_the_cell(tmp_path, capsys):
    path = tmp_path / "nb.ipynb"
    nbformat.write(toy_notebook(), path)
    assert colab_cell.main(["--check", str(path)]) == 1
    assert "colab_cell.py" in capsys.readouterr().err


def test_does_nothing_outside_colab(source, monkeypatch, capsys):
    assert "google.colab" not in sys.modules
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(os, "chdir", lambda *a: calls.append(a))
    before = dict(os.environ)
    exec(compile(source, "colab-setup", "exec"), {})
    assert calls == [] and capsys.readouterr() == ("", "")
    assert dict(os.environ) == before


def test_on_colab_clones_installs_and_finds_the_data(source, monkeypatch):
    url, branch = colab_cell.repository()
    runs, dirs = [], []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: runs.append(cmd))
    monkeypatch.setattr(os.path, "isdir", lambda p: False)
    monkeypatch.setattr(os, "chdir", dirs.append)
    monkeypatch.setenv("ATTN_HELPERS_DATA", "before")  # so that teardown restores the real value (or none)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(source, "colab-setup", "exec"), {})
    book = colab_cell.COLAB_DIR
    assert runs[0][:2] == ["git", "clone"] and url in runs[0] and branch in runs[0] and runs[0][-1] == book
    assert runs[1][1:5] == ["-m", "pip", "install", "--quiet"] and ["-e", book] == runs[1][5:7]
    assert os.environ["ATTN_HELPERS_DATA"] == os.path.join(book, "data")
    assert dirs == [os.path.join(book, "chapters")] and sys.path[0] == book


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_the_current_cell_and_it_ran_silently(path, source):
    nb = nbformat.read(path, as_version=4)
    assert colab_cell.is_current(nb, source), f"run: python scripts/colab_cell.py chapters/{path.name}"
    cell = nb.cells[colab_cell.first_code_index(nb)]
    assert cell.outputs == [] and cell.execution_count == 1
