"""How the modules of scripts/ and attn_helpers import each other: in no loop, and never another module's private name.

An import loop makes a module's names depend on which module Python happened to import first, and a private name
(``_x``) taken from another module is a rule that module never promised to keep (issue 50). Both are read from the
sources: every ``import`` and ``from … import`` (at any depth: a function's own imports count too), and
``importlib.import_module(f"{__name__}.…")``, by which a package imports each of its own modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Where each tree's modules are importable from: scripts/ is on the path (python scripts/x.py, pyproject's pytest
# pythonpath), attn_helpers from the checkout's root.
TREES = {"scripts": ROOT / "scripts", "attn_helpers": ROOT}


def module_files(tree: str) -> dict[str, Path]:
    """{dotted name: file} of every module of ``tree`` (a package's ``__init__.py`` named as the package)."""
    base = TREES[tree]
    top = ROOT / tree if tree == "attn_helpers" else base
    found = {}
    for path in sorted(top.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            found[".".join(parts)] = path
    return found


MODULES = {name: path for tree in TREES for name, path in module_files(tree).items()}


def package_of(module: str) -> str:
    """The package a module's relative imports start from (a package's own name for its ``__init__``)."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def resolved(module: str, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import …`` written in ``module``."""
    if not level:
        return name or ""
    base = package_of(module).split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def imported(module: str) -> dict[str, list[str]]:
    """{module of the book it imports: the names it takes from it ([] for ``import x``)}."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {}

    def add(target: str, names: list[str]) -> None:
        while target and target not in MODULES:  # ``import a.b.c`` of a name inside a module: that module
            target = target.rpartition(".")[0]
        if target and target != module:
            found.setdefault(target, []).extend(names)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, [])
        elif isinstance(node, ast.ImportFrom):
            source = resolved(module, node.level, node.module)
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:  # ``from . import ch01``: the module itself
                    add(f"{source}.{alias.name}", [])
                else:
                    add(source, [alias.name])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.JoinedStr)):
            first = node.args[0].values[0] if node.args[0].values else None
            value = first.value if isinstance(first, ast.FormattedValue) else None
            package = (module if getattr(value, "id", None) == "__name__"  # f"{__name__}.…": its own modules
                       else value.value.id if isinstance(value, ast.Attribute) and value.attr == "__name__"
                       and isinstance(value.value, ast.Name) else None)  # f"{claims.__name__}.…": claims' modules
            for child in MODULES:
                if package and child.rpartition(".")[0] == package:
                    add(child, [])
    return found


def cycle_through(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop of ``graph`` as the modules along it, back to the first, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_loop_and_the_import_reader_reads_a_package_importing_its_modules():
    assert cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert cycle_through({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    assert {"claims.ch04", "claims.ch12"} <= set(imported("margins"))  # all_claims: importlib.import_module(f"…")
    assert "attn_helpers.checks._failure" in imported("attn_helpers.checks._answer")
    assert imported("grading.notebook")["grading.assemble"]  # from .assemble import …


@pytest.mark.parametrize("tree", sorted(TREES))
def test_no_import_loop(tree):
    mine = module_files(tree)
    loop = cycle_through({m: {t for t in imported(m) if t in mine} for m in mine})
    assert loop is None, (f"the modules of {tree}/ import each other in a loop, {' -> '.join(loop)}: move what "
                          f"they share into a module that neither imports, or have one of them not import the other")


def test_no_module_of_the_checks_takes_a_private_name_from_another():
    """Within attn_helpers.checks: a name of another module, not a private module of the package itself
    (``from . import _ch12_recurrent`` imports the package's own module; the private names attn_helpers.glove takes
    from its ``_files`` are left for another change)."""
    checks = [m for m in MODULES if m.startswith("attn_helpers.checks")]
    taken = [f"{module} takes {name} from {source}" for module in checks
             for source, names in imported(module).items() for name in names
             if name.startswith("_") and not name.startswith("__")]
    assert not taken, ("; ".join(taken) + ": make the name public in the module that owns it (no underscore, in "
                       "its __all__ if that module is public), or move it to the module that uses it")
