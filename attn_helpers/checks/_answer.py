"""What a passed check prints: :func:`correct`, and in a learners' edition, :func:`no_answer_yet`.

A learners' edition (scripts/make_editions.py) keeps each exercise's solution, folded, above a "Your answer"
cell, so that Run All still runs the whole chapter. Until the learner writes there, the check below checks the
book's solution: the answer cell's one line of code, ``ah.checks.no_answer_yet("1.2")``, tells the check cell run
right after it (the next cell IPython runs) to say so, instead of a bare "✓ correct" under an empty answer.
A learner's code in place of that line (or under it), or any other cell run in between, and the check reports
as usual.
"""

from __future__ import annotations

_waiting: tuple[int, str] | None = None  # (the answer cell's execution count, its exercise's number)
_noted: int | None = None                # the execution count of the check cell that has said so already


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


def correct(name: str) -> None:
    """Print that ``name`` passed its check (and, right after an empty answer cell, that it is the book's)."""
    global _noted
    count = _execution_count()
    book = _waiting is not None and count is not None and count == _waiting[0] + 1
    if book and _noted != count:
        _noted = count
        print(waiting_note(_waiting[1]))
    print(correct_line(name, book))
