"""Insert or update each chapter's Colab set-up cell: its first code cell, which does nothing outside Colab.

    python scripts/colab_cell.py chapters/*.ipynb          insert or update the cell, then re-execute
                                                           the chapters (scripts/run_chapters.py)
    python scripts/colab_cell.py --check chapters/*.ipynb  exit 1 if a chapter lacks the current cell

On Google Colab the cell clones the book's repository (its address comes from `repository:` in
_config.yml, the one place it is written), installs `attn_helpers` from it, and points
$ATTN_HELPERS_DATA at its `data/` folder so the GloVe vectors are found. Anywhere else it does
nothing and prints nothing, so nbval sees the same (empty) output everywhere. The website hides it
(tag `remove-cell`); the downloaded notebook keeps it. Running the script twice changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
TAG = "colab-setup"
TAGS = ["remove-cell", TAG]
COLAB_DIR = "/content/self-attention-book"
# What Colab lacks: the chapters import myst_nb for glue(); Colab already has torch, pandas, seaborn, ...
COLAB_EXTRAS = ["myst-nb>=1.0"]


def repository(config: Path = ROOT / "_config.yml") -> tuple[str, str]:
    """``(url, branch)`` of the book's repository, from ``repository:`` in ``_config.yml``."""
    repo = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("repository") or {}
    url = repo.get("url")
    if not url:
        raise SystemExit(f"{config} has no repository: url: entry; add the repository's address there.")
    return url.rstrip("/"), repo.get("branch") or "main"


def cell_source(url: str, branch: str) -> str:
    """The set-up cell's code: guarded by ``"google.colab" in sys.modules``."""
    extras = ", ".join(json.dumps(p) for p in COLAB_EXTRAS)
    return f'''\
# Set-up for Google Colab: fetch the book's code and data. Anywhere else this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    BOOK = "{COLAB_DIR}"
    if not os.path.isdir(BOOK):
        subprocess.run(["git", "clone", "--depth", "1", "--branch", "{branch}", "{url}", BOOK], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-e", BOOK, {extras}], check=True)
    sys.path.insert(0, BOOK)  # importable now, without restarting the runtime
    os.environ["ATTN_HELPERS_DATA"] = os.path.join(BOOK, "data")  # the shipped GloVe vectors
    os.chdir(os.path.join(BOOK, "chapters"))'''


def make_cell(source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = list(TAGS)
    cell.pop("id", None)  # ids are only kept where the notebook already uses them (see apply)
    return cell


def is_setup_cell(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])


def first_code_index(nb: nbformat.NotebookNode) -> int:
    return next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))


def apply(nb: nbformat.NotebookNode, source: str) -> bool:
    """Make the set-up cell the first code cell of ``nb`` with ``source``; return whether ``nb`` changed."""
    existing = [i for i, c in enumerate(nb.cells) if is_setup_cell(c)]
    if len(existing) == 1 and existing[0] == first_code_index(nb):
        cell = nb.cells[existing[0]]
        if cell.source == source and cell.metadata.get("tags") == TAGS:
            return False
        cell.source, cell.metadata["tags"] = source, list(TAGS)
        cell.outputs, cell.execution_count = [], None
        return True
    for i in reversed(existing):  # misplaced or duplicated: remove, then insert once at the right place
        del nb.cells[i]
    cell = make_cell(source)
    if any("id" in c for c in nb.cells):
        cell["id"] = "colab-setup"
    nb.cells.insert(first_code_index(nb), cell)
    return True


def is_current(nb: nbformat.NotebookNode, source: str) -> bool:
    i = first_code_index(nb)
    return i < len(nb.cells) and is_setup_cell(nb.cells[i]) and nb.cells[i].source == source and sum(
        is_setup_cell(c) for c in nb.cells) == 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="only report chapters without the current cell")
    args = parser.parse_args(argv)
    source = cell_source(*repository())
    stale = []
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        if args.check:
            if not is_current(nb, source):
                stale.append(path)
        elif apply(nb, source):
            nbformat.write(nb, path)
            print(f"{path}: Colab set-up cell written; re-execute it with scripts/run_chapters.py {path}")
        else:
            print(f"{path}: Colab set-up cell already current")
    for path in stale:
        print(f"{path}: no current Colab set-up cell; run: python scripts/colab_cell.py {path}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
