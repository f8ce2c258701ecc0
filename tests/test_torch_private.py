"""The private PyTorch APIs attn_helpers uses: these tests fail loudly when a PyTorch release changes them."""

import ast
import subprocess
import sys
from pathlib import Path

import torch

from attn_helpers._torch_private import dispatch_mode_base, tensors_in, torch_function_switch, written_tensors
from attn_helpers.checks import Watch
from attn_helpers.cost import TensorMemoryTracker


def test_private_dispatch_mode_is_still_what_the_package_relies_on():
    # If this fails, a PyTorch release changed TorchDispatchMode: update attn_helpers/_torch_private.py.
    from torch.utils._python_dispatch import TorchDispatchMode

    base = dispatch_mode_base()
    assert issubclass(base, TorchDispatchMode) and issubclass(TensorMemoryTracker, TorchDispatchMode)
    # our modes run our own __torch_dispatch__, not one wrapped for torch.compile
    assert TensorMemoryTracker.__torch_dispatch__ is TensorMemoryTracker.__dict__["__torch_dispatch__"]
    if "_should_skip_dynamo" in vars(TorchDispatchMode):  # the lock's 2.13 has the switch, 2.9 has none
        assert isinstance(TorchDispatchMode.__dict__["_should_skip_dynamo"], classmethod)
        assert TorchDispatchMode._should_skip_dynamo() is True and TensorMemoryTracker._should_skip_dynamo() is False


def test_dispatch_mode_base_works_on_a_pytorch_without_the_dynamo_switch(monkeypatch):
    """PyTorch 2.9's TorchDispatchMode has neither _should_skip_dynamo nor the __init_subclass__ that reads it: the
    switch only saves importing torch._dynamo, so the package uses it where it exists and runs without it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    for name in ("_should_skip_dynamo", "__init_subclass__"):  # the 2.9 class, which never calls the switch
        if name in vars(TorchDispatchMode):
            monkeypatch.delattr(TorchDispatchMode, name)
    base = dispatch_mode_base()
    assert issubclass(base, TorchDispatchMode) and not hasattr(base, "_should_skip_dynamo")

    class Ops(base):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.ones(2, 2)
    with Ops() as ops:
        y = x @ x
    assert ops.names == ["aten.mm.default"] and torch.equal(y, torch.full((2, 2), 2.0))


def test_the_torch_function_switch_still_shows_to_a_profiler():
    # If this fails, DisableTorchFunction changed: Watch would no longer see code hide from its record.
    switch = torch_function_switch()
    assert switch is torch._C.DisableTorchFunction
    seen = []
    sys.setprofile(lambda frame, event, arg: event == "c_call" and seen.append(getattr(arg, "__self__", None)))
    try:
        with switch():
            pass
    finally:
        sys.setprofile(None)
    assert any(isinstance(owner, switch) for owner in seen)


def test_dispatch_modes_do_not_import_dynamo():
    code = (
        "import sys, torch; from attn_helpers.cost import peak_tensor_memory\n"
        "from attn_helpers.checks import Watch\n"
        "x = torch.randn(4, 4); peak = peak_tensor_memory(torch.matmul, x, x)\n"
        "assert peak == 64, peak\n"
        "with Watch() as w: torch.softmax(x, -1)\n"
        "assert 'torch._dynamo' not in sys.modules, 'TorchDispatchMode now imports torch._dynamo'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_tensors_in_walks_nested_results():
    a, b, c = torch.zeros(1), torch.ones(2), torch.ones(3)
    assert [t.shape[0] for t in tensors_in((a, [b, {"k": c}], 4, None))] == [1, 2, 3]
    assert list(tensors_in("not a tensor")) == []


def test_operator_schemas_still_say_which_tensors_are_written():
    # If this fails, PyTorch changed OpOverload._schema: chapter 9's copy counter would miss copies into buffers.
    x, y, out = torch.ones(2), torch.zeros(2), torch.empty(2)
    aten = torch.ops.aten
    assert written_tensors(aten.add.Tensor, (x, y), {}) == []
    assert written_tensors(aten.mul_.Tensor, (x, y), {})[0] is x
    assert written_tensors(aten.copy_.default, (y, x), {})[0] is y
    assert written_tensors(aten.mul.out, (x, y), {"out": out})[0] is out
    assert written_tensors(aten.index_select.out, (x, 0, torch.tensor([1])), {"out": out})[0] is out


def test_watch_still_records_operators_below_autograd():
    with Watch() as watch:
        torch.randn(2, 3).softmax(-1)
    assert any(op.name == "_softmax" for op in watch.ops)


def test_no_other_module_imports_a_private_torch_module():
    """Private PyTorch stays behind attn_helpers/_torch_private.py, the one place its test watches."""
    package = Path(__file__).resolve().parent.parent / "attn_helpers"
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "_torch_private.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(package)}: {n}" for n in names
                      if n.split(".")[0] == "torch" and any(part.startswith("_") for part in n.split(".")[1:])]
    assert not found, f"private torch imported outside _torch_private.py: {found}"
