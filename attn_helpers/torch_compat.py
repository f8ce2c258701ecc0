"""Move weights between the book's ``MultiHeadAttention`` and ``torch.nn.MultiheadAttention`` (chapter 6).

Both store the query, key and value projections in the same layout: ``nn.MultiheadAttention``
stacks them in ``in_proj_weight`` ``(3·d_model, d_model)`` (rows ``0:d`` for queries, ``d:2d``
for keys, ``2d:3d`` for values) and the book keeps them as ``W_q``, ``W_k`` and ``W_v``, each
``(d_model, d_model)``; ``out_proj`` is the book's ``W_o``. Head ``i`` uses rows
``i·d_k:(i+1)·d_k`` of each block in both. So copying is a matter of slicing, and the two
modules then compute the same function. :func:`aten_operators` lists the operators a call runs, which
shows the path ``nn.MultiheadAttention`` takes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from . import validate
from ._torch_private import dispatch_mode_base
from .modules import MultiHeadAttention

__all__ = ["copy_to_torch_mha", "copy_from_torch_mha", "to_torch_mha", "from_torch_mha", "aten_operators"]


class _OperatorNames(dispatch_mode_base()):
    """Records the name of every ATen operator that runs while active."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.names.append(func.name().removeprefix("aten::"))
        return func(*args, **(kwargs or {}))


def aten_operators(fn: Callable[..., object], *args: object, **kwargs: object) -> list[str]:
    """The ATen operators that one call ``fn(*args, **kwargs)`` runs, in order, without the ``aten::`` prefix
    (chapter 6): ``["_scaled_dot_product_flash_attention_for_cpu"]`` for SDPA's default on the CPU.

    It watches below autograd, where PyTorch dispatches each operator, so it changes no path a module takes
    (a ``TorchFunctionMode`` would: ``nn.MultiheadAttention`` leaves its fast path when one is active).
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function or module to call, got {type(fn).__name__}.")
    with _OperatorNames() as recorder:
        fn(*args, **kwargs)
    return recorder.names


def _check_book(book: object) -> None:
    if not isinstance(book, MultiHeadAttention):
        raise TypeError(
            f"expected the book's attn_helpers.MultiHeadAttention, got {type(book).__name__}. "
            f"A single head is MultiHeadAttention(d_model, num_heads=1)."
        )


def _check_torch(mha: object) -> None:
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"expected a torch.nn.MultiheadAttention, got {type(mha).__name__}.")
    if not mha.kdim == mha.vdim == mha.embed_dim:
        raise ValueError(
            f"this nn.MultiheadAttention has kdim={mha.kdim}, vdim={mha.vdim} different from "
            f"embed_dim={mha.embed_dim}, so it keeps separate q/k/v projections of other sizes; the "
            f"book's module has none. Build it without kdim/vdim."
        )
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError(
            "this nn.MultiheadAttention was built with add_bias_kv=True or add_zero_attn=True, which "
            "append extra keys the book's module does not have. Build it without them."
        )
    validate.head_width(mha.embed_dim, mha.num_heads)  # its embed_dim is the book's d_model


def _check_pair(book: object, mha: object) -> None:
    _check_book(book)
    _check_torch(mha)
    if mha.embed_dim != book.d_model:
        raise ValueError(
            f"sizes differ: nn.MultiheadAttention has embed_dim={mha.embed_dim} but the book's module "
            f"has d_model={book.d_model}. Build both with the same model width."
        )
    if mha.num_heads != book.num_heads:
        raise ValueError(
            f"head counts differ: nn.MultiheadAttention has num_heads={mha.num_heads}, the book's module "
            f"{book.num_heads}. The weights would be split into heads differently; use the same count."
        )
    torch_bias, book_bias = mha.in_proj_bias is not None, book.W_q.bias is not None
    if torch_bias != book_bias:
        raise ValueError(
            f"bias settings differ: nn.MultiheadAttention has bias={torch_bias}, the book's module "
            f"bias={book_bias}. Build both with the same bias=... so every parameter has a partner."
        )


@torch.no_grad()
def copy_to_torch_mha(book: MultiHeadAttention, mha: nn.MultiheadAttention) -> nn.MultiheadAttention:
    """Copy the book's module's weights into an existing ``nn.MultiheadAttention`` (in place; chapter 6); returns it."""
    _check_pair(book, mha)
    d = book.d_model
    for i, linear in enumerate((book.W_q, book.W_k, book.W_v)):
        mha.in_proj_weight[i * d:(i + 1) * d].copy_(linear.weight)  # (d, d) block i of (3d, d)
        if mha.in_proj_bias is not None:
            mha.in_proj_bias[i * d:(i + 1) * d].copy_(linear.bias)
    mha.out_proj.weight.copy_(book.W_o.weight)
    if mha.out_proj.bias is not None:
        mha.out_proj.bias.copy_(book.W_o.bias)
    return mha


@torch.no_grad()
def copy_from_torch_mha(mha: nn.MultiheadAttention, book: MultiHeadAttention) -> MultiHeadAttention:
    """Copy an ``nn.MultiheadAttention``'s weights into the book's module (in place; chapter 6); returns it."""
    _check_pair(book, mha)
    d = book.d_model
    for i, linear in enumerate((book.W_q, book.W_k, book.W_v)):
        linear.weight.copy_(mha.in_proj_weight[i * d:(i + 1) * d])
        if linear.bias is not None:
            linear.bias.copy_(mha.in_proj_bias[i * d:(i + 1) * d])
    book.W_o.weight.copy_(mha.out_proj.weight)
    if book.W_o.bias is not None:
        book.W_o.bias.copy_(mha.out_proj.bias)
    return book


def to_torch_mha(book: MultiHeadAttention) -> nn.MultiheadAttention:
    """A new ``nn.MultiheadAttention(d_model, num_heads, bias=..., batch_first=True)`` with the book's weights
    (chapter 6).

    Then ``mha(x, x, x, average_attn_weights=False)`` returns the same ``(out, weights)`` as
    ``book(x)`` for ``x`` of shape ``(b, t, d_model)``.
    """
    _check_book(book)
    mha = nn.MultiheadAttention(book.d_model, book.num_heads, bias=book.W_q.bias is not None, batch_first=True)
    return copy_to_torch_mha(book, mha.to(book.W_q.weight.dtype))


def from_torch_mha(mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """A new book ``MultiHeadAttention`` with the weights of ``mha``, whatever its ``batch_first`` (chapter 6)."""
    _check_torch(mha)
    book = MultiHeadAttention(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None)
    return copy_from_torch_mha(mha, book.to(mha.out_proj.weight.dtype))
