"""Self-checks for the exercises: accept the right answer, name the likely mistake in a wrong one.

Each chapter has a module here (``checks.ch01`` …) whose functions build the expected answer
and the tensors that the usual mistakes would produce, then call :func:`check_tensor`.
Exercises done "by hand" ask for a function, which the check runs under :class:`Watch`: it records
the PyTorch operators and the book's functions (or methods, such as a module's ``forward``) it calls,
however they are reached, so a check can spot a forbidden shortcut.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import importlib
import math
import numbers
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .._torch_private import dispatch_mode_base, tensors_in, torch_function_switch

__all__ = [
    "CheckFailed",
    "check_tensor",
    "on_cpu",
    "as_number",
    "check_value",
    "Op",
    "Watch",
    "book_attention",
    "torch_attention",
    "run_by_hand",
    "on_other_sizes",
    "reached_functions",
    "tensors_from_outside",
]


class CheckFailed(AssertionError):
    """A learner's answer is wrong; the message says how, with a hint."""


def _close(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-4))


def on_cpu(answer: object, name: str) -> None:
    """Raise :class:`CheckFailed` if ``answer`` is a tensor on another device than the CPU (a GPU), where the
    check's own tensors are not: comparing them would fail inside PyTorch."""
    if isinstance(answer, torch.Tensor) and answer.device.type != "cpu":
        raise CheckFailed(f"{name} is on the {answer.device} device, and the check compares on the CPU. "
                          f"Hint: compute it on the CPU, or move it there: {name}.cpu().")


def check_tensor(
    answer: object,
    expected: torch.Tensor,
    name: str,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    atol: float = 1e-4,
) -> None:
    """Print one "correct" line if ``answer`` matches ``expected``; otherwise raise :class:`CheckFailed`.

    ``mistakes`` maps a hint to the tensor that mistake produces; when the answer equals one
    of them, the hint is the message. Otherwise the message says what differs (type, shape,
    values).
    """
    if isinstance(answer, torch.Tensor) and answer.requires_grad:
        answer = answer.detach()
    if not isinstance(answer, torch.Tensor):
        raise CheckFailed(f"{name} should be a torch.Tensor, got {type(answer).__name__}.")
    if answer.layout != torch.strided:
        raise CheckFailed(f"{name} is a {answer.layout} tensor; pass a dense one: {name}.to_dense().")
    on_cpu(answer, name)
    if not torch.is_floating_point(answer):
        raise CheckFailed(f"{name} has dtype {answer.dtype}; attention works with floats (use .float()).")
    for hint, wrong in (mistakes or {}).items():
        if _close(answer, wrong, atol) and not _close(wrong, expected, atol):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if answer.shape != expected.shape:
        raise CheckFailed(
            f"{name} has shape {tuple(answer.shape)}, expected {tuple(expected.shape)}. "
            f"Hint: check which dimensions you multiply, stack or transpose."
        )
    if not _close(answer, expected, atol):
        gap = (answer.double() - expected.double()).abs()
        where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        if answer.dtype in (torch.float16, torch.bfloat16):
            raise CheckFailed(
                f"{name} is {answer.dtype}, whose rounding (largest difference {float(gap.max()):.4g}) is coarser "
                f"than the check's tolerance. Hint: compute in float32, the book's precision."
            )
        raise CheckFailed(
            f"{name} has the right shape but wrong values (largest difference {float(gap.max()):.4g} "
            f"at index {where}). Hint: recompute it step by step and compare with the chapter's cells."
        )
    print(f"✓ {name}: correct")


def as_number(answer: object, name: str) -> float:
    """``answer`` as a float if it is one real number: a Python or NumPy int or float, a 0-d or
    one-element array or tensor. Bools, strings, complex numbers and longer arrays raise :class:`CheckFailed`."""
    if isinstance(answer, (torch.Tensor, np.ndarray)):
        size = answer.numel() if isinstance(answer, torch.Tensor) else answer.size
        if size != 1:
            raise CheckFailed(
                f"{name} should be a single number, got a {type(answer).__name__} of shape "
                f"{tuple(answer.shape)}. Hint: index the one value you mean, or use .item()."
            )
        answer = answer.item()
    if isinstance(answer, (bool, np.bool_)):
        raise CheckFailed(f"{name} should be a number, got the bool {answer}: store the number itself.")
    if not isinstance(answer, numbers.Real):
        raise CheckFailed(f"{name} should be a number (an int or a float), got {type(answer).__name__}.")
    value = float(answer)
    if not math.isfinite(value):
        raise CheckFailed(f"{name} is {value}, not a finite number. Hint: look for a division by zero or an overflow.")
    return value


def check_value(answer: object, expected: float, name: str, mistakes: Mapping[str, float] | None = None,
                atol: float = 1e-4, rtol: float = 1e-4) -> None:
    """:func:`check_tensor` for a single number (see :func:`as_number` for what counts as one).

    The answer is right when ``|answer - expected| <= atol + rtol * |expected|``; pass ``rtol=0``
    for counts that must be exact.
    """
    value = as_number(answer, name)

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= atol + rtol * abs(b)

    for hint, wrong in (mistakes or {}).items():
        if close(value, wrong) and not close(wrong, expected):
            raise CheckFailed(f"{name} is not right yet. Hint: {hint}")
    if not close(value, expected):
        raise CheckFailed(
            f"{name} = {value:.6g} is not right. Hint: recompute it step by step and compare with the chapter's cells."
        )
    print(f"✓ {name}: correct")


# ------------------------------------------------------------------ spotting shortcuts


@dataclass
class Op:
    """One PyTorch operator run under :class:`Watch`: its ATen name and the shapes it took and gave."""

    name: str  # e.g. "_softmax", "mm", "bmm"
    inputs: list[tuple[int, ...]]  # shapes of its tensor arguments
    outputs: list[tuple[int, ...]]  # shapes of the floating-point tensors it returned


class _OpRecorder(dispatch_mode_base()):
    """Records every ATen operator that runs, below autograd (so ``x.softmax`` shows up as ``_softmax``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [tuple(x.shape) for x in tensors_in((args, kwargs)) if isinstance(x, torch.Tensor)]
        outputs = [tuple(x.shape) for x in tensors_in(out)
                   if isinstance(x, torch.Tensor) and torch.is_floating_point(x)]
        self.ops.append(Op(func.overloadpacket.__name__, inputs, outputs))
        return out


class _FunctionRecorder(TorchFunctionMode):
    """Records the name of every torch function and Tensor method called (``scaled_dot_product_attention``, …)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class Watch:
    """``with Watch(functions) as w: fn(...)`` records what ``fn`` ran.

    ``w.ops`` lists every PyTorch operator (:class:`Op`), ``w.functions`` the names of the torch
    functions and Tensor methods called, and ``w.called`` the name of each of ``functions`` (Python
    functions such as ``ah.attention``) that ran, however the learner reached it: its ``__qualname__``,
    or the name ``functions`` gives it when it maps functions to names.

    It sees only what runs in this thread, through the profiler it installs: code that starts a thread
    (other than a tqdm progress bar's monitor thread) or a process, changes the profiler, or leaves a
    ``with torch._C.DisableTorchFunction()`` makes it raise :class:`CheckFailed` on exit. Code written against it (a worker thread started before the check, the
    profiler switched off through a C function) can still hide, as a copy of a helper's source can.
    """

    def __init__(self, functions: Iterable[Callable] | Mapping[Callable, str] = ()) -> None:
        self.called: set[str] = set()
        names = functions if isinstance(functions, Mapping) else {f: f.__qualname__ for f in functions}
        self._codes = {_code_of(f): name for f, name in names.items()}
        self._ops, self._functions = _OpRecorder(), _FunctionRecorder()
        self._previous: object = None
        self._escape: str | None = None  # how the watched code got out of sight, if it did

    @property
    def ops(self) -> list[Op]:
        return self._ops.ops

    @property
    def functions(self) -> list[str]:
        return self._functions.names

    def _profile(self, frame, event, arg):  # noqa: ANN001
        if event == "call" and frame.f_code in self._codes:
            self.called.add(self._codes[frame.f_code])
        elif event == "c_call" and self._escape is None and frame.f_code not in _OWN_CODES:
            if arg in _ESCAPES and not _is_progress_bar_monitor(frame):
                self._escape = _ESCAPES[arg]
            elif isinstance(getattr(arg, "__self__", None), _DISABLE_TORCH_FUNCTION):  # leaving `with` it
                self._escape = "switches off the check's record of PyTorch calls"
        if self._previous is not None:
            self._previous(frame, event, arg)

    def __enter__(self) -> Watch:
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        self._functions.__enter__()
        self._ops.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._ops.__exit__(*exc)
            self._functions.__exit__(*exc)
        finally:
            if sys.getprofile() != self._profile and self._escape is None:
                self._escape = "switches off the check's profiler (sys.setprofile)"
            sys.setprofile(self._previous)
        if self._escape and exc[0] is None:
            raise CheckFailed(f"the function {self._escape}, so the check cannot see what it computes. Hint: "
                              "compute the answer in the function itself.")

    def used(self, *fragments: str) -> bool:
        """True if a torch function or operator whose name contains one of ``fragments`` ran."""
        names = self.functions + [op.name for op in self.ops]
        return any(f in name for name in names for f in fragments)

    def used_softmax(self) -> bool:
        """True if PyTorch's softmax, log_softmax or softmin ran, by any route."""
        return self.used("softmax", "softmin")

    def used_fused_attention(self) -> bool:
        """True if ``F.scaled_dot_product_attention`` or ``F.multi_head_attention_forward`` ran, also where the
        torch-function record was switched off: their math fallback's ``_safe_softmax`` is then what shows."""
        return self.used("scaled_dot_product", "multi_head_attention", "_safe_softmax")


def _escapes() -> dict[Callable, str]:
    """The builtins through which code leaves the sight of Watch's profiler (one thread of one process)."""
    found: dict[Callable, str] = {sys.setprofile: "switches off the check's profiler (sys.setprofile)"}
    for module, names, what in [("_thread", ("start_new_thread", "start_joinable_thread"),
                                 "starts a thread (as torch.compile does when it compiles: pass the plain function)"),
                                ("os", ("fork", "posix_spawn", "posix_spawnp"), "starts a process"),
                                ("_posixsubprocess", ("fork_exec",), "starts a process")]:
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # not on this platform
            continue
        found.update({getattr(loaded, name): what for name in names if hasattr(loaded, name)})
    return found


def _is_progress_bar_monitor(frame) -> bool:  # noqa: ANN001
    """True when ``frame`` (``Thread.start``) starts tqdm's monitor thread, which a progress bar's first use
    starts: it only refreshes bars, and refusing it would refuse a learner's function only on its first run."""
    thread = frame.f_locals.get("self")
    return type(thread).__module__ == "tqdm._monitor" and type(thread).__qualname__ == "TMonitor"


_ESCAPES = _escapes()
_DISABLE_TORCH_FUNCTION = torch_function_switch()


_OWN_CODES = {Watch.__enter__.__code__, Watch.__exit__.__code__}  # where a Watch sets the profiler itself


def book_attention() -> dict[Callable, str]:
    """The book's functions that compute attention, or its running softmax (chapter 9), for the caller,
    named as a learner reaches them: for :class:`Watch` in exercises that ask for attention by hand."""
    from .. import merge
    from ..attention import attention, loop_attention

    return {attention: "ah.attention", loop_attention: "ah.loop_attention",
            merge.partial_attention: "ah.merge.partial_attention", merge.merge_partials: "ah.merge.merge_partials",
            merge.finish_partial: "ah.merge.finish_partial"}


def torch_attention() -> dict[Callable, str]:
    """PyTorch's multi-head attention, as Python functions :class:`Watch` sees however they are reached
    (``used_fused_attention`` sees their torch functions and operators, which code can hide from it)."""
    return {nn.functional.multi_head_attention_forward: "F.multi_head_attention_forward",
            nn.MultiheadAttention.forward: "nn.MultiheadAttention"}


def run_by_hand(fn: Callable, args: tuple, forbidden: Mapping[Callable, str], name: str, hint: str,
                owner: str) -> tuple | list:
    """``fn(*args)`` under :class:`Watch`, for an exercise that asks for ``(out, weights)`` by hand.

    Raises :class:`CheckFailed` if ``fn`` (named ``name``) reached one of ``forbidden`` or PyTorch's fused
    attention, or did not return a pair as ``owner`` does; ``hint`` says what to do instead.
    """
    with Watch(forbidden) as watch:
        result = fn(*args)
    if watch.called:
        raise CheckFailed(f"{name} calls {', '.join(sorted(watch.called))} (directly or through another helper), "
                          f"which does the work for you: the exercise asks you not to. Hint: {hint}")
    if watch.used_fused_attention():
        raise CheckFailed(f"{name} calls PyTorch's fused attention (F.scaled_dot_product_attention or "
                          f"nn.MultiheadAttention), which computes the attention for you. Hint: {hint}")
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise CheckFailed(f"{name} should return a pair (out, weights), as {owner} does: return out, weights.")
    return result


@contextlib.contextmanager
def on_other_sizes(name: str, inputs: str, hint: str) -> Iterator[None]:
    """Around a check's second run of the learner's function ``name`` on ``inputs`` of other sizes than the
    exercise's: an exception there, or a wrong answer, becomes a :class:`CheckFailed` that says so and ends
    with ``hint`` (most likely, a size of the exercise's inputs is written in as a number)."""
    try:
        yield
    except CheckFailed as exc:
        raise CheckFailed(f"{exc} It was right on the exercise's inputs. Hint: {hint}") from None
    except Exception as exc:
        raise CheckFailed(f"{name} raised {type(exc).__name__} on {inputs}, though it worked on the exercise's. "
                          f"Hint: {hint}") from exc


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
        for value in _read_from_outside(inner).values():
            if module_of(value) == notebook and (isinstance(value, (types.FunctionType, functools.partial))
                                                 or hasattr(value, "cache_info")):
                todo.append(value)


def _read_from_outside(fn: types.FunctionType) -> dict[str, object]:
    """What plain function ``fn`` reads from outside its body, by name: globals, closure variables, defaults."""
    outside = {name: fn.__globals__[name] for name in _global_names(fn.__code__) if name in fn.__globals__}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        with contextlib.suppress(ValueError):  # an empty cell: a variable not assigned yet
            outside[name] = cell.cell_contents
    held = [value for value in [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()] if _holds_tensor(value)]
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
            if any(_holds_tensor(v) for v in [*reached.args, *reached.keywords.values()]):
                found.add("an argument bound by functools.partial")
            continue
        inner = getattr(reached, "__wrapped__", reached)
        if isinstance(getattr(inner, "__code__", None), types.CodeType):
            found |= {name for name, value in _read_from_outside(inner).items() if _holds_tensor(value)}
    return sorted(found)


def _holds_tensor(value: object, depth: int = 3) -> bool:
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
    return any(_holds_tensor(item, depth - 1) for item in items)


def _code_of(fn: Callable) -> object:
    return getattr(fn, "__wrapped__", fn).__code__
