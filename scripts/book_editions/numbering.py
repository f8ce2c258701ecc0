"""The numbers the website gives a chapter's figures, equations and exercises, worked out as Jupyter Book does
with ``numfig_secnum_depth: 1`` (CONTRIBUTING.md, "Adding an edition", says why the editions do not take them
from Sphinx's own build):

- the chapter number N: the file's place among the chapters of ``_toc.yml`` (scripts/book_toc.py);
- figures (code cells with ``mystnb.figure.name``), labelled equations (``$$ ... $$ (label)`` or ``{math}``
  with ``:label:``) and exercises (``{exercise}``), each kind numbered N.k in order of appearance: ``numbered``;
- labelled sections, ``(label)=`` over a heading, by their title.

``exercise_number`` is the one answer to "what is this exercise's number": the editions' headings, solutions,
stubs and metadata (book_editions/chapter.py, ``Chapter.number``) and nbgrader's source take it from there, and
the grader reads it back from a heading (book_editions/exercise_cells.py, ``heading_number``) or counts it with
``numbered``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import nbformat
from book_toc import ROOT, chapters

from .myst_syntax import FENCE_RE, HEADING_RE, MATH_LABEL_RE, TARGET_RE, MystError, options

KINDS = ("figure", "equation", "exercise")  # what is numbered N.k, each kind counted on its own


@dataclass
class Target:
    kind: str      # figure | equation | exercise | section
    number: str    # "1.2" ("" for a section)
    title: str = ""


def numbered(chapter: int, k: int) -> str:
    """The number of chapter ``chapter``'s ``k``-th figure, equation or exercise: "1.2"."""
    return f"{chapter}.{k}"


def number_targets(nb: nbformat.NotebookNode, chapter: int, name: str) -> dict[str, Target]:
    """The chapter's figures, labelled equations and exercises, each numbered N.k in order of appearance, and
    its labelled sections. An exercise without a label is counted (the website numbers it) under the key
    ``(exercise k)``, which no reference can name."""
    targets: dict[str, Target] = {}
    counts = dict.fromkeys(KINDS, 0)

    def number(kind: str, label: str, title: str = "") -> None:
        counts[kind] += 1
        if label in targets:
            raise MystError(f"{name}: the label {label!r} is defined twice")
        targets[label] = Target(kind, numbered(chapter, counts[kind]), title)

    for cell in nb.cells:
        if cell.cell_type == "code":
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if figure.get("name"):
                number("figure", figure["name"], figure.get("caption", ""))
            continue
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if m := MATH_LABEL_RE.match(line):
                number("equation", m.group("label"))
            elif (m := FENCE_RE.match(line)) and m.group("name") in ("exercise", "math", "figure"):
                opts, _ = options(lines[i + 1:])
                label = opts.get("label") or opts.get("name")
                if m.group("name") == "exercise":
                    number("exercise", label or f"(exercise {counts['exercise'] + 1})", m.group("arg").strip())
                elif label:
                    number("equation" if m.group("name") == "math" else "figure", label)
            elif (m := TARGET_RE.match(line)) and i + 1 < len(lines) and (h := HEADING_RE.match(lines[i + 1])):
                targets[m.group("label")] = Target("section", "", h.group("text"))
    return targets


def exercise_number(targets: dict[str, Target], label: str | None, name: str) -> str:
    """The number, "1.2", of the exercise labelled ``label`` among chapter ``name``'s ``targets``."""
    if label is None:
        raise MystError(f"{name}: an {{exercise}} has no :label:; give it one (ex-chNN-name): the editions, "
                        "the grader and nbgrader know an exercise by its label")
    target = targets.get(label)
    if target is None or target.kind != "exercise":
        raise MystError(f"{name}: no {{exercise}} of the chapter has the label {label!r}")
    return target.number


@functools.cache
def book_targets(root: str) -> dict[str, Target]:
    """The targets of every chapter listed in ``root/_toc.yml`` (read once per run)."""
    targets: dict[str, Target] = {}
    for n, path in enumerate(chapters(Path(root)), start=1):
        if path.is_file():
            targets.update(number_targets(nbformat.read(path, as_version=4), n, path.name))
    return targets


def chapter_number(path: Path, root: Path = ROOT) -> int:
    """The chapter's number on the website: its place among the ``chapters/`` files of ``_toc.yml``."""
    stems = [p.stem for p in chapters(root)]
    if Path(path).stem not in stems:
        raise MystError(f"{Path(path).name} is not a chapter listed in {root / '_toc.yml'}, which gives each chapter "
                        "its number: add it there, or keep the file name of the chapter it varies (in a folder of "
                        "its own)")
    return stems.index(Path(path).stem) + 1


__all__ = ["KINDS", "Target", "book_targets", "chapter_number", "exercise_number", "number_targets", "numbered"]
