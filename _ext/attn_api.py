"""Sphinx extension for the book's API page: exactly the public surface of ``attn_helpers``, found at build time.

``api.md`` holds the marker line ``% attn-helpers-api``. When Sphinx reads that page, the marker is
replaced by three parts, all generated from the package:

- **Chapter by chapter**: for each chapter, what it introduces (the public names whose docstring names it
  first) and what else it uses (the names of earlier chapters that its code reads, ``ah.attention(...)``, or
  whose docstring names it again), module by module, each linked to its reference entry; then the names used
  by every chapter. A chapter whose code reads a name before the chapter its docstring names first stops the
  build with both. That is every name in
  ``__all__`` of every public module, not only the top level. The chapters come from the "(chapter N)" of the
  first paragraph of each docstring (for a constant, its ``#:`` comment, or without one its module's
  docstring): "(chapter 1; mask in chapter 7)" lists a name under both, "(chapters 6-7)" under each, and an
  exercise label (``ex-ch03-cat``) names its chapter. The rule for "Used by every chapter": a module whose
  docstring says "(every chapter)" or "(chapter N onwards)" has all its names there and only there (``checks``,
  ``plotting``, ``tables``, ``validate``); a name whose own reference says so is listed there as well as under
  the chapter it names ("(chapter 4 onwards)": ``training.fit``). A public name that names no chapter stops
  the build with its name, as does a chapter the book does not have.
- **Top level**: the names ``import attn_helpers as ah`` gives (``attn_helpers.__all__``), with the chapter
  that introduces each.
- **Module by module**: an ``automodule`` for every public module. autodoc documents a module's ``__all__``,
  so internals stay off the page, each name is documented once, and a module that a new chapter adds appears
  without anyone editing the page. The docstrings are the single source of the reference text.

References to the top-level names, such as ``attn_helpers.GloVe``, resolve to the module that defines them.
Docstrings name exercises by their labels, as instructors and the grader do ("Exercise ex-ch03-cat");
on the page each label becomes a numbered link, "Exercise 3.1", as the chapters print it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import book_toc  # scripts/, on the path as a local extension of _config.yml (and in the tests, pyproject.toml)
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

PACKAGE = "attn_helpers"
MARKER = re.compile(r"^% attn-helpers-api\b.*$", re.MULTILINE)  # the whole comment line
CHAPTER = re.compile(r"\((chapters? [^)]*?)\)")  # "(chapter 3)", "(chapter 1; mask in chapter 7)"
# Which chapters a docstring's first paragraph names: "(chapter 3)", "(chapters 6-7)", "(chapters 1, 2 and 7)",
# "(chapter 1; mask in chapter 7)", "(chapter 1 onwards)", "(every chapter)", or an exercise label, ex-ch03-cat.
REFERENCE = re.compile(r"\(([^()]*\b(?:chapters?|every chapter)\b[^()]*)\)")
NUMBERS = re.compile(r"\bchapters? (\d+(?:\s*(?:,|and|-|–)\s*\d+)*)")
EXERCISE_CHAPTER = re.compile(r"\bex-ch(\d\d)-")
# The rule for "Used by every chapter": a reference that says so, or "chapter N onwards".
EVERY_CHAPTER = re.compile(r"\bevery chapter\b|\bonwards\b")
EVERY = "every"  # the group's key among the chapter numbers
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


def chapters_named(docstring: str) -> set[int | str]:
    """The chapters the first paragraph of a docstring names, with ``EVERY`` if it serves every chapter."""
    first = docstring.split("\n\n")[0].replace("\n", " ")
    found: set[int | str] = {int(n) for n in EXERCISE_CHAPTER.findall(first)}
    for reference in REFERENCE.findall(first):
        if EVERY_CHAPTER.search(reference):
            found.add(EVERY)
        for numbers in NUMBERS.findall(reference):  # "1, 2 and 7", "6-7"
            for part in re.split(r"\s*,\s*|\s+and\s+", numbers):
                ends = [int(n) for n in re.split(r"\s*[-–]\s*", part)]
                found |= set(range(ends[0], ends[-1] + 1))
    return found


def is_code(obj: object) -> bool:
    """A function or class, which has a docstring of its own; anything else is a constant."""
    return inspect.isclass(obj) or inspect.isroutine(obj)


def docstring(module: str, name: str) -> str:
    """What autodoc shows for ``module.name``: a function's or class's docstring, a constant's ``#:`` comment."""
    obj = getattr(importlib.import_module(module), name)
    if is_code(obj):
        return inspect.getdoc(obj) or ""
    return "\n".join(ModuleAnalyzer.for_module(module).find_attr_docs().get(("", name), []))


def bare_constants(module: str) -> list[str]:
    """The names in the module's ``__all__`` that are constants without a ``#:`` comment (autodoc would skip them)."""
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", [])
    return [name for name in names if not is_code(getattr(mod, name)) and not docstring(module, name)]


def chapter_index(package: str = PACKAGE) -> dict[int | str, dict[str, list[str]]]:
    """``{chapter: {module: names}}`` for every name in the ``__all__`` of every public module, in module order;
    the names used by every chapter under ``EVERY``. Raises ValueError for a name that names no chapter."""
    index: dict[int | str, dict[str, list[str]]] = {}
    for module in public_modules(package):
        mod = importlib.import_module(module)
        of_module = chapters_named(inspect.getdoc(mod) or "")
        bare = bare_constants(module)
        for name in getattr(mod, "__all__", []):
            if EVERY in of_module:  # a module that serves every chapter: its names are listed there only
                chapters = {EVERY}
            elif name in bare:  # a constant with no comment of its own: its module's chapters
                chapters = of_module
            else:
                chapters = chapters_named(docstring(module, name))
            if not chapters:
                raise ValueError(
                    f"{module}.{name}'s docstring names no chapter: add '(chapter N)' to its first paragraph (for a "
                    "constant, to a '#:' comment above it, or to its module's docstring), or '(every chapter)' to its "
                    "module's docstring if every chapter uses the module."
                )
            for chapter in chapters:
                index.setdefault(chapter, {}).setdefault(module, []).append(name)
    return index


def chapter_titles(root: Path) -> dict[int, tuple[str, str]]:
    """``{N: (docname, title)}`` for the chapters of ``root/_toc.yml``, each title its notebook's first heading."""
    titles = {}
    for number, path in enumerate(book_toc.chapters(root), start=1):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        heading = next(line for cell in cells if cell["cell_type"] == "markdown"
                       for line in "".join(cell["source"]).splitlines() if line.startswith("# "))
        titles[number] = (f"chapters/{path.stem}", heading[2:].strip())
    return titles


def introduced_in(index: dict[int | str, dict[str, list[str]]]) -> dict[tuple[str, str], int | str]:
    """``{(module, name): chapter}``: the first chapter whose list has the name (``EVERY`` for one used by every
    chapter and no chapter of its own); a later chapter that names it uses it again."""
    first: dict[tuple[str, str], int | str] = {}
    for chapter in sorted((c for c in index if c != EVERY), key=int):
        for module, names in index[chapter].items():
            for name in names:
                first.setdefault((module, name), chapter)
    return first


def code_uses(path: Path, package: str = PACKAGE) -> set[tuple[str, str]]:
    """``{(module, name)}``: the public names a chapter notebook's code reads, ``ah.attention(...)``,
    ``ah.cost.time_call``, each under the public module whose ``__all__`` has it."""
    from IPython.core.inputtransformer2 import TransformerManager

    root = importlib.import_module(package)
    modules = {m: importlib.import_module(m) for m in public_modules(package)}
    exported = {}  # a top-level name -> the public module that defines it
    for module, mod in modules.items():
        for name in getattr(mod, "__all__", []):
            if name in root.__all__ and getattr(mod, name) is getattr(root, name):
                exported.setdefault(name, module)
    to_python = TransformerManager().transform_cell  # IPython's magics as the Python they run
    used = set()
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(to_python("".join(cell["source"])))
        aliases = {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for a in node.names if a.name.split(".")[0] == package} or {"ah": package}
        for node in ast.walk(tree):
            chain = []
            while isinstance(node, ast.Attribute):
                chain.insert(0, node.attr)
                node = node.value
            if not (isinstance(node, ast.Name) and node.id in aliases and chain):
                continue
            dotted = aliases[node.id].split(".") + chain
            for cut in range(len(dotted) - 1, 0, -1):  # the longest public module, then a name in its __all__
                module, name = ".".join(dotted[:cut]), dotted[cut]
                if module == package and name in exported:
                    used.add((exported[name], name))
                    break
                if module in modules and name in getattr(modules[module], "__all__", []):
                    used.add((module, name))
                    break
    return used


def names_line(module: str, names: list[str]) -> str:
    """One bullet: the module, then each name linked to its entry in the reference below."""
    links = ", ".join(f"{{py:obj}}`{name} <{module}.{name}>`" for name in names)
    return f"- `{module[len(PACKAGE) + 1:]}`: {links}"


def chapter_section(titles: dict[int, tuple[str, str]], package: str = PACKAGE,
                    uses: dict[int, set[tuple[str, str]]] | None = None) -> str:
    """MyST Markdown: for each chapter, the names it introduces and the others it uses (``uses``, by chapter: the
    names its code reads, :func:`code_uses`), module by module, its self-checks last; then the shared ones.
    Raises ValueError for a name a chapter's code reads before the chapter its docstring names first."""
    index = chapter_index(package)
    unknown = sorted(set(index) - set(titles) - {EVERY})
    if unknown:
        where = {f"{m}.{n}" for c in unknown for m, names in index[c].items() for n in names}
        raise ValueError(f"docstrings name chapters the book does not have, {unknown}: {sorted(where)}")
    first = introduced_in(index)
    shared = {(m, n) for m, names in index.get(EVERY, {}).items() for n in names}
    public = [(m, n) for m in public_modules(package) for n in importlib.import_module(m).__all__]
    parts = ["## Chapter by chapter\n"]
    for number, (docname, title) in sorted(titles.items()):
        modules = index.get(number, {})
        if not modules:
            raise ValueError(f"no docstring of {package} names chapter {number}: add '(chapter {number})' to them.")
        code = (uses or {}).get(number, set()) - shared
        ahead = sorted(f"{m}.{n} (chapter {first[m, n]})" for m, n in code if first[m, n] != EVERY
                       and first[m, n] > number)
        if ahead:
            raise ValueError(f"chapter {number}'s code uses {', '.join(ahead)} before the chapter its docstring names "
                             f"first: add chapter {number} to the docstring's '(chapter N)'.")
        named = {(m, n) for m, names in modules.items() for n in names}
        new, used = {}, {}
        for module, name in public:
            if (module, name) in named or (module, name) in code:
                (new if first[module, name] == number else used).setdefault(module, []).append(name)
        order = lambda m: (".checks." in m[0], m[0])  # noqa: E731  (its exercises' self-checks last)
        section = f"### Chapter {number}: {title}\n\nWhat {{doc}}`the chapter <{docname}>` introduces, module by module"
        section += (", its exercises' self-checks last:\n\n" + "\n".join(names_line(m, n) for m, n in sorted(
            new.items(), key=order)) + "\n") if new else ": nothing new; it builds on earlier chapters' code.\n"
        if used:
            section += ("\nWhat else it uses, introduced in an earlier chapter:\n\n"
                        + "\n".join(names_line(m, n) for m, n in sorted(used.items(), key=order)) + "\n")
        parts.append(section)
    rows = [names_line(m, names) for m, names in sorted(index.get(EVERY, {}).items())]
    parts.append("### Used by every chapter\n\nThe modules whose docstring says they serve every chapter, and the "
                 "names whose own docstring says so (\"chapter 4 onwards\"):\n\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


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
    # a constant without a #: comment has no docstring, so :members: skips it: autodata documents it
    constants = "".join(f"\n.. autodata:: {name}.{constant}\n" for constant in bare_constants(name))
    return (f"### `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n   :show-inheritance:\n"
            f"{constants}```\n")


def insert_modules(app: Sphinx, docname: str, source: list[str]) -> None:
    """On reading the page that holds the marker, replace it by the chapter index, the top level and the modules."""
    if not MARKER.search(source[0]):
        return
    names = public_modules()
    for name in names:  # rebuild the page when a module's source changes
        path = getattr(importlib.import_module(name), "__file__", None)
        if path:
            app.env.note_dependency(path)
    titles = chapter_titles(Path(app.srcdir))
    uses = {n: code_uses(Path(app.srcdir) / f"{docname}.ipynb") for n, (docname, _) in titles.items()}
    for docname, _ in titles.values():  # rebuild the page when a chapter's code changes
        app.env.note_dependency(str(Path(app.srcdir) / f"{docname}.ipynb"))
    sections = "\n".join([
        chapter_section(titles, uses=uses),
        top_level_section(),
        "## Module by module\n",
        *(module_section(n) for n in names),
    ])
    source[0] = MARKER.sub(lambda _: sections, source[0], count=1)


def number_exercise_labels(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """In a docstring of the package, replace each exercise label by a numbered reference to that exercise."""
    if not name.startswith(PACKAGE):
        return
    for i, line in enumerate(lines):
        lines[i] = EXERCISE_LABEL.sub(lambda m: f":numref:`{m.group(1)}`", line)


def drop_type_docstring(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """A constant without a ``#:`` comment has no docstring, but autodoc would show its type's (``str``, ``dict``).

    A constant with one keeps it: every instance of ``str`` or ``tuple`` has its type's ``__doc__``, so that test
    cannot tell the two apart; the module's ``#:`` comments can.
    """
    if what == "data" and name.startswith(PACKAGE):
        module, _, constant = name.rpartition(".")
        if not docstring(module, constant):
            lines.clear()


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
    app.connect("autodoc-process-docstring", drop_type_docstring)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
