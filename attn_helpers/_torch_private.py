"""The private PyTorch APIs the package relies on, in one place (chapters 6-7 and the self-checks).

A *dispatch mode* sees every operator call below autograd together with the tensors it returns.
``attn_helpers.cost`` counts the bytes of every intermediate tensor with one (``torch.profiler``
reports allocations per operator, not the peak of the tensors alive at once), and the self-checks
record which operators a learner's function ran. PyTorch keeps the class in the private module
``torch.utils._python_dispatch``; ``tests/test_torch_private.py`` fails loudly if a release moves
or changes it. The self-checks also need to notice code that switches the modes off (:func:`torch_function_switch`),
and to know which tensors an operator writes into (:func:`written_tensors`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def dispatch_mode_base() -> type:
    """PyTorch's ``TorchDispatchMode``, subclassed so that it runs eagerly.

    A newer PyTorch (2.13, not 2.9) wraps each subclass's ``__torch_dispatch__`` for ``torch.compile``, which
    imports ``torch._dynamo`` (a second or more) on first use; where the class has that switch
    (``_should_skip_dynamo``), the subclass turns it off. Nothing in the book runs a dispatch mode under
    ``torch.compile``.
    """
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as error:  # pragma: no cover - only on a PyTorch that moved it
        raise ImportError(
            f"PyTorch {torch.__version__} no longer has torch.utils._python_dispatch.TorchDispatchMode, "
            f"which attn_helpers uses to count tensor memory and record operators: update "
            f"attn_helpers/_torch_private.py."
        ) from error

    class EagerDispatchMode(TorchDispatchMode):
        if hasattr(TorchDispatchMode, "_should_skip_dynamo"):  # an older PyTorch has no wrapping to turn off
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # never wrap __torch_dispatch__ for torch.compile

    return EagerDispatchMode


def tensors_in(tree: object) -> Iterator[torch.Tensor]:
    """The tensors in an operator's arguments or results: nested tuples, lists and dicts."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from tensors_in(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from tensors_in(item)


def written_tensors(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an operator call writes into: ``self`` of an in-place operator (``mul_``, ``copy_``, which
    ``x[i] = y`` becomes) and ``out=`` of an out variant, read from the operator's schema (``Tensor(a!)``)."""
    written = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            written.extend(tensors_in(value))
    return written


def torch_function_switch() -> type:
    """``torch._C.DisableTorchFunction``, the context manager that switches off every torch-function mode.

    A self-check records the torch functions a learner's code calls with such a mode, so leaving a ``with``
    of this class (its ``__exit__`` is the one call of it that Python's profiler reports) means that code
    ran out of the check's sight. The C functions that take modes off their stacks cannot be watched the
    same way: PyTorch calls them itself, to print a tensor or to hand a call to a mode.
    """
    if not hasattr(torch._C, "DisableTorchFunction"):  # pragma: no cover - only on a PyTorch that renamed it
        raise ImportError(f"PyTorch {torch.__version__} has no torch._C.DisableTorchFunction, which the self-checks "
                          f"watch for: update attn_helpers/_torch_private.py.")
    return torch._C.DisableTorchFunction
