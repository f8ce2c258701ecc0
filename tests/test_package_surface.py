"""The face of attn_helpers: a dozen top-level names, modules reached lazily, a cheap import (issues 13 and 14)."""

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import book_toc
import pytest

import attn_helpers as ah

CORE = {
    "attention", "softmax", "loop_attention", "SelfAttentionHead", "MultiHeadAttention", "causal_mask", "padding_mask",
    "GloVe", "tokenize", "cosine_similarity", "plot_attention", "plot_heads", "table",
}
HEAVY = ("matplotlib", "seaborn", "pandas", "ipywidgets", "attn_helpers.checks", "attn_helpers.plotting")
PUBLIC_MODULES = sorted(
    info.name for info in pkgutil.iter_modules(ah.__path__) if not info.name.startswith("_") and info.name != "data"
)


def fresh_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def fresh_import() -> dict:
    """One fresh interpreter (importing torch costs seconds): what `import attn_helpers` loads, then what
    touching a lazy name loads."""
    return json.loads(fresh_python(
        "import json, sys\nimport attn_helpers as ah\n"
        f"heavy = [m for m in {list(HEAVY)!r} if m in sys.modules]\n"
        "f = ah.plot_attention\n"
        "print(json.dumps({'heavy': heavy, 'plot_module': f.__module__, 'matplotlib': 'matplotlib' in sys.modules,"
        " 'modules': [ah.scaling.__name__, ah.checks.__name__]}))"
    ))


def test_import_loads_no_plotting_tables_widgets_or_checks(fresh_import):
    loaded = fresh_import["heavy"]
    assert loaded == [], f"import attn_helpers imported {loaded}; import them where they are used"


def test_lazy_names_load_their_module_on_first_use(fresh_import):
    assert fresh_import["plot_module"] == "attn_helpers.plotting" and fresh_import["matplotlib"]
    assert fresh_import["modules"] == ["attn_helpers.scaling", "attn_helpers.checks"]


def test_top_level_is_the_core_and_dir_adds_the_modules():
    assert set(ah.__all__) == CORE and len(ah.__all__) == len(CORE)
    modules = [m for m in PUBLIC_MODULES if m != "attention"]  # ah.attention is the function, the module's main name
    assert dir(ah) == sorted([*CORE, *modules])
    for name in CORE:
        assert callable(getattr(ah, name)), name


def defined_names(path: str) -> set[str]:
    """The names a module's source defines at top level (functions, classes, constants), and, for a package's
    ``__init__``, those it re-exports from its private modules (``from ._watch import Watch``)."""
    names = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and (node.module or "").startswith("_") \
                and Path(path).name == "__init__.py":
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:  # a name, or a tuple of names (T_Q, T_K = 3, 7)
                targets = [t] if isinstance(t, ast.Name) else getattr(t, "elts", [])
                names |= {n.id for n in targets if isinstance(n, ast.Name)}
    return names


CHECK_MODULES = sorted(f"checks.{p.stem}" for p in (Path(ah.__file__).parent / "checks").glob("ch[0-9][0-9].py"))


@pytest.mark.parametrize("module", PUBLIC_MODULES + CHECK_MODULES)
def test_every_module_lists_exactly_its_public_names(module):
    mod = importlib.import_module(f"attn_helpers.{module}")
    assert hasattr(mod, "__all__"), f"attn_helpers.{module} has no __all__"
    public = {n for n in defined_names(mod.__file__) if not n.startswith("_")}
    assert sorted(mod.__all__) == sorted(public), "underscore internals; list every other name in __all__"


def test_moved_names_are_reached_through_their_module():
    assert ah.scaling.entropy is importlib.import_module("attn_helpers.scaling").entropy
    assert ah.explore.ODYSSEY_SENTENCE.startswith("I must go back")
    with pytest.raises(AttributeError, match="the rest is in its module"):
        ah.dot_product_variance  # noqa: B018


def test_api_page_lists_every_top_level_name_with_its_chapter():
    import attn_api  # in _ext/, on the path through pyproject.toml

    rows = [line for line in attn_api.top_level_section().splitlines() if line.startswith("| {py:obj}")]
    assert [row.split("`")[1].split()[0] for row in rows] == [f"ah.{name}" for name in ah.__all__]
    assert all(row.split(" | ")[1].strip()[0].isdigit() for row in rows)  # the chapter column


def test_api_page_groups_every_public_name_by_chapter():
    """Every name of every public module's __all__ is listed under the chapters its docstring names (issue 41)."""
    import attn_api

    index = attn_api.chapter_index()
    listed = {(module, name) for modules in index.values() for module, names in modules.items() for name in names}
    public = {(m, n) for m in attn_api.public_modules() for n in importlib.import_module(m).__all__}
    assert listed == public
    assert set(index) == {*range(1, len(book_toc.chapters()) + 1), attn_api.EVERY}  # each chapter, once

    def names(chapter):
        return {f"{m.removeprefix('attn_helpers.')}.{name}" for m, names in index[chapter].items() for name in names}

    stretching = {"long_context.interpolation", "long_context.ntk_aware", "long_context.yarn",
                  "sliding_window.window_mask", "sliding_window.RingCache", "extrapolation.train"}
    assert stretching <= names(11) and not stretching & names(10)
    assert {"attention.attention", "attention.loop_attention", "masks.causal_mask"} <= names(7)
    assert "attention.attention" in names(1)  # "(chapter 1; mask in chapter 7)"
    assert {"cost.TensorMemoryTracker"} <= names(6) & names(7)  # "(chapters 6-7)"
    assert {"checks.ch03.cat_street_weights", "checks.ch03.CAT_SENTENCE", "glove.GloVe"} <= names(3)
    shared = {"validate.token_ids", "checks.check_tensor", "plotting.plot_attention", "tables.table", "training.fit"}
    assert shared <= names(attn_api.EVERY)
    assert "training.fit" in names(4) and "validate.token_ids" not in names(11)  # a module serving all: there only
    assert "training.copy_task_batch" not in names(attn_api.EVERY)


def test_api_page_reads_the_chapters_a_docstring_names():
    import attn_api

    assert attn_api.chapters_named("Attention (chapter 1; mask in chapter 7).\n\nLater (chapter 9).") == {1, 7}
    assert attn_api.chapters_named("Memory (chapters 6-7); and (chapters 1, 2 and 9).") == {6, 7, 1, 2, 9}
    assert attn_api.chapters_named("Slopes (chapter 11; Press et al., 2022).") == {11}
    assert attn_api.chapters_named("Exercise ex-ch03-cat: the weights.") == {3}
    assert attn_api.chapters_named("The loop (chapter 4 onwards).") == {4, attn_api.EVERY}
    assert attn_api.chapters_named("Input checks (every chapter).") == {attn_api.EVERY}
    assert attn_api.chapters_named("As chapter 8 showed.") == set()


def test_api_page_fails_on_a_name_that_names_no_chapter(monkeypatch):
    import attn_api

    monkeypatch.setattr(ah.long_context.yarn, "__doc__", "RoPE's frequencies, stretched.")
    with pytest.raises(ValueError, match=r"attn_helpers\.long_context\.yarn's docstring names no chapter"):
        attn_api.chapter_index()


def test_api_page_fails_on_a_chapter_the_book_does_not_have():
    import attn_api

    titles = attn_api.chapter_titles(Path(__file__).parent.parent)
    assert titles[11] == ("chapters/11_longer_than_trained", "Longer than trained")
    del titles[12]
    with pytest.raises(ValueError, match=r"chapters the book does not have, \[12\].*latent\.LatentAttention"):
        attn_api.chapter_section(titles)


def test_api_page_shows_a_constants_comment_and_not_its_types_docstring():
    """A constant's ``#:`` comment stays on the API page; a bare constant's str or tuple docstring goes."""
    import attn_api

    comment = ["The sentence where \"ship\" is a verb (chapter 3)."]
    lines = list(comment)
    attn_api.drop_type_docstring(None, "data", "attn_helpers.explore.ORDER_SENTENCE", ah.explore.ORDER_SENTENCE,
                                 None, lines)
    assert lines == comment
    lines = str.__doc__.splitlines()
    attn_api.drop_type_docstring(None, "data", "attn_helpers.masks.MASK_CONVENTIONS", ah.masks.MASK_CONVENTIONS,
                                 None, lines)
    assert lines == []
    assert "MIME_TYPE" not in attn_api.bare_constants("attn_helpers.explorers")  # its comment is in __init__


def test_api_page_says_what_a_chapter_introduces_and_what_else_it_uses():
    """Each chapter: the names its docstrings name first, then those of earlier chapters its code reads (issue 50)."""
    import attn_api

    root = Path(__file__).parent.parent
    titles = attn_api.chapter_titles(root)
    uses = {n: attn_api.code_uses(root / f"{docname}.ipynb") for n, (docname, _) in titles.items()}
    assert {("attn_helpers.attention", "softmax"), ("attn_helpers.attention", "attention")} <= uses[1]
    assert ("attn_helpers.cost", "time_call") in uses[10] and ("attn_helpers.cost", "time_call") not in uses[9]
    page = attn_api.chapter_section(titles, uses=uses)

    def chapter(n):
        introduces, _, also = page.split(f"### Chapter {n}:")[1].split("\n### ")[0].partition("What else it uses")
        return introduces, also

    introduces, also = chapter(10)
    assert "<attn_helpers.cost.time_call>" in also and "<attn_helpers.cost.time_call>" not in introduces
    assert "<attn_helpers.flash.flash_forward>" in introduces
    introduces, also = chapter(7)
    assert "<attn_helpers.cost.time_call>" in introduces and "<attn_helpers.attention.attention>" in also
    assert "<attn_helpers.validate." not in page.split("### Used by every chapter")[0]  # shared: listed once, there


def test_api_page_fails_on_a_chapter_whose_code_uses_a_name_before_its_docstring_does(monkeypatch):
    import attn_api

    root = Path(__file__).parent.parent
    titles = attn_api.chapter_titles(root)
    monkeypatch.setattr(ah.cost.time_call, "__doc__", "Seconds one call takes (chapter 11).")
    with pytest.raises(ValueError, match=r"chapter 10's code uses attn_helpers\.cost\.time_call \(chapter 11\) "
                                         r"before the chapter its docstring names first"):
        attn_api.chapter_section(titles, uses={10: attn_api.code_uses(root / f"{titles[10][0]}.ipynb")})
