"""Spotting shortcuts: :class:`Watch` records what a learner's function runs (see ``attn_helpers.checks``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from .._torch_private import dispatch_mode_base, tensors_in, torch_function_switch
from ._failure import CheckFailed


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
    """``with Watch(functions) as w: fn(...)`` records what ``fn`` ran, through three layers, each for what
    the other two miss:

    - a profiler hook (``sys.setprofile``) sees Python functions by their code, so the book's helpers and a
      module's ``forward`` however they are reached (an alias, a bound method, a helper of the notebook), and
      the C calls that would take code out of sight (starting a thread or a process);
    - a ``TorchFunctionMode`` sees the torch functions and Tensor methods called, by name and before
      PyTorch decomposes them (``F.scaled_dot_product_attention`` is one name here, a few matrix products below);
    - a dispatch mode, below autograd, sees every ATen operator that actually runs, with its shapes: a softmax
      by any route (``x.softmax``, ``nn.Softmax``), the sizes of the tensors made, and what code hides from the
      torch-function record (``torch._C.DisableTorchFunction``).

    ``w.ops`` lists every PyTorch operator (:class:`Op`), ``w.functions`` the names of the torch
    functions and Tensor methods called, and ``w.called`` the name of each of ``functions`` (Python
    functions such as ``ah.attention``) that ran, however the learner reached it: its ``__qualname__``,
    or the name ``functions`` gives it when it maps functions to names.

    It sees only what runs in this thread, through the profiler it installs: code that starts a thread
    (other than a tqdm progress bar's monitor thread) or a process, changes the profiler, or leaves a
    ``with torch._C.DisableTorchFunction()`` makes it raise :class:`CheckFailed` on exit. Code written
    against it (a worker thread started before the check, the profiler switched off through a C function)
    can still hide, as a copy of a helper's source can.
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



def _code_of(fn: Callable) -> object:
    return getattr(fn, "__wrapped__", fn).__code__
