"""Every explorer has every part CONTRIBUTING's checklist "Adding an explorer" lists; a forgotten step fails with a
sentence naming that step (the module, ``__all__`` with its chapter, the view function, the rounding, the chapter's
cell and prose, the browser test)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import book_toc
import pytest

import attn_helpers.explorers as explorers

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attn_helpers" / "explorers"
NOT_EXPLORERS = {"_explorer.py", "_website.py", "__init__.py"}  # the shared pieces and the website's plugin
CHECKLIST = "CONTRIBUTING.md, \"Adding an explorer\""
#: Words the prose before an explorer uses to say what to do with it.
TO_DO = re.compile(r"\b(move|slide|drag|click|pick|choose|step|turn)", re.I)


def modules() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.glob("_*.py"))
            if path.name not in NOT_EXPLORERS}


def module_all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def explorer_names() -> list[str]:
    return [name for name in explorers.__all__ if name.endswith("_explorer")]


def chapter_comments() -> dict[str, int]:
    """Each name in the package's ``__all__`` and the chapter its line's comment names ("# chapter 5")."""
    lines = (PACKAGE / "__init__.py").read_text(encoding="utf-8").splitlines()
    found = {}
    for line in lines:
        if (comment := re.search(r"#\s*chapter (\d+)\s*$", line)):
            for name in re.findall(r'"(\w+)"', line.split("#")[0]):
                found[name] = int(comment[1])
    return found


def chapter_of(name: str) -> int:
    chapter = chapter_comments().get(name)
    assert chapter is not None, (
        f"{name} has no chapter comment in attn_helpers/explorers/__init__.py's __all__ (step 2 of {CHECKLIST}): "
        f"list it on its chapter's line, ending in '# chapter N'.")
    return chapter


def chapter_file(chapter: int) -> Path:
    return book_toc.chapter(chapter)


def test_every_explorer_module_exports_an_explorer_and_its_view_from_the_package():
    for filename, tree in modules().items():
        names = module_all(tree)
        figure = bool(names) and all(n.startswith("plot_") for n in names)  # an explorer's static alternative
        assert figure or any(n.endswith("_explorer") for n in names), (
            f"attn_helpers/explorers/{filename} builds no explorer in its __all__ (step 1 of {CHECKLIST}): a module "
            f"of its own holds one explorer, `x_explorer`, and its view function, `x_view`, both in its __all__ "
            f"(or only `plot_x`, the static figure of an explorer, step 5).")
        for name in names:
            assert name in explorers.__all__, (
                f"{name} (attn_helpers/explorers/{filename}) is missing from attn_helpers.explorers' __all__ (step 2 "
                f"of {CHECKLIST}): import it in __init__.py and list it on its chapter's line.")


@pytest.mark.parametrize("name", explorer_names())
def test_every_explorer_has_a_view_function_and_a_chapter(name):
    view = name.removesuffix("_explorer") + "_view"
    assert view in explorers.__all__, (
        f"{name} has no view function {view} in attn_helpers.explorers' __all__ (step 3 of {CHECKLIST}): a plain "
        f"Python function that computes what the chart shows, which the browser test compares with it.")
    chapter = chapter_of(name)
    assert chapter_of(view) == chapter, f"{name} and {view} are listed under different chapters in __all__"
    for function in (name, view):
        doc = getattr(explorers, function).__doc__ or ""
        assert f"(chapter {chapter})" in doc, (
            f"{function}'s docstring does not say '(chapter {chapter})' (the API page step of {CHECKLIST}): the API "
            f"page files it under the chapter its docstring names.")


@pytest.mark.parametrize("name", explorer_names())
def test_every_explorers_data_are_rounded(name):
    module = Path(getattr(explorers, name).__code__.co_filename)
    source = module.read_text(encoding="utf-8")
    assert "rounded(" in source or re.search(r"\bDECIMALS\b", source), (
        f"{module.name} neither puts its floats through `rounded` nor keeps trained numbers to DECIMALS (step 4 of "
        f"{CHECKLIST}): its spec would differ between CPUs, and nbval and scripts/portability.py would fail.")


@pytest.mark.parametrize("name", explorer_names())
def test_every_explorer_is_shown_and_introduced_by_its_chapter(name):
    chapter = chapter_of(name)
    path = chapter_file(chapter)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    calls = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
             and re.search(rf"\bexplorers\.{name}\(", "".join(cell["source"]))]
    assert calls, (f"{path.name} never calls ah.explorers.{name}(...) (step 5 of {CHECKLIST}): an explorer is shown "
                   f"by a code cell of the chapter named on its line of __all__.")
    for i in calls:
        outputs = [o for o in cells[i].get("outputs", []) if explorers.MIME_TYPE in o.get("data", {})]
        assert outputs, (f"{path.name}'s cell {cells[i].get('id')} shows no Vega-Lite output (step 5 of {CHECKLIST}): "
                         f"refresh the chapter (make refresh CHAPTERS={path.relative_to(ROOT)}).")
        prose = [c for c in cells[max(0, i - 2):i] if c["cell_type"] == "markdown"]
        assert prose and TO_DO.search("".join(prose[-1]["source"])), (
            f"no markdown cell just before {path.name}'s cell {cells[i].get('id')} says what to move or click (step "
            f"5 of {CHECKLIST}): introduce the explorer in the prose above it, what to do and what to watch.")
    figures = [c for c in cells if c["metadata"].get("mystnb", {}).get("image", {}).get("alt")]
    assert figures, (f"{path.name} has no static figure with alt text (step 5 of {CHECKLIST}): where JavaScript "
                     f"cannot run, a figure (or table) says what the explorer shows.")


@pytest.mark.parametrize("name", explorer_names())
def test_every_explorer_has_a_browser_test_comparing_it_with_its_view(name):
    chapter = chapter_of(name)
    view = name.removesuffix("_explorer") + "_view"
    test = ROOT / "tests" / f"test_explorer_ch{chapter:02d}_browser.py"
    assert test.is_file(), (
        f"{name} has no browser test tests/{test.name} (step 6 of {CHECKLIST}): it moves the controls in Chromium, "
        f"by mouse and keyboard, and compares the marks' numbers with {view} to 1e-6.")
    source = test.read_text(encoding="utf-8")
    assert re.search(rf"\b{view}\b", source), (
        f"tests/{test.name} never calls {view} (step 6 of {CHECKLIST}): what the chart shows must be compared with "
        f"its view function.")
    assert "open_explorers" in source, (
        f"tests/{test.name} does not open the built page (explorer_browser.open_explorers), step 6 of {CHECKLIST}.")
