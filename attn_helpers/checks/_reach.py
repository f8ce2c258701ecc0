"""What a learner's function reaches outside its arguments: the notebook's functions it calls, the globals,
closure variables and defaults it reads (see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import dis
import functools
import types
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn


def _global_names(code: types.CodeType) -> set[str]:
    """The global names ``code`` reads (nested functions and comprehensions included)."""
    found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _global_names(const)
    return found


def reached_functions(fn: Callable) -> Iterator[Callable]:
    """``fn`` and the functions of the same notebook (or file) it reaches through the globals its code names,
    its closure and its defaults, each once: through ``functools.partial`` and caches such as
    ``functools.cache`` too (the cached function is yielded, so that a check can clear its cache)."""
    def module_of(fn: object) -> object:
        while isinstance(fn, functools.partial):
            fn = fn.func
        return getattr(fn, "__module__", None)

    notebook = module_of(fn)  # '__main__' in a notebook; library functions are not followed
    seen: set[int] = set()
    todo = [fn]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        yield fn
        if isinstance(fn, functools.partial):
            todo.append(fn.func)
            continue
        inner = getattr(fn, "__wrapped__", fn)
        if not isinstance(getattr(inner, "__code__", None), types.CodeType):
            continue
        for value in read_from_outside(inner).values():
            if module_of(value) == notebook and (isinstance(value, (types.FunctionType, functools.partial))
                                                 or hasattr(value, "cache_info")):
                todo.append(value)


def read_from_outside(fn: types.FunctionType) -> dict[str, object]:
    """What plain function ``fn`` reads from outside its body, by name: globals, closure variables, defaults."""
    outside = {name: fn.__globals__[name] for name in _global_names(fn.__code__) if name in fn.__globals__}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        with contextlib.suppress(ValueError):  # an empty cell: a variable not assigned yet
            outside[name] = cell.cell_contents
    held = [value for value in [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()] if holds_tensor(value)]
    if held:
        outside["a default argument"] = held[0]
    return outside


def tensors_from_outside(fn: Callable) -> list[str]:
    """What ``fn``, or a function of the notebook it calls (:func:`reached_functions`), reads that holds tensors
    made before the call, by name: globals, closure variables and default arguments; a tensor (or NumPy array)
    counts also inside lists, tuples, sets, dicts and plain objects among them.

    For a function whose answer depends only on its arguments' values (a mask from two sizes): reading
    such a tensor means reusing an answer made beforehand, perhaps by the helper the exercise rules out.
    """
    found: set[str] = set()
    for reached in reached_functions(fn):
        if isinstance(reached, functools.partial):
            if any(holds_tensor(v) for v in [*reached.args, *reached.keywords.values()]):
                found.add("an argument bound by functools.partial")
            continue
        inner = getattr(reached, "__wrapped__", reached)
        if isinstance(getattr(inner, "__code__", None), types.CodeType):
            found |= {name for name, value in read_from_outside(inner).items() if holds_tensor(value)}
    return sorted(found)


def holds_tensor(value: object, depth: int = 3) -> bool:
    """True if ``value`` is a tensor or an array, or holds one (in containers or attributes) ``depth`` deep."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return True
    if depth == 0 or isinstance(value, (str, bytes, type, types.ModuleType, types.FunctionType, nn.Module)):
        return False
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif type(value).__module__ not in ("builtins", "torch") and hasattr(value, "__dict__"):
        items = list(vars(value).values())  # a plain object's attributes (types.SimpleNamespace, a dataclass …)
    else:
        return False
    return any(holds_tensor(item, depth - 1) for item in items)
