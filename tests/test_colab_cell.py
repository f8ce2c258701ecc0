"""Each chapter's Colab set-up cell: the same in every chapter, silent outside Colab, and on Colab it clones
the repository named in _config.yml, installs it and points at its GloVe data.

The cell is written once, in chapter 1; a new chapter copies it as its first code cell (instructors.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import book_toc
import nbformat
import pytest
import yaml
from conftest import ROOT

CHAPTERS = book_toc.chapters()
COLAB_DIR = "/content/self-attention-book"


def first_code_cell(path) -> nbformat.NotebookNode:
    return next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")


@pytest.fixture(scope="module")
def source() -> str:
    return first_code_cell(CHAPTERS[0]).source


def test_the_cell_clones_the_repository_of_config(source):
    repo = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]
    assert f'"--branch", "{repo["branch"]}", "{repo["url"].rstrip("/")}"' in source
    assert source.splitlines()[0].startswith("# Set-up for Google Colab")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_starts_with_the_same_cell_and_it_ran_silently(path, source):
    cell = first_code_cell(path)
    assert cell.source == source, f"copy chapter 1's Colab set-up cell into {path.name} as its first code cell"
    assert cell.metadata.get("tags") == ["remove-cell", "colab-setup"]  # hidden on the website
    assert cell.outputs == [] and cell.execution_count == 1


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
    runs, dirs = [], []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: runs.append(cmd))
    monkeypatch.setattr(os.path, "isdir", lambda p: False)
    monkeypatch.setattr(os, "chdir", dirs.append)
    monkeypatch.setenv("ATTN_HELPERS_DATA", "before")  # so that teardown restores the real value (or none)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(source, "colab-setup", "exec"), {})
    assert runs[0][:2] == ["git", "clone"] and runs[0][-1] == COLAB_DIR
    assert runs[1][1:5] == ["-m", "pip", "install", "--quiet"] and ["-e", COLAB_DIR] == runs[1][5:7]
    assert os.environ["ATTN_HELPERS_DATA"] == os.path.join(COLAB_DIR, "data")
    assert dirs == [os.path.join(COLAB_DIR, "chapters")] and sys.path[0] == COLAB_DIR
