"""What a passed check prints: :func:`correct`, and in a learners' edition, :func:`no_answer_yet`.

A learners' edition (scripts/make_editions.py) keeps each exercise's solution, folded, above a "Your answer"
cell, so that Run All still runs the whole chapter. Until the learner writes there, the check below checks the
book's solution: the answer cell's one line of code, ``ah.checks.no_answer_yet("1.2")``, tells the check cell run
right after it (the next cell IPython runs) to say so, instead of a bare "✓ correct" under an empty answer.
A learner's code in place of that line (or under it), or any other cell run in between, and the check reports
as usual.

The folded solution defines the names the check reads, so an answer cell that defines another name (a typo, a
wrong function name, only a comment, ``pass``) would leave the book's answer in place, and the check would pass
it. Each solution code cell of an edition therefore begins with the line ``# The book's solution to Exercise
1.2 ...`` (:data:`SOLUTION_LINE`); inside IPython, :func:`watch_answers` notes after every cell which names a
cell so marked bound, and which names any other cell bound since. :func:`correct` then fails, saying that the
answer cell does not define the name, when a name the check cell reads is still the one the folded solution
bound (the very same object, and no cell run since assigns it). The chapters themselves, the student editions
and code outside IPython have no such cells: nothing changes there.
"""

from __future__ import annotations

import ast
import re
import sys

# The first line of every solution code cell of a learners' edition (scripts/make_editions.py writes it).
SOLUTION_LINE = "# The book's solution to Exercise {number} (folded): write yours under \"Your answer\" below."
SOLUTION_RE = re.compile(r"^# The book's solution to Exercise (?P<number>\d+\.\d+)\b")

_from_solution: dict[str, tuple[str, object]] = {}  # name -> (exercise number, the object the folded solution bound)
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


def waiting_note(number: str) -> str:
    """The two lines a check prints, once, when it checked the book's solution to Exercise ``number``."""
    return (f"Exercise {number} is not answered yet: this checked the book's folded solution.\n"
            f"Write your code in the cell above, in place of its three lines, run it, then run this check.")


def correct_line(name: str, book_solution: bool = False) -> str:
    """'✓ W: correct', or for the book's own solution '✓ W: correct (the book's solution)'."""
    return f"✓ {name}: correct" + (" (the book's solution)" if book_solution else "")


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


def _after_cell(result) -> None:
    """IPython's ``post_run_cell`` hook: note the names a folded solution bound, and forget those another cell
    bound since (see the module)."""
    from IPython import get_ipython

    shell = get_ipython()
    raw = getattr(getattr(result, "info", None), "raw_cell", None)
    if shell is None or not isinstance(raw, str):
        return
    try:
        names = _bound_names(ast.parse(shell.transform_cell(raw)))
    except (SyntaxError, ValueError):
        return
    if names is None:  # `from … import *` may have bound anything
        _from_solution.clear()
        return
    solution = SOLUTION_RE.match(raw.lstrip())
    failed = (getattr(result, "error_before_exec", None) is not None
              or getattr(result, "error_in_exec", None) is not None)
    for name in names:
        if solution and name in shell.user_ns:
            _from_solution[name] = (solution["number"], shell.user_ns[name])
        elif name in _from_solution and not (failed and shell.user_ns.get(name) is _from_solution[name][1]):
            del _from_solution[name]  # (a cell that raised before its assignment leaves the book's answer in place)


def watch_answers() -> None:
    """Inside IPython, start noting which names the folded solutions bind (once; see the module)."""
    global _watching
    if "IPython" not in sys.modules:  # not inside IPython (whose kernel has imported it): nothing to watch
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and not _watching:
        shell.events.register("post_run_cell", _after_cell)
        _watching = True


def _left_to_the_book() -> tuple[str, list[str]] | None:
    """(exercise number, names) when names the running check cell reads are still the ones the folded
    solution of that exercise bound, else None."""
    if not _from_solution:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    history = shell.history_manager.input_hist_raw if shell is not None else []
    try:
        tree = ast.parse(shell.transform_cell(history[-1])) if history else None
    except (SyntaxError, ValueError):
        return None
    read = dict.fromkeys(node.id for node in ast.walk(tree or ast.Module(body=[], type_ignores=[]))
                         if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load))
    stale = [name for name in read if name in _from_solution and name in shell.user_ns
             and shell.user_ns[name] is _from_solution[name][1]]
    return (_from_solution[stale[0]][0], stale) if stale else None


def not_defined_message(number: str, names: list[str]) -> str:
    """The failure of a check whose answer is still the folded solution's: which names the answer cell lacks."""
    said = " and ".join(names)
    return (f"Your answer cell does not define {said}: the check found the book's folded solution to Exercise "
            f"{number} there instead. Hint: in the cell under \"Your answer\", assign {said}, spelled as here "
            f"(another name, only a comment or `pass` leave the book's in place); run it, then this check.")


def correct(name: str) -> None:
    """Print that ``name`` passed its check (and, right after an empty answer cell, that it is the book's).

    In a learners' edition, a name the check cell reads that no cell of the learner's has defined (it is still
    the folded solution's) fails the check instead (see the module)."""
    global _noted
    count = _execution_count()
    book = _waiting is not None and count is not None and count == _waiting[0] + 1
    if not book and (stale := _left_to_the_book()):
        from ._failure import CheckFailed

        raise CheckFailed(not_defined_message(*stale))
    if book and not (_noted is not None and _noted[0] == count and _noted[1] is sys.stdout):
        _noted = (count, sys.stdout)
        print(waiting_note(_waiting[1]))
    print(correct_line(name, book))
