"""Sphinx extension for the book's API page: exactly the public surface of ``attn_helpers``, found at build time.

``api.md`` holds the marker line ``% attn-helpers-api``. When Sphinx reads that page, the marker is
replaced by a table of the top-level names (``attn_helpers.__all__``, each with the chapter that
introduces it), then a section with an ``automodule`` for every public module of the package; autodoc
lists a module's ``__all__``, so internals stay off the page, and a module that a new chapter adds
appears without anyone editing the page. The docstrings are the single source of the reference text.
References to the top-level names, such as ``attn_helpers.GloVe``, resolve to the module that defines them.

Docstrings name exercises by their labels, as instructors and the grader do ("Exercise ex-ch03-cat");
on the page each label becomes a numbered link, "Exercise 3.1", as the chapters print it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from sphinx.application import Sphinx

PACKAGE = "attn_helpers"
MARKER = re.compile(r"^% attn-helpers-api\b.*$", re.MULTILINE)  # the whole comment line
CHAPTER = re.compile(r"\((chapters? [^)]*?)\)")  # "(chapter 3)", "(chapter 1; mask in chapter 7)"
# An exercise label such as ex-ch03-cat, with the word "Exercise" before it if there is one (numref prints
# its own "Exercise"); not inside ``code`` or another role's target.
EXERCISE_LABEL = re.compile(r"(?:\b[Ee]xercises? )?(?<![\w`<-])(ex-ch\d\d-[a-z0-9]+(?:-[a-z0-9]+)*)(?![\w`>-])")


def public_modules(package: str = PACKAGE) -> list[str]:
    """Dotted names of the package's modules and subpackages, without ``_private`` ones, in name order."""
    root = importlib.import_module(package)
    names = [
        info.name
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    return sorted(names)


def top_level_section(package: str = PACKAGE) -> str:
    """MyST Markdown for the names ``import attn_helpers as ah`` gives: name, chapter, first docstring line."""
    root = importlib.import_module(package)
    rows = []
    for name in root.__all__:
        obj = getattr(root, name)
        summary = (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ")
        found = CHAPTER.search(summary)
        if found is None:
            raise ValueError(f"{package}.{name}'s docstring names no chapter: add '(chapter N)' to its first "
                             f"paragraph.")
        summary = CHAPTER.sub("", summary).replace(" .", ".").replace("|", "\\|").strip()
        chapter = found.group(1).replace("chapters ", "").replace("chapter ", "")
        rows.append(f"| {{py:obj}}`ah.{name} <{obj.__module__}.{obj.__qualname__}>` | {chapter} | {summary} |")
    return (
        "## Top level: `import attn_helpers as ah`\n\n| Name | Chapter | What it does |\n|---|---|---|\n"
        + "\n".join(rows) + "\n"
    )


def module_section(name: str) -> str:
    """MyST Markdown for one module: a heading with its name, then autodoc of its docstring and members."""
    # autodoc writes reStructuredText, so it runs inside eval-rst
    return f"## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n   :show-inheritance:\n```\n"


def insert_modules(app: Sphinx, docname: str, source: list[str]) -> None:
    """On reading the page that holds the marker, replace it by one section per module."""
    if not MARKER.search(source[0]):
        return
    names = public_modules()
    for name in names:  # rebuild the page when a module's source changes
        path = getattr(importlib.import_module(name), "__file__", None)
        if path:
            app.env.note_dependency(path)
    sections = top_level_section() + "\n" + "\n".join(module_section(n) for n in names)
    source[0] = MARKER.sub(lambda _: sections, source[0], count=1)


def number_exercise_labels(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """In a docstring of the package, replace each exercise label by a numbered reference to that exercise."""
    if not name.startswith(PACKAGE):
        return
    for i, line in enumerate(lines):
        lines[i] = EXERCISE_LABEL.sub(lambda m: f":numref:`{m.group(1)}`", line)


def resolve_reexport(app: Sphinx, env, node, contnode):
    """Resolve ``attn_helpers.X`` (a name the package re-exports) to where X is defined and documented.

    Docstrings and chapters may write :class:`attn_helpers.SelfAttentionHead`, as readers import it;
    the API page documents it as ``attn_helpers.modules.SelfAttentionHead``.
    """
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith(PACKAGE + "."):
        return None
    name, _, rest = target[len(PACKAGE) + 1 :].partition(".")
    obj = getattr(importlib.import_module(PACKAGE), name, None)
    if obj is None or not hasattr(obj, "__qualname__") or not hasattr(obj, "__module__"):
        return None
    real = f"{obj.__module__}.{obj.__qualname__}" + (f".{rest}" if rest else "")
    if real == target:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], real, node, contnode)


def setup(app: Sphinx) -> dict:
    app.connect("source-read", insert_modules)
    app.connect("missing-reference", resolve_reexport)
    app.connect("autodoc-process-docstring", number_exercise_labels)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
