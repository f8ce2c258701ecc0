"""The book's invariants: the table of contents, the chapters' imports, and clean committed notebooks."""

import json
import re

import pytest
from book_toc import toc_files
from conftest import ROOT

import attn_helpers

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def public_names():
    names = set()
    for module in vars(attn_helpers).values():
        if getattr(module, "__name__", "").startswith("attn_helpers.") and hasattr(module, "__file__"):
            names |= {n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n))}
    return names - {"Path", "Iterable", "Sequence", "Callable", "Mapping", "annotations", "tqdm"}


def test_chapters_are_named_and_numbered_in_order():
    assert CHAPTERS, "no chapters found"
    numbers = [int(p.name[:2]) for p in CHAPTERS]
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name) for p in CHAPTERS)
    assert numbers == list(range(1, len(CHAPTERS) + 1))


def test_toc_and_chapters_agree():
    listed = [f for f in toc_files() if f.startswith("chapters/")]
    on_disk = [f"chapters/{p.stem}" for p in CHAPTERS]
    assert listed == on_disk, "every chapter in chapters/ must be in _toc.yml, in order, and nothing else"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_imports_attn_helpers_and_redefines_none_of_it(path):
    sources = ["".join(c["source"]) for c in code_cells(path)]
    assert any(re.search(r"^\s*(import attn_helpers|from attn_helpers)", s, re.M) for s in sources)
    defined = {m for s in sources for m in re.findall(r"^\s*(?:def|class)\s+(\w+)", s, re.M)}
    assert not defined & public_names(), "use attn_helpers' version instead of redefining it"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_committed_notebook_is_executed_and_clean(path):
    nb = json.loads(path.read_text())
    cells = [c for c in code_cells(path) if "".join(c["source"]).strip()]
    skipped = [c for c in cells if "skip-execution" in c["metadata"].get("tags", [])]
    for cell in skipped:  # interactive-only cells: never run automatically, so they must say why
        assert "nbval-skip" in cell["metadata"]["tags"] and "".join(cell["source"]).startswith("#")
        assert cell["execution_count"] is None and not cell["outputs"]
    cells = [c for c in cells if c not in skipped]
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1)), "run `make refresh`"
    assert not [o for c in cells for o in c["outputs"] if o["output_type"] == "error"
                and "raises-exception" not in c["metadata"].get("tags", [])]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert "version" not in nb["metadata"].get("language_info", {}), "strip volatile metadata: `make refresh`"
    assert "widgets" not in nb["metadata"]
    assert not [c for c in nb["cells"] if "execution" in c["metadata"] or "ExecuteTime" in c["metadata"]]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_ends_with_a_summary_then_its_exercises(path):
    """A rewrite of the last cells must not drop the headings a reader navigates by (## Summary, ## Exercises)."""
    cells = json.loads(path.read_text())["cells"]
    headings = [line for c in cells if c["cell_type"] == "markdown"
                for line in "".join(c["source"]).splitlines() if line.startswith("## ")]
    first_exercise = next(i for i, c in enumerate(cells) if "{exercise}" in "".join(c["source"]))
    before = [line for c in cells[:first_exercise] if c["cell_type"] == "markdown"
              for line in "".join(c["source"]).splitlines() if line.startswith("## ")]
    assert headings[-2:] == ["## Summary", "## Exercises"] and before[-1] == "## Exercises", headings[-3:]
