"""The book's invariants: the table of contents, the chapters' imports, and clean committed notebooks."""

import json
import re
import subprocess
from pathlib import Path

import book_toc
import pytest
from conftest import ROOT

import attn_helpers

CHAPTERS = book_toc.chapters()  # the one answer to "which files are the chapters" (the tests below hold it to disk)


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def public_names():
    names = set()
    for module in vars(attn_helpers).values():
        if getattr(module, "__name__", "").startswith("attn_helpers.") and hasattr(module, "__file__"):
            names |= {n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n))}
    return names - {"Path", "Iterable", "Sequence", "Callable", "Mapping", "annotations", "tqdm"}


def test_chapters_are_named_and_numbered_in_order():
    assert CHAPTERS, "_toc.yml lists no chapters/ file"
    for place, path in enumerate(CHAPTERS, start=1):
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), \
            f"chapters/{path.name} is not named NN_slug.ipynb (two digits, then lower-case words joined by _)"
        assert int(path.name[:2]) == place, (f"chapters/{path.name} is chapter {place} in _toc.yml: rename it "
                                             f"{place:02d}_…, or move its entry in _toc.yml")


def test_every_notebook_in_chapters_is_in_the_toc_and_every_entry_has_one():
    on_disk = sorted((ROOT / "chapters").glob("*.ipynb"))
    unlisted = [f"chapters/{p.name}" for p in on_disk if p not in CHAPTERS]
    assert not unlisted, (f"{', '.join(unlisted)} in chapters/ but not in _toc.yml: add '- file: chapters/<its name "
                          "without .ipynb>' there, in reading order, or move the notebook out of chapters/")
    missing = [f"chapters/{p.name}" for p in CHAPTERS if not p.is_file()]
    assert not missing, f"_toc.yml lists {', '.join(missing)}, which chapters/ does not hold: add it or drop the entry"


def test_the_makefile_reads_the_chapters_from_book_toc():
    """make's CHAPTERS (what refresh, editions, portable … run on) is the same list, in the same order."""
    shown = subprocess.run(["make", "-s", "--no-print-directory", "--eval", "shown: ; @echo $(CHAPTERS)", "shown"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert shown == [p.relative_to(ROOT).as_posix() for p in CHAPTERS], \
        f"the Makefile's CHAPTERS is not book_toc.chapters(): {shown}"


GLOBS = re.compile(r"""glob\(\s*f?["'][^"']*_\*\.ipynb|["']chapters["']\s*\)\s*\.(?:r?glob|iterdir)\(""")


def test_no_script_test_or_extension_lists_the_chapters_its_own_way():
    """A glob of chapters/ would differ from _toc.yml's list for a notebook not in it: book_toc is the one answer."""
    files = [p for folder in ("scripts", "tests", "_ext") for p in (ROOT / folder).rglob("*.py")
             if p.name not in ("book_toc.py", Path(__file__).name)]
    own = [f"{path.relative_to(ROOT)}:{n}" for path in files
           for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if GLOBS.search(line)]
    assert not own, (f"{', '.join(own)} globs the chapters' notebooks: use book_toc.chapters() (or "
                     "book_toc.chapter(N)), which reads _toc.yml")


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
