"""No hint of any check quotes its exercise's solution (issues 40 and 47).

A hint names the mistake and the idea, never the line: for every exercise of every chapter, the texts of its
check (every string the check function holds, and the helpers and constants of its module that it reaches,
docstrings aside) must not hold a line of the solution (the chapter's code cells tagged ``solution``), nor any
expression or statement of it of more than a few tokens (:data:`FEW`), unless the exercise's own text gives it
(a constructor the exercise prescribes, say). Spaces are ignored in the comparison, so a hint cannot dodge it by
spacing an expression differently. Nor may a text share a run of twelve characters (:data:`RUN`) with the
solution's code, comments and strings aside, unless the run is a name (``in_proj_weight``): a call, an argument
or an index is the solution's code even where the exercise's text gives it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest
from book_chapters import CHAPTERS
from book_editions.exercise_cells import find_exercises
from IPython.core.inputtransformer2 import TransformerManager

FEW = 6  # more tokens than this is the solution's code, not an idiom (`x.size(0)` has six, `x.shape[-1]` seven)
CHECK_CALL = re.compile(r"\bcheck\.(\w+)\(")
_to_python = TransformerManager().transform_cell
_SKIP = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT}


def tokens(code: str) -> int:
    try:
        return sum(t.type not in _SKIP for t in tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return 0


def squashed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def quotable(solution: str) -> set[str]:
    """The lines of ``solution`` (comments aside), and its expressions and simple statements, of more than FEW
    tokens."""
    found = {code for line in solution.splitlines() if tokens(code := line.split("#")[0].strip()) > FEW}
    for node in ast.walk(ast.parse(_to_python(solution))):
        if isinstance(node, ast.expr) or (isinstance(node, ast.stmt) and not hasattr(node, "body")):
            if tokens(text := ast.unparse(node)) > FEW:
                found.add(text)
    return found


def _texts(node: ast.AST) -> list[str]:
    """The string constants under ``node``, docstrings aside (f-strings give their constant parts)."""
    docs = {id(n.body[0].value) for n in ast.walk(node)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def check_texts(module: Path, function: str) -> list[str]:
    """Every text the check ``function`` of ``module`` may show: its own strings, and those of the functions,
    classes and constants of the module it reaches."""
    top: dict[str, ast.AST] = {}
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                top.update({n.id: node for n in ast.walk(target) if isinstance(n, ast.Name)})
    seen: set[str] = set()
    todo, texts = [function], []
    while todo:
        name = todo.pop()
        if name in seen or name not in top:
            continue
        seen.add(name)
        texts += _texts(top[name])
        todo += [n.id for n in ast.walk(top[name]) if isinstance(n, ast.Name)]
    return texts


def check_module(chapter: Path, function: str) -> Path:
    """The file that defines ``check.<function>`` for ``chapter``: ``checks/chNN.py``, or the private module it
    re-exports the check from (``_ch12_sampling.py``)."""
    checks = importlib.import_module(f"attn_helpers.checks.ch{chapter.name[:2]}")
    return Path(inspect.getsourcefile(getattr(checks, function)))


def quoted(solution: str, texts: list[str], exercise_text: str) -> list[str]:
    """The fragments of ``solution`` that ``texts`` hold, but for those the exercise's text gives."""
    said, given = " ".join(map(squashed, texts)), squashed(exercise_text)
    return sorted(f for f in quotable(solution) if squashed(f) in said and squashed(f) not in given)


def exercises():
    for path in CHAPTERS:
        nb = nbformat.read(path, as_version=4)
        for ex in find_exercises(nb):
            yield pytest.param(path, nb, ex, id=ex.label)


@pytest.mark.parametrize("path, nb, ex", list(exercises()))
def test_no_hint_quotes_its_exercises_solution(path, nb, ex):
    solution = "\n".join(nb.cells[i].source for i in ex.solution_cells)
    functions = CHECK_CALL.findall(nb.cells[ex.check_cell].source)
    assert functions, f"{ex.label}: no check function found"
    texts = [text for function in functions for text in check_texts(check_module(path, function), function)]
    assert texts, f"{ex.label}: the check {functions} shows no text at all"
    assert not (found := quoted(solution, texts, ex.text)), (
        f"{ex.label}: the hints of check.{functions[0]} quote its solution: {found}; name the mistake and the idea")


def test_the_test_finds_a_quoted_expression_and_spares_idioms_and_the_exercises_own_words():
    solution = "def f(x):\n    m = x.amax(dim=-1, keepdim=True)  # the row's largest\n    return (x - m).exp()\n"
    assert quoted(solution, ["Hint: subtract x.amax(dim=-1,  keepdim=True) first."], "") == [
        "x.amax(dim=-1, keepdim=True)"]
    assert quoted(solution, ["Hint: subtract each row's largest score before exponentiating."], "") == []
    assert quoted(solution, ["Hint: subtract x.amax(dim=-1, keepdim=True)."],
                  "use `x.amax(dim=-1, keepdim=True)`") == []
    assert quoted("y = x.size(0) + 1", ["take the size from x.size(0)"], "") == []  # an idiom of six tokens
    assert tokens("x.size(0)") == FEW < tokens("x.shape[-1]") == 7
    assert quoted("n = q @ k.T / d ** 0.5", ["Hint: n = q @ k.T / d ** 0.5"], "") != []


RUN = 12  # characters: a hint that shares this many in a row with its solution's code quotes it (issue 47)


def solution_code(solution: str) -> str:
    """``solution``'s code without its comments, strings (a printed label, an example sentence) and whitespace."""
    try:
        kept = [t.string for t in tokenize.generate_tokens(io.StringIO(_to_python(solution)).readline)
                if t.type not in (tokenize.COMMENT, tokenize.STRING)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        kept = [solution]
    return squashed("".join(kept))


def read_names(source: str) -> list[str]:
    """The names a check cell reads: ``check`` and the learner's answers."""
    return [n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


NAME = re.compile(r"[\w.]+")  # a name (a function, an attribute, a variable), dotted or not: not code


def shared_runs(solution: str, texts: list[str], answers: list[str] = ()) -> list[str]:
    """The longest runs of ``RUN`` characters or more (whitespace aside) that a text shares with ``solution``'s
    code, but for names and for calls of the learner's ``answers`` (``look_back(weights)``: a message names the
    function it ran): a run that holds a call, an operator, an argument or an index is code, even one the
    exercise's text gives (the hint should then say it in words)."""
    code = solution_code(solution)
    calls = re.compile(rf"\b(?:{'|'.join(map(re.escape, answers))})\([^()]*\)?") if answers else None
    found = set()
    for text in (squashed(calls.sub(" ", t) if calls else t) for t in texts):
        i = 0
        while i + RUN <= len(text):
            if text[i:i + RUN] in code:
                j = i + RUN
                while j < len(text) and text[i:j + 1] in code:
                    j += 1
                if not NAME.fullmatch(text[i:j]):
                    found.add(text[i:j])
                i = j
            else:
                i += 1
    return sorted(found)


@pytest.mark.parametrize("path, nb, ex", list(exercises()))
def test_no_hint_shares_twelve_characters_with_its_solution(path, nb, ex):
    solution = "\n".join(nb.cells[i].source for i in ex.solution_cells)
    functions = CHECK_CALL.findall(nb.cells[ex.check_cell].source)
    texts = [text for function in functions for text in check_texts(check_module(path, function), function)]
    answers = [name for name in read_names(nb.cells[ex.check_cell].source) if name != "check"]
    assert not (found := shared_runs(solution, texts, answers)), (
        f"{ex.label}: the texts of check.{functions[0]} share {RUN} characters or more with its solution: {found}; "
        "name the mistake and the idea, not the code")


def test_the_run_test_finds_twelve_characters_of_code_and_spares_names_and_words():
    solution = "y = x.transpose(1, 2).contiguous()  # a copy in the new order\nprint('in the new order:', y)\n"
    assert shared_runs(solution, ["Hint: call .transpose(1,2) first."]) == [".transpose(1,2)"]
    assert shared_runs(solution, ["Hint: swap dimensions 1 and 2, then copy."]) == []
    assert shared_runs(solution, ["a copy in the new order"]) == []  # the solution's comment is no code
    assert shared_runs(solution, ["(in the new order: y)"]) == []  # nor its printed label
    assert shared_runs(solution, ["x.transpose("]) == ["x.transpose("] and len("x.transpose(") == RUN
    assert shared_runs(solution, ["x.transpose"]) == []
    assert shared_runs("out = mha.in_proj_weight", ["in_proj_weight has wrong values"]) == []  # a name
    assert shared_runs("m = model.layers[1]", ["layer 2 (model.layers[1])"]) == ["model.layers[1]"]
    assert shared_runs("y = look_back(weights)", ["look_back(weights) has shape (3,)"], ["look_back"]) == []
