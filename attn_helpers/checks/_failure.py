"""How a check fails: :class:`CheckFailed`, shown in Jupyter as its message and hint only, and :func:`call`, the
one way a check calls a learner's function (see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import linecache
import numbers
import re
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ._reach import holds_tensor, reached_functions, read_from_outside


class CheckFailed(AssertionError):
    """A learner's answer is wrong; the message says how, with a hint (after "Hint: ").

    ``where`` is the line of the learner's own code that raised, when a learner's function raised inside a
    check (see :func:`call`); ``raised`` is that error, and the function's name and own code.
    """

    def __init__(self, message: str, where: str | None = None, raised: Raised | None = None) -> None:
        super().__init__(message)
        self.where, self.raised = where, raised

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error instead of a traceback (the check's code would give away the
        answer): the message, the learner's line that raised if any, and the hint, each on its own lines."""
        what, _, hint = str(self).partition(" Hint: ")
        lines = _wrapped(f"\x1b[1;31m{type(self).__name__}\x1b[0m: {what}")
        if self.where:  # "Cell In[4], line 3: W = X @ X", the code on a line of its own, as it is
            place, code = m.groups() if (m := re.match(r"(.*?, line \d+): (.*)", self.where)) else (self.where, "")
            lines += _wrapped(f"Your code raised it at {place}" + (":" if code else ""), indent="    ")
            lines += [f"        {code}"] if code else []
        if hint:
            lines += _wrapped(f"\x1b[1;32mHint\x1b[0m: {hint}")
        return lines


class NotAnswered(CheckFailed):
    """The check found no answer of the learner's to judge: the answer cell does not define a name the check
    reads (the value there is the folded solution's, or an earlier run's; see ``_answer.py``)."""


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the ANSI colour codes of IPython's tracebacks


def _wrapped(text: str, indent: str = "") -> list[str]:
    """``text`` as lines of at most about 100 characters (a traceback's lines do not wrap in every front end)."""
    colours = len(text) - len(_COLOUR.sub("", text))  # take no room on the screen
    return textwrap.wrap(text, 100 + colours, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False)


@dataclass
class Raised:
    """An error a learner's function raised inside a check: the function, the name it goes by, the error."""

    fn: Callable
    name: str
    error: BaseException

    def says(self, given: str, though: str = "") -> str:
        """'look_back raised IndexError on <given><though>. The error says: <its first line>' (a sentence of its
        own, since the inputs may end in a number that a colon would run into the error's text)."""
        lines = str(self.error).strip().splitlines()
        message = f". The error says: {lines[0].rstrip('.')}" if lines else ""
        return f"{self.name} raised {type(self.error).__name__} on {given}{though}{message}"


def listed(names: list[str]) -> str:
    """Names as a sentence lists them: 'W', 'W and Y', 'W, Y and S' (every chapter)."""
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def describe(*args: object, **kwargs: object) -> str:
    """A short description of a call's arguments for a message: a (5, 3) tensor, 'ship', h = 4 …"""

    def one(x: object) -> str:
        if isinstance(x, torch.Tensor):
            if x.dim() == 0 and x.device.type == "cpu" and not x.is_complex():
                return f"the number {x.item():.4g}"
            return f"a {tuple(x.shape)} tensor"
        if isinstance(x, nn.Module):
            return f"a {type(x).__name__}"
        if isinstance(x, (tuple, list)):
            return "(" + ", ".join(one(item) for item in x) + ")"
        if isinstance(x, (str, numbers.Number)):
            return repr(x)
        return f"a {type(x).__name__}"

    return ", ".join([*map(one, args), *(f"{k} = {one(v)}" for k, v in kwargs.items())])


def _learner_line(fn: Callable, error: BaseException) -> str | None:
    """Where in the learner's code ``error`` was raised (the deepest line of the notebook's functions that
    ``fn`` reaches), as IPython names a cell ("Cell In[4], line 3: W = X @ X.T"), or None."""
    files = {inner.__code__.co_filename for f in reached_functions(fn)
             if isinstance(getattr(inner := getattr(f, "__wrapped__", f), "__code__", None), types.CodeType)}
    tb, found = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    file, line = found.tb_frame.f_code.co_filename, found.tb_lineno
    name = f"{file}, line {line}"
    with contextlib.suppress(Exception):  # inside IPython: "Cell In[4]", as its own tracebacks say
        from IPython import get_ipython

        if (shell := get_ipython()) is not None and (cell := shell.compile.format_code_name(file)) is not None:
            name = f"{cell[0]} {cell[1]}, line {line}"
    source = linecache.getline(file, line, found.tb_frame.f_globals).strip()
    return f"{name}: {source}" if source else name


def call(fn: Callable, *args: object, name: str, given: str | None = None,
         hint: str | Callable[[BaseException], str | None] | None = None, **kwargs: object) -> object:
    """``fn(*args, **kwargs)``, the one way a check calls a learner's function ``name``: an error it raises
    becomes a :class:`CheckFailed` that says which input it was given (``given``, or :func:`describe` of the
    arguments), the error, and ``hint`` (a text, or a function of the error giving one or None), and
    that points at the learner's line that raised. Inside :func:`on_other_sizes` the message also names the
    likely cause: a size taken from the notebook or written in as a number.
    """
    try:
        return fn(*args, **kwargs)
    except Exception as error:
        raised = Raised(fn, name, error)
        text = hint(error) if callable(hint) else hint
        raise CheckFailed(f"{raised.says(given or describe(*args, **kwargs))}." + (f" Hint: {text}" if text else ""),
                          _learner_line(fn, error), raised) from error



_GENERIC_HINTS = ("recompute it step by step and compare with the chapter's cells.",
                  "check which dimensions you multiply, stack or transpose.")


@contextlib.contextmanager
def on_other_sizes(name: str, inputs: str, hint: str) -> Iterator[None]:
    """Around a check's run of the learner's function ``name`` on ``inputs`` of other sizes than the
    exercise's (the run after the one on the exercise's inputs).

    A :class:`CheckFailed` there is raised again, saying that it was right on the exercise's inputs, with one
    hint: the mistake's own, or ``hint`` (most likely, a size of the exercise's inputs written in as a
    number) when the check could not name the mistake. An error the function raised (see :func:`call`)
    names the variables of the notebook that the function reads, the likely cause.
    """
    try:
        yield
    except CheckFailed as exc:
        if exc.raised is not None:
            raised = exc.raised
            though = ", though it worked on the exercise's inputs"
            message = f"{raised.says(inputs, though)}. {_likely_cause(raised.fn, raised.name)} Hint: {hint}"
            raise CheckFailed(message, exc.where, raised) from raised.error
        what, _, own = str(exc).partition(" Hint: ")
        raise CheckFailed(f"{what} It was right on the exercise's inputs. "
                          f"Hint: {hint if not own or own in _GENERIC_HINTS else own}") from None


def _likely_cause(fn: Callable, name: str) -> str:
    """Why a function right on the exercise's inputs fails on others: the sizes it reads from outside."""
    outside = sorted({outer for reached in reached_functions(fn)
                      if isinstance(getattr(inner := getattr(reached, "__wrapped__", reached), "__code__", None),
                                    types.CodeType)
                      for outer, value in read_from_outside(inner).items() if _holds_size(value)})
    if outside:
        names = listed(outside)
        return (f"{name} reads {names} from the notebook rather than from its arguments, so "
                f"{'it fits' if len(outside) == 1 else 'they fit'} the exercise's inputs only.")
    return "Most likely a size or an index of the exercise's inputs is written in it as a number."


def _holds_size(value: object) -> bool:
    """True for what can hold a size: a number (not a bool), a torch.Size, a tensor or an array, or a
    container of them."""
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, torch.Size) or holds_tensor(value)
