"""Checks of single numbers and lists of numbers: sizes, lengths, factors and rates (chapters 1-12).

``integer`` is the package's one integer check, ``real`` its one real-number check and ``flag`` its one bool
check; every other check of a number goes through them (``whole_number`` and ``real_number`` are the tests
behind the first two, for a caller that words its own message).
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import torch


def integer(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None, none_ok: bool = False,
    why: str = "",
) -> Any:
    """``value`` as an ``int`` after checking it is a whole number in ``minimum … maximum`` (either may be None).

    The one integer check of the package (``minimum=1`` for a positive size): Python and NumPy integers
    and 0-d integer tensors pass; bools, floats and strings raise a ``ValueError`` that says what was
    passed and, where it can, what to write instead.
    """
    if value is None and none_ok:
        return None
    number = whole_number(value)
    if number is not None and (minimum is None or number >= minimum) and (maximum is None or number <= maximum):
        return number
    if maximum is not None:
        what = f"an integer between {minimum} and {maximum}" if minimum is not None \
            else f"an integer of at most {maximum}"
    elif minimum is None:
        what = "an integer"
    else:
        what = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer of at least {minimum}")
    what += f" ({why})" if why else ""
    what += " or None" if none_ok else ""
    raise ValueError(f"{name} must be {what}, got {_described(value, name)}.")


def whole_number(value: object) -> int | None:
    """``value`` as an ``int`` if it is a whole number, else ``None``: the test behind every integer check.

    Python and NumPy integers and 0-d integer tensors are whole numbers; bools (``True`` is 1 to Python),
    floats and strings are not. For a caller that words its own message, such as an exercise's check.
    """
    if isinstance(value, float) or _is_bool(value):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def real_number(value: object) -> float | None:
    """``value`` as a ``float`` if it is a finite real number, else ``None``: the test behind :func:`real`
    (chapters 2-12).

    Python and NumPy numbers and one-number tensors are real numbers; bools, strings, NaN and inf are not.
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not _is_bool(value):
        value = value.item()
    if _is_bool(value) or isinstance(value, (str, torch.Tensor)) or not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _is_bool(value: object) -> bool:
    """True for a bool, a NumPy bool or a bool tensor: ``True`` is 1 to Python, but never a number here."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _described(value: object, name: str, *, whole: bool = True) -> str:
    """``value`` as an error message shows it: its repr, what kind of thing it is, and the fix if there is one.

    ``whole``: the check wants a whole number, so a float such as 2.0 is shown with the int to pass instead.
    """
    if isinstance(value, str):
        fix = f"; pass {name}={value.strip()}" if value.strip().isdigit() and name.isidentifier() else ""
        return f"{name}={value!r} (a string){fix}"
    if _is_bool(value):
        return f"{value!r} (a bool, not a number)"
    if whole and isinstance(value, float) and value.is_integer() and name.isidentifier():
        return f"{value!r} (a float); pass {name}={int(value)}"
    return repr(value)


def _kind(value: object) -> str:
    """What kind of thing ``value`` is, for a message: "a bool, not a number", "a float", "a str", …"""
    if _is_bool(value):
        return "a bool, not a number"
    return f"a {type(value).__name__}"


def real(
    value: object, name: str, *, above: float | None = None, at_least: float | None = None,
    at_most: float | None = None, why: str = "",
) -> float:
    """``value`` as a ``float`` after checking it is a finite real number within the bounds given (chapters 2-12).

    The one real-number check of the package: ``above`` is a strict lower bound (``above=0`` for a positive
    number), ``at_least`` and ``at_most`` are inclusive bounds; each may be None. Python and NumPy numbers and
    one-number tensors pass; bools, strings, NaN and inf raise a ``ValueError`` that says what was passed.
    ``why`` (a few words) is added to the message.
    """
    number = real_number(value)
    if number is not None and (above is None or number > above) and (at_least is None or number >= at_least) \
            and (at_most is None or number <= at_most):
        return number
    raise ValueError(f"{name} must be {_interval(above, at_least, at_most)}{f' ({why})' if why else ''}, "
                     f"got {_described(value, name, whole=False)}.")


def _interval(above: float | None, at_least: float | None, at_most: float | None) -> str:
    """The bounds of :func:`real` in words: "a positive finite number", "a number in (0, 1]", …"""
    if at_most is not None:
        low = f"({above:g}" if above is not None else f"[{at_least:g}" if at_least is not None else "(-inf"
        return f"a number in {low}, {at_most:g}]"
    if above is not None:
        return "a positive finite number" if above == 0 else f"a finite number larger than {above:g}"
    return f"a number of at least {at_least:g}" if at_least is not None else "a finite number"


def sizes_list(sizes: object, name: str = "sizes", minimum: int = 1, why: str = "") -> list[int]:
    """Sequence lengths to measure (chapters 7 and 9): a non-empty, increasing list of integers ``>= minimum``.

    Python and NumPy integers pass, as in :func:`integer`; ``why`` (a few words) is added to the message
    for a number below ``minimum``. Returns them as a list of ``int``.
    """
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__") or isinstance(sizes, dict):
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {sizes!r}.")
    values = list(sizes)
    numbers = [whole_number(t) for t in values]
    if not numbers or any(n is None for n in numbers):
        bad = next((f"; {t!r} ({_kind(t)}) is not one" for t, n in zip(values, numbers, strict=True) if n is None), "")
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {values!r}{bad}.")
    if min(numbers) < minimum:
        what = "positive ints" if minimum == 1 else f"ints >= {minimum}"
        raise ValueError(f"{name} must be a non-empty list of {what}{f' ({why})' if why else ''}, got {values!r}.")
    if numbers != sorted(set(numbers)):
        raise ValueError(f"{name} must be increasing without repeats, got {numbers}.")
    return numbers


def lengths_list(lengths: object) -> list[int]:
    """Sequence lengths (a list, tuple, 1-D integer tensor or array) as a non-empty list of ints >= 0 (chapter 7)."""
    if isinstance(lengths, torch.Tensor) or hasattr(lengths, "dtype"):
        kind = str(getattr(lengths, "dtype", ""))
        if getattr(lengths, "ndim", None) != 1 or "float" in kind or "bool" in kind:
            raise ValueError(
                f"lengths must be a 1-D integer tensor or a list of ints, got a tensor of shape "
                f"{tuple(lengths.shape)} and dtype {lengths.dtype}."
            )
        lengths = lengths.tolist()
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or len(lengths) == 0:
        raise ValueError(f"lengths must be a non-empty list of sequence lengths, got {lengths!r}.")
    return [integer(n, "every length", minimum=0) for n in lengths]


def even_int(value: object, name: str) -> int:
    """``value`` as an ``int`` after checking it is a positive even number, such as RoPE's width (chapter 11)."""
    number = integer(value, name, minimum=1)
    if number % 2:
        raise ValueError(
            f"{name} must be even, got {number}: RoPE turns the features in pairs, one pair per frequency. "
            f"Use an even {name} (e.g. {number + 1})."
        )
    return number


def flag(value: object, name: str) -> bool:
    """``value`` after checking it is a bool, ``True`` or ``False`` (chapter 12's ``absorb``).

    Rejects strings, numbers and tensors: ``"no"`` is truthy in Python, so a setting that must be a bool says so.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__}): pass a bool, "
                        f"e.g. {name}=False.")
    return value


def probabilities(values: object, name: str) -> list:
    """``values`` as a list of exact ``Fraction`` probabilities that sum to exactly 1 (chapter 12).

    Takes ints and ``fractions.Fraction`` (and floats, converted exactly); rejects negative entries, an empty list
    and a sum other than 1, which floats such as 0.1 rarely reach exactly: use ``Fraction(1, 10)``.
    """
    from fractions import Fraction

    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of probabilities, one per token, got {values!r}.")
    exact = []
    for i, v in enumerate(values):
        number = real(v, f"{name}[{i}]", at_least=0, why="a probability")
        exact.append(Fraction(v) if isinstance(v, numbers.Rational) else Fraction(number))
    if sum(exact) != 1:
        raise ValueError(f"{name} must sum to exactly 1, got {float(sum(exact))!r}: write the probabilities as "
                         f"fractions.Fraction (Fraction(1, 3), not 0.333).")
    return exact
