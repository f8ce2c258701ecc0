"""The chapters' Python listings: each is the package's own code or is marked a sketch, so none can drift (issue 41).

A listing in a chapter's prose is a fenced Python block, and the line just above it marks what it is:

    <!-- listing: attn_helpers/flash.py:flash_forward -->    the package's code: lines of that function, class
    ```python                                                 or method
    ...
    <!-- listing: sketch -->                                  not the package's code: a pitfall, PyTorch's signature,
    ```python                                                 another library's code, or a simplified version

An HTML comment shows nowhere: not on the website, not in the learners' editions in Jupyter (the fence itself
stays plain, so JupyterLab still highlights it).

A quoted listing must be a run of consecutive lines of what it names, indented as there relative to its first
line (so a line cannot move into or out of a loop). What may differ: the spaces inside a line (comments are
aligned in prose); docstrings and decorators, which a listing leaves out; a ``def`` line, which may list its
parameters' names only (they must be the same names); and a line ``...`` (with a comment, if any), which stands
for the lines it leaves out, so that a reader sees where something is missing.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import book_toc
import nbformat
import pytest

ROOT = Path(__file__).parent.parent
CHAPTERS = book_toc.chapters()
# A fence that opens a Python listing: ```python, ```py, ```{code-block} python, ~~~python …
OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?:\{code(?:-block)?\}[ \t]*)?(?:python3?|py)\b")
MARK = re.compile(r"^[ \t]*<!-- listing: (?P<mark>.*?) -->[ \t]*$")
QUOTE = re.compile(r"^attn_helpers/(?P<path>[\w/]+)\.py:(?P<qualname>[\w.]+)$")
ELIDED = re.compile(r"^\.\.\.(\s+#.*)?$")


def listings(path: Path) -> list[tuple[str, str, list[str]]]:
    """``(where, mark, lines)`` for every Python fence in the chapter's markdown cells."""
    found = []
    for number, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        i = 0
        while i < len(lines):
            if m := OPEN.match(lines[i]):
                close = re.compile(rf"^[ \t]*{re.escape(m.group('fence'))}[ \t]*$")
                end = next(j for j in range(i + 1, len(lines)) if close.match(lines[j]))
                mark = MARK.match(lines[i - 1]) if i else None
                found.append((f"{path.stem}, cell {number}", mark.group("mark") if mark else "", lines[i + 1:end]))
                i = end
            i += 1
    return found


LISTINGS = [listing for path in CHAPTERS for listing in listings(path)]


def def_line(line: str) -> str | None:
    """``def name(a, b):`` for a ``def`` line (its parameters' names only), or None for any other line."""
    try:
        node = ast.parse(line.strip() + "\n    pass").body[0]
    except SyntaxError:
        return None
    return short_def(node) if isinstance(node, ast.FunctionDef) else None


def short_def(node: ast.FunctionDef) -> str:
    a = node.args
    names = [*(x.arg for x in a.posonlyargs + a.args), *([f"*{a.vararg.arg}"] if a.vararg else []),
             *(x.arg for x in a.kwonlyargs), *([f"**{a.kwarg.arg}"] if a.kwarg else [])]
    return f"def {node.name}({', '.join(names)}):"


def package_lines(mark: str) -> list[tuple[int, str]]:
    """``(indent, text)`` of each line of what the mark names, without blank lines, docstrings and decorators,
    and with each ``def`` on one line, its parameters' names only."""
    m = QUOTE.match(mark)
    obj = importlib.import_module("attn_helpers." + m.group("path").replace("/", ".").removesuffix(".__init__"))
    for part in m.group("qualname").split("."):
        obj = getattr(obj, part)
    source = textwrap.dedent(inspect.getsource(getattr(obj, "__func__", obj)))
    lines: list[str | None] = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):  # the docstring
            lines[body[0].lineno - 1:body[0].end_lineno] = [None] * (body[0].end_lineno - body[0].lineno + 1)
        for decorator in node.decorator_list:
            lines[decorator.lineno - 1:decorator.end_lineno] = [None] * (decorator.end_lineno - decorator.lineno + 1)
        if isinstance(node, ast.FunctionDef) and body[0].lineno > node.lineno:  # the header, as one short line
            end = body[0].lineno - 1  # the header's lines are lines[node.lineno - 1:end], perhaps with comments
            while end > node.lineno and not (lines[end - 1] or "").rstrip().endswith(":"):
                end -= 1
            short = " " * indent(lines[node.lineno - 1]) + short_def(node)
            lines[node.lineno - 1:end] = [short] + [None] * (end - node.lineno)
    return [(indent(line), normal(line)) for line in lines if line is not None and line.strip()]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def normal(line: str) -> str:
    """The line with runs of spaces made one (comments are aligned differently in prose) and a def shortened."""
    return def_line(line) or " ".join(line.split())


def drift(quoted: list[str], package: list[tuple[int, str]]) -> str | None:
    """Why the quoted lines are not consecutive lines of the package's (``...`` leaving out any run), or None."""
    runs, run = [], []
    for line in quoted:
        if ELIDED.match(line.strip()):
            runs, run = runs + [run], []
        elif line.strip():
            run.append((indent(line), normal(line)))
    runs = [r for r in runs + [run] if r]
    texts = [text for _, text in package]
    start, shift = 0, None  # where the next run may begin in the package; package indent - listing indent
    for r in runs:
        at = next((k for k in range(start, len(texts) - len(r) + 1)
                   if texts[k:k + len(r)] == [text for _, text in r]), None)
        if at is None:
            missing = next((text for _, text in r if text not in texts[start:]), None)
            if missing is not None:
                return f"this line is not the package's: {missing!r}"
            return ("these lines are the package's, but not one after the other there (write ... where lines are "
                    f"left out): {[text for _, text in r]}")
        shift = package[at][0] - r[0][0] if shift is None else shift
        moved = [text for (i, text), (j, _) in zip(r, package[at:at + len(r)], strict=True) if j - i != shift]
        if moved:
            return f"indented otherwise than in the package: {moved[0]!r}"
        start = at + len(r)
    return None


def test_the_chapters_have_listings():
    assert len(LISTINGS) >= 17, [where for where, _, _ in LISTINGS]


@pytest.mark.parametrize("where, mark, lines", LISTINGS, ids=[f"{where}: {mark}" for where, mark, _ in LISTINGS])
def test_each_listing_is_the_package_code_or_a_sketch(where, mark, lines):
    assert mark == "sketch" or QUOTE.match(mark), (
        f"{where}: mark the listing on the line above it: <!-- listing: attn_helpers/<module>.py:<function or "
        f"Class.method> --> if it quotes the package, <!-- listing: sketch --> if it does not (found {mark!r})"
    )
    if mark != "sketch":
        problem = drift(lines, package_lines(mark))
        assert problem is None, f"{where}: the listing of {mark} has drifted from the package: {problem}"


def test_a_drifted_listing_fails():
    """The comparison catches a changed line, a line moved out of its loop and a line left out silently."""
    package = package_lines("attn_helpers/blocks.py:TransformerBlock.forward")
    first, second = (text for _, text in package[1:])
    assert drift([first, second], package) is None
    assert drift(["def forward(self, x, mask):", "    " + first, "    " + second], package) is None
    assert "not the package's" in drift([first.replace("ln1", "ln2"), second], package)
    assert "indented otherwise" in drift([first, "    " + second], package)
    assert "one after the other" in drift(["def forward(self, x, mask):", "    " + second], package)
    assert drift(["def forward(self, x, mask):", "    ...", "    " + second], package) is None


def test_chapter_12_shows_the_scale_correction_of_the_absorbed_path():
    """The line of absorption that is easy to miss (issue 41): the listing must not leave it out, even with ``...``."""
    (lines,) = [lines for where, mark, lines in LISTINGS if mark == "attn_helpers/latent.py:LatentAttention.forward"]
    assert any("* (scale * math.sqrt(d_c + d_r))" in line for line in lines)


def test_a_fence_without_its_mark_is_found(tmp_path):
    text = "Its core is\n\n```python\nx = 1\n```\n\n<!-- listing: sketch -->\n```py\ny\n```"
    cell = nbformat.v4.new_markdown_cell(text)
    path = tmp_path / "99_example.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    assert [(mark, lines) for _, mark, lines in listings(path)] == [("", ["x = 1"]), ("sketch", ["y"])]
