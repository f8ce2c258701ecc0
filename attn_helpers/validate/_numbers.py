"""Checks of single numbers and lists of numbers: sizes, lengths, factors and rates (chapters 1-12).

``integer`` is the package's one integer check, ``real`` its one real-number check and ``flag`` its one bool
check; every other check of a number goes through them (``whole_number`` is the test behind the first, for a
caller that words its own message, such as an exercise's check).
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch


def integer(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None, none_ok: bool = False,
    why: str = "",
) -> Any:
    """``value`` as an ``int`` after checking it is a whole number in ``minimum … maximum`` (either may be None).

    The one integer check of the package (``minimum=1`` for a positive size): Python and NumPy integers
    and 0-d integer tensors pass; bools, floats and strings raise a ``TypeError`` and a number out of
    bounds a ``ValueError``, each saying what was passed and, where it can, what to write instead.
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
    error = TypeError if number is None else ValueError
    raise error(f"{name} must be {what}, got {_described(value, name)}.")


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


def _as_float(value: object) -> float | None:
    """``value`` as a ``float`` (NaN and inf too) if it is a number, else ``None``: what tells a wrong kind."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not _is_bool(value):
        value = value.item()
    if _is_bool(value) or isinstance(value, (str, torch.Tensor)) or not hasattr(value, "__float__"):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


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
    """What kind of thing ``value`` is, for a message: "a bool, not a number", "a float", "a numpy.int64", …"""
    if _is_bool(value):
        return "a bool, not a number"
    return f"a {_type_name(value)}"


def _type_name(value: object) -> str:
    """The name of ``value``'s type as its user writes it: "str", "numpy.bool", "torch.Tensor"."""
    kind = type(value)
    module = kind.__module__.split(".")[0]
    return kind.__name__ if module == "builtins" else f"{module}.{kind.__name__}"


def real(
    value: object, name: str, *, above: float | None = None, at_least: float | None = None,
    at_most: float | None = None, why: str = "",
) -> float:
    """``value`` as a ``float`` after checking it is a finite real number within the bounds given (chapters 2-12).

    The one real-number check of the package: ``above`` is a strict lower bound (``above=0`` for a positive
    number), ``at_least`` and ``at_most`` are inclusive bounds; each may be None. Python and NumPy numbers and
    one-number tensors pass; bools and strings raise a ``TypeError``, NaN, inf and a number out of bounds a
    ``ValueError``, each saying what was passed. ``why`` (a few words) is added to the message.
    """
    number = _as_float(value)
    if number is not None and math.isfinite(number) and (above is None or number > above) \
            and (at_least is None or number >= at_least) and (at_most is None or number <= at_most):
        return number
    error = TypeError if number is None else ValueError
    raise error(f"{name} must be {_interval(above, at_least, at_most)}{f' ({why})' if why else ''}, "
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
    for a number below ``minimum``. Returns them as a list of ``int``. Something not a list, or an entry not an
    integer, raises a ``TypeError``; an empty list, a number too small or out of order a ``ValueError``.
    """
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__") or isinstance(sizes, dict):
        raise TypeError(f"{name} must be a non-empty list of positive ints, got {sizes!r} ({_kind(sizes)}).")
    values = list(sizes)
    numbers = [whole_number(t) for t in values]
    bad = next((f"; {t!r} ({_kind(t)}) is not one" for t, n in zip(values, numbers, strict=True) if n is None), None)
    if bad is not None:
        raise TypeError(f"{name} must be a non-empty list of positive ints, got {values!r}{bad}.")
    if not numbers:
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {values!r}.")
    if min(numbers) < minimum:
        what = "positive ints" if minimum == 1 else f"ints >= {minimum}"
        raise ValueError(f"{name} must be a non-empty list of {what}{f' ({why})' if why else ''}, got {values!r}.")
    if numbers != sorted(set(numbers)):
        raise ValueError(f"{name} must be increasing without repeats, got {numbers}.")
    return numbers


def even_int(value: object, name: str, *, otherwise: str = "") -> int:
    """``value`` as an ``int`` after checking it is a positive even number, such as RoPE's width (chapters 8-11).

    ``otherwise`` (a few words) names another way out, added to the message after "Use an even ...".
    """
    number = integer(value, name, minimum=1)
    if number % 2:
        raise ValueError(
            f"{name} must be even, got {number}: RoPE turns the features in pairs, one pair per frequency. "
            f"Use an even {name} (e.g. {number + 1}){f', or {otherwise}' if otherwise else ''}."
        )
    return number


def flag(value: object, name: str) -> bool:
    """``value`` as a Python ``bool`` after checking it is ``True`` or ``False`` (chapter 12's ``absorb``).

    A NumPy bool passes (such as ``array.max() > 0``: one truth value, as a bool). Strings, numbers and tensors
    raise a ``TypeError``: ``"no"`` is truthy in Python, so a setting that must be a bool says so.
    """
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and str(value.dtype) == "bool":
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} ({_type_name(value)}): pass a bool, "
                    f"e.g. {name}=False.")


def probabilities(values: object, name: str) -> list[Fraction]:
    """``values`` as a list of exact ``Fraction`` probabilities that sum to exactly 1 (chapter 12).

    Takes ints and ``fractions.Fraction`` (and floats, converted exactly); rejects negative entries, an empty list
    and a sum other than 1, which floats such as 0.1 rarely reach exactly: use ``Fraction(1, 10)``.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of probabilities, one per token, got {values!r} "
                        f"({_type_name(values)}).")
    if len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of probabilities, one per token, got an empty one.")
    exact = []
    for i, v in enumerate(values):
        number = real(v, f"{name}[{i}]", at_least=0, why="a probability")
        exact.append(Fraction(v) if isinstance(v, numbers.Rational) else Fraction(number))
    if sum(exact) != 1:
        raise ValueError(f"{name} must sum to exactly 1, got {float(sum(exact))!r}: write the probabilities as "
                         f"fractions.Fraction (Fraction(1, 3), not 0.333).")
    return exact
