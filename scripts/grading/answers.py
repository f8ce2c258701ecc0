"""Save an exercise's answer variables in the student's kernel; load them again in a fresh process.

The grader injects a cell after each exercise's check cell that runs :func:`save_answers` (its source is
copied into the cell) on the names the book's check cell reads. One file per exercise, written with
``torch.save``:

- tensors, numbers, strings, tuples, lists, dicts, ``torch.Size``, modules of torch and attn_helpers
  are stored as they are; NumPy scalars and arrays are wrapped;
- a function defined in the notebook is stored as its compiled code (``marshal``), its defaults, and,
  in a shared namespace, every global it reads (other functions the same way, modules by name);
  a function with a closure cannot be stored;
- a function or class from an importable module (``torch.softmax``) is stored by name;
- anything else is recorded as unsupported, and the exercise is reported "unverified".

:func:`load_answers` reads such a file with ``torch.load(weights_only=True)`` and an allow-list of the
module classes of ``torch.nn`` and the classes of ``attn_helpers``, so a forged file cannot run code while
it is loaded.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import marshal
import types
from pathlib import Path

KEY = "__grader__"


def save_answers(label, names, path):  # runs inside the student's kernel; imports only what it needs
    import dis
    import marshal
    import types

    import torch

    user_ns = globals()
    namespace, todo = {}, []

    def tag(kind, **fields):
        return {"__grader__": kind, **fields}

    def global_names(code):
        found = [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found += global_names(const)
        return found

    def encode(obj):
        if isinstance(obj, types.ModuleType):
            return tag("module", name=obj.__name__)
        if isinstance(obj, types.FunctionType) and obj.__code__.co_filename.replace("\\", "/").endswith(
                "torch/utils/_contextlib.py") and hasattr(obj, "__wrapped__"):
            return encode(obj.__wrapped__)  # @torch.no_grad(), @torch.inference_mode(): the same values without it
        inner = getattr(obj, "func", None) or getattr(obj, "__wrapped__", None)  # functools.partial, a decorator
        if callable(obj) and getattr(inner, "__globals__", None) is user_ns:
            return tag("unsupported", why=f"{getattr(inner, '__name__', 'a function')} is wrapped (by a decorator "
                                          "or functools.partial), which only the student's kernel can rebuild")
        if isinstance(obj, types.FunctionType) and obj.__globals__ is user_ns:
            if obj.__closure__:
                return tag("unsupported", why=f"the function {obj.__name__} uses a closure")
            todo.extend(global_names(obj.__code__))
            return tag("function", code=marshal.dumps(obj.__code__), name=obj.__name__,
                       defaults=encode(obj.__defaults__))
        if callable(obj) and getattr(obj, "__module__", None) not in (None, "__main__") \
                and isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            name = obj.__name__ if isinstance(obj, types.BuiltinFunctionType) else obj.__qualname__
            return tag("import", module=obj.__module__, name=name)
        if type(obj).__module__ == "numpy":
            if hasattr(obj, "shape") and obj.shape != ():
                return tag("ndarray", value=torch.from_numpy(obj.copy()))
            return tag("numpy", value=obj.item(), dtype=obj.dtype.str)
        if type(obj) in (list, tuple):
            return type(obj)(encode(x) for x in obj)
        if type(obj) is dict:
            return {k: encode(v) for k, v in obj.items()}
        return obj

    answers = {n: encode(user_ns[n]) if n in user_ns else tag("undefined") for n in names}
    while todo:
        name = todo.pop()
        if name not in namespace and name in user_ns:
            namespace[name] = None  # placeholder first: recursive functions stop here
            namespace[name] = encode(user_ns[name])
    record = {"label": label, "answers": answers, "namespace": namespace}
    try:
        torch.save(record, path)
    except Exception as exc:  # something not picklable; record why, with the names
        torch.save({"label": label, "error": f"{type(exc).__name__}: {exc}"}, path)


def save_cell_source(label: str, names: list[str], path: Path) -> str:
    """The source of the cell the grader injects after ``label``'s check cell."""
    return (f"{inspect.getsource(save_answers)}\n"
            f"save_answers({label!r}, {names!r}, {str(path)!r})\n"
            f"del save_answers\n")


def _safe_classes(path: Path, modules_only: bool = False) -> list[type]:
    """The classes the file at ``path`` needs that a saved answer may contain: torch.nn modules, and
    classes of attn_helpers (found without running the file: torch lists the globals a pickle names).

    ``modules_only`` allows only ``nn.Module`` subclasses (for checks run outside the sandbox).
    """
    import torch

    found = []
    for name in torch.serialization.get_unsafe_globals_in_checkpoint(path):
        module, _, attr = name.rpartition(".")
        if not (module.startswith("attn_helpers.") or module.startswith("torch.nn.modules.")):
            continue
        value = getattr(importlib.import_module(module), attr, None)
        if isinstance(value, type) and value.__module__ == module and (
                issubclass(value, torch.nn.Module) or (module.startswith("attn_helpers.") and not modules_only)):
            found.append(value)
    return found


class Unsupported(Exception):
    """An answer that cannot be rebuilt outside the student's kernel."""


def _import(module: str, name: str) -> object:
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _decode(obj: object, namespace: dict) -> object:
    import numpy as np

    if type(obj) in (list, tuple):
        return type(obj)(_decode(x, namespace) for x in obj)
    if type(obj) is dict and KEY not in obj:
        return {k: _decode(v, namespace) for k, v in obj.items()}
    if type(obj) is not dict:
        return obj
    kind = obj[KEY]
    if kind == "module":
        return importlib.import_module(obj["name"])
    if kind == "import":
        return _import(obj["module"], obj["name"])
    if kind == "function":
        code = marshal.loads(obj["code"])
        if not isinstance(code, types.CodeType) or code.co_freevars:
            raise Unsupported("a saved function is not a plain function")
        return types.FunctionType(code, namespace, obj["name"], _decode(obj["defaults"], namespace))
    if kind == "numpy":
        return np.dtype(obj["dtype"]).type(obj["value"])
    if kind == "ndarray":
        return obj["value"].numpy()
    if kind == "undefined":
        return None
    raise Unsupported(obj.get("why", f"an answer of kind {kind!r}"))


def load_answers(path: Path, modules_only: bool = False) -> dict[str, object]:
    """The answer variables saved in ``path``, by name. Raises Unsupported if one cannot be rebuilt."""
    import torch

    with torch.serialization.safe_globals(_safe_classes(path, modules_only)):
        record = torch.load(path, weights_only=True)
    if "error" in record:
        raise Unsupported(f"the answers could not be saved ({record['error']})")
    namespace: dict = {"__builtins__": builtins}
    for name, value in record["namespace"].items():
        namespace[name] = _decode(value, namespace)
    answers = {}
    for name, value in record["answers"].items():
        if type(value) is dict and value.get(KEY) == "undefined":
            continue  # the check will raise NameError, as it did in the kernel
        answers[name] = _decode(value, namespace)
    return answers


def has_function(path: Path) -> bool:
    """True if the saved answers contain a function (its code will run during the re-check)."""
    import torch

    try:
        with torch.serialization.safe_globals(_safe_classes(path)):
            record = torch.load(path, weights_only=True)
    except Exception:
        return False
    return any(type(v) is dict and v.get(KEY) == "function" for v in record.get("answers", {}).values())
