"""What a passed check prints: :func:`correct`, and in a learners' edition, :func:`no_answer_yet`.

A learners' edition (its steps: scripts/book_editions/learners.py) keeps each exercise's solution, folded,
above a "Your answer" cell (the AnswerCell step), so that Run All still runs the whole chapter. Until the
learner writes there, the check below checks the book's solution: the answer cell's one line of code,
``ah.checks.no_answer_yet("1.2")``, tells the check cell run right after it (the next cell IPython runs) to
say so, instead of a bare "✓ correct" under an empty answer.
A learner's code in place of that line (or under it), or any other cell run in between, and the check reports
as usual.

The folded solution defines the names the check reads, so an answer cell that defines another name (a typo, a
wrong function name, only a comment, ``pass``) would leave the book's answer in place, and the check would pass
it. Each solution code cell of an edition therefore begins with the line ``# The book's solution to Exercise
1.2 ...`` (``protocol.SOLUTION_LINE``); inside IPython, :func:`watch_answers` notes after every cell which names a
cell so marked bound, and which names any other cell bound since. :func:`correct` then fails, saying that the
answer cell does not define the name, when a name the check cell reads is still the one the folded solution
bound (the very same object, and no cell run since assigns it). The chapters themselves, the student editions
and code outside IPython have no such cells: nothing changes there.

Three more rules make a check judge what the learner's cells define now:

- **An answer in a cell of the learner's own.** A learner may write the answer in a cell inserted above the
  untouched answer cell: when a name the check reads is one the exercise's folded solution bound and a cell of
  the learner's has assigned it since, the check judges the learner's value, even right after the answer
  cell's :func:`no_answer_yet` line.
- **A stale answer.** Jupyter tells the kernel which cell it runs (the ``cellId`` of JupyterLab's, Notebook
  7's and VS Code's execute requests). When a cell that assigned a name the check reads runs again without
  assigning it (a misspelt name, only ``pass``), the value left is an earlier run's: the check says that the
  answer cell does not define the name (:class:`NotAnswered`), instead of judging that value.
- **A folded solution runs without output.** Running a chapter cell by cell (Shift+Enter) makes each folded
  solution cell the active cell in turn, and JupyterLab unfolds its heading and shows the output the run
  gives, whatever the cell's metadata says: a cell that begins with ``protocol.SOLUTION_LINE`` runs under
  IPython's ``%%capture``, so its code, which the edition keeps collapsed, shows no output there.
"""

from __future__ import annotations

import ast
import re
import sys

from ._failure import NotAnswered, listed
from .protocol import SOLUTION_RE, correct_line, waiting_note

_from_solution: dict[str, tuple[str, object]] = {}  # name -> (exercise number, the object the folded solution bound)
_solution_names: dict[str, set[str]] = {}  # exercise number -> every name its folded solution binds
_bound_by: dict[str, set[str]] = {}  # a cell's id (as Jupyter sends it) -> the names its last run bound
_binder: dict[str, str] = {}  # name -> the id of the cell that bound it last
_left_over: dict[str, str] = {}  # name -> the id of the cell that bound it, and ran again without binding it
_watching = False
_waiting: tuple[int, str] | None = None  # (the answer cell's execution count, its exercise's number)
# (the execution count of the check cell that has said so already, the stream it was said to): a check that
# silences its inner checks (contextlib.redirect_stdout) did not show the note, and the learner must see it
_noted: tuple[int, object] | None = None


def _execution_count() -> int | None:
    """The number IPython gives the cell running now (In [n]), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.execution_count


def _cell_holds_only_the_marker() -> bool:
    """True when the cell running now holds nothing but comments and the :func:`no_answer_yet` line (a learner
    who wrote code under that line, without deleting it, has answered all the same)."""
    from IPython import get_ipython

    history = get_ipython().history_manager.input_hist_raw  # the running cell's source is stored before it runs
    lines = [line.strip() for line in (history[-1] if history else "").splitlines()]
    return all(not line or line.startswith("#") or "no_answer_yet(" in line for line in lines)


def no_answer_yet(number: str) -> None:
    """Mark Exercise ``number``'s answer cell as still empty, for the check cell run next (see the module)."""
    global _waiting
    count = _execution_count()
    _waiting = (count, str(number)) if count is not None and _cell_holds_only_the_marker() else None


def _bound_names(tree: ast.Module) -> set[str] | None:
    """The global names a cell's code binds (assignments, ``def``, ``class``, imports, loop targets …), outside
    the bodies of the functions and classes it defines; None when that cannot be known (``import *``)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            todo += node.decorator_list
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global):
            names |= set(node.names)
        todo += ast.iter_child_nodes(node)
    return names


def _body(raw: str) -> str:
    """A solution cell's code without its first line, ``protocol.SOLUTION_LINE`` (see :func:`_quiet_solution`)."""
    return raw.lstrip().partition("\n")[2]


def _after_cell(result) -> None:
    """IPython's ``post_run_cell`` hook: note the names a folded solution bound, forget those another cell
    bound since, and which names a cell run again no longer binds (see the module)."""
    from IPython import get_ipython

    shell = get_ipython()
    info = getattr(result, "info", None)
    raw = getattr(info, "raw_cell", None)
    if shell is None or not isinstance(raw, str):
        return
    solution = SOLUTION_RE.match(raw.lstrip())
    try:
        names = _bound_names(ast.parse(shell.transform_cell(_body(raw) if solution else raw)))
    except (SyntaxError, ValueError):
        return
    if names is None:  # `from … import *` may have bound anything
        _from_solution.clear()
        _left_over.clear()
        return
    failed = (getattr(result, "error_before_exec", None) is not None
              or getattr(result, "error_in_exec", None) is not None)
    if solution:
        _solution_names.setdefault(solution["number"], set()).update(names)
    for name in names:
        if solution and name in shell.user_ns:
            _from_solution[name] = (solution["number"], shell.user_ns[name])
        elif name in _from_solution and not (failed and shell.user_ns.get(name) is _from_solution[name][1]):
            del _from_solution[name]  # (a cell that raised before its assignment leaves the book's answer in place)
    cell = getattr(info, "cell_id", None)
    if not cell:  # a front end that does not say which cell runs (a console, nbclient): nothing more to note
        return
    if not failed:
        for name in _bound_by.get(cell, set()) - names:
            if _binder.get(name) == cell:
                _left_over[name] = cell
        _bound_by[cell] = names
    for name in names:
        if name in shell.user_ns and not (failed and name in _left_over):
            _binder[name] = cell
            _left_over.pop(name, None)


def _quiet_solution(lines: list[str]) -> list[str]:
    """IPython's input transformer: a cell that begins with ``protocol.SOLUTION_LINE`` runs under ``%%capture`` (in
    place of that comment line), so that its output stays out of view (see the module)."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or not SOLUTION_RE.match(lines[first].lstrip()):
        return lines
    return ["%%capture\n", *lines[first + 1:]]


def watch_answers() -> None:
    """Inside IPython, start noting which names the folded solutions bind (once; see the module)."""
    global _watching
    if "IPython" not in sys.modules:  # not inside IPython (whose kernel has imported it): nothing to watch
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and not _watching:
        shell.events.register("post_run_cell", _after_cell)
        shell.input_transformers_cleanup.append(_quiet_solution)
        shell.ast_transformers.append(_JudgeFirst())
        _watching = True


def _read_by_the_check() -> list[str]:
    """The names the running check cell reads, in order."""
    from IPython import get_ipython

    shell = get_ipython()
    history = shell.history_manager.input_hist_raw if shell is not None else []
    try:
        tree = ast.parse(shell.transform_cell(history[-1])) if history else None
    except (SyntaxError, ValueError):
        return []
    return list(dict.fromkeys(node.id for node in ast.walk(tree or ast.Module(body=[], type_ignores=[]))
                              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)))


def _left_to_the_book(read: list[str]) -> list[str]:
    """The names in ``read`` that are still the ones a folded solution bound."""
    from IPython import get_ipython

    user_ns = get_ipython().user_ns
    return [name for name in read if name in _from_solution and name in user_ns
            and user_ns[name] is _from_solution[name][1]]


def not_defined_message(number: str, names: list[str]) -> str:
    """The failure of a check whose answer is still the folded solution's: which names the answer cell lacks."""
    said = listed(names)
    return (f"Your answer cell does not define {said}: the check found the book's folded solution to Exercise "
            f"{number} there instead. Hint: in the cell under \"Your answer\", assign {said}, spelled as here "
            f"(another name, only a comment or `pass` leave the book's in place); run it, then this check.")


def left_over_message(names: list[str]) -> str:
    """The failure of a check whose answer is what an earlier run of a cell left, the cell no longer defining it."""
    said = listed(names)
    return (f"Your answer cell no longer defines {said}: the check found the value an earlier run of that cell "
            f"left. Hint: assign {said} in your answer cell, spelled as here (another name, only a comment or "
            f"`pass` define nothing); run it, then this check.")


def _book_solution_next() -> bool:
    """True when the running cell comes right after an untouched answer cell (:func:`no_answer_yet`)."""
    count = _execution_count()
    return _waiting is not None and count is not None and count == _waiting[0] + 1


def judge(read: list[str]) -> bool:
    """Before a check judges the names ``read``: raise :class:`NotAnswered` when one is still the folded
    solution's (unless the answer cell right above is untouched: then return True, the check judges the book's
    solution) or is what an earlier run of a cell that no longer assigns it left (see the module)."""
    book = _book_solution_next()
    if not (book or _from_solution or _left_over):
        return book
    stale = _left_to_the_book(read)
    if book:  # a name of the solution's that a cell of the learner's assigned since: the learner's answer
        book = not [n for n in read if n in _solution_names.get(_waiting[1], ()) and n not in stale]
    if not book and stale:
        raise NotAnswered(not_defined_message(_from_solution[stale[0]][0], stale))
    if not book and (left := [n for n in read if n in _left_over]):
        raise NotAnswered(left_over_message(left))
    return book


class _JudgeFirst(ast.NodeTransformer):
    """IPython's AST transformer: a check cell (every statement a call of a chapter's check, ``check.fn(...)``)
    first calls :func:`judge` on the names it reads, so that a check never judges an answer the answer cell does
    not define (see the module)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        from IPython import get_ipython

        user_ns = get_ipython().user_ns
        if not node.body or not all(isinstance(stmt, ast.Expr) and _calls_a_check(stmt.value, user_ns)
                                    for stmt in node.body):
            return node
        read = list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                  and isinstance(n.ctx, ast.Load)))
        call = ast.parse(f"__import__({__name__!r}, fromlist=['judge']).judge({read!r})").body[0]
        node.body.insert(0, ast.copy_location(call, node.body[0]))
        return ast.fix_missing_locations(node)


def _calls_a_check(value: ast.expr, user_ns: dict) -> bool:
    """True for a call ``check.fn(...)`` (or ``ah.checks.ch01.fn(...)``) of a chapter's checks module."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    chain, at = [], value.func.value
    while isinstance(at, ast.Attribute):
        chain.append(at.attr)
        at = at.value
    if not isinstance(at, ast.Name):
        return False
    obj = user_ns.get(at.id)
    for attr in reversed(chain):
        try:
            obj = getattr(obj, attr, None)
        except Exception:  # a property of the learner's that raises: not a checks module
            return False
    return re.fullmatch(r"attn_helpers\.checks\.ch\d+", getattr(obj, "__name__", "") or "") is not None


def correct(name: str) -> None:
    """Print that ``name`` passed its check (and, right after an empty answer cell, that it is the book's).

    In a learners' edition, a name the check cell reads that no cell of the learner's has defined (it is still
    the folded solution's), or that the cell which defined it no longer defines, fails the check instead
    (:class:`NotAnswered`, see the module)."""
    global _noted
    count = _execution_count()
    book = judge(_read_by_the_check()) if count is not None else False
    if book and not (_noted is not None and _noted[0] == count and _noted[1] is sys.stdout):
        _noted = (count, sys.stdout)
        print(waiting_note(_waiting[1]))
    print(correct_line(name, book))
