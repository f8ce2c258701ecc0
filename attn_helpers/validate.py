"""Input checks shared by the helpers: each raises an error that says what was wrong and what to do.

A helper calls one of these in one line before its math, so the math reads on its own. The checks
look at the inputs only (``t·d`` numbers), never at the ``t²`` scores, so they stay cheap.
"""

from __future__ import annotations

import itertools
import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "positive_int",
    "integer",
    "positive_number",
    "sizes_list",
    "softmax_dim",
    "one_sequence_args",
    "as_float_tensor",
    "broadcast_shape",
    "attention_args",
    "head_inputs",
    "decay_rate",
    "multi_head_inputs",
    "lengths_list",
    "even_int",
    "scale_factor",
    "rope_inputs",
    "token_ids",
]


def positive_int(
    value: object, name: str, minimum: int = 1, *, maximum: int | None = None, none_ok: bool = False, why: str = ""
) -> Any:
    """``value`` as an ``int`` after checking it is a whole number ``>= minimum`` (chapters 1-7).

    Takes Python and NumPy integers and 0-d integer tensors; rejects bools, floats and strings
    with a message that shows what was passed and what to write. ``maximum`` bounds it from above;
    ``why`` (a few words) is added to the message. With ``none_ok``, ``None`` passes through unchanged.
    """
    return integer(value, name, minimum=minimum, maximum=maximum, none_ok=none_ok, why=why)


def integer(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None, none_ok: bool = False,
    why: str = "",
) -> Any:
    """``value`` as an ``int`` after checking it is a whole number in ``minimum … maximum`` (either may be None).

    The one integer check of the package (:func:`positive_int` is this with ``minimum=1``): Python and
    NumPy integers and 0-d integer tensors pass; bools, floats and strings raise a ``ValueError`` that
    says what was passed and, where it can, what to write instead.
    """
    if value is None and none_ok:
        return None
    number = _whole_number(value)
    if number is not None and (minimum is None or number >= minimum) and (maximum is None or number <= maximum):
        return number
    if maximum is not None:
        what = f"an integer between {minimum} and {maximum}" if minimum is not None else f"an integer of at most {maximum}"
    elif minimum is None:
        what = "an integer"
    else:
        what = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer of at least {minimum}")
    what += f" ({why})" if why else ""
    what += " or None" if none_ok else ""
    raise ValueError(f"{name} must be {what}, got {_described(value, name)}.")


def _whole_number(value: object) -> int | None:
    """``value`` as an ``int`` if it is a whole number (not a bool, float or string), else ``None``."""
    if isinstance(value, (bool, float)) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool"):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _described(value: object, name: str) -> str:
    """``value`` as an error message shows it: its repr, what kind of thing it is, and the fix if there is one."""
    if isinstance(value, str):
        fix = f"; pass {name}={value.strip()}" if value.strip().isdigit() and name.isidentifier() else ""
        return f"{name}={value!r} (a string){fix}"
    if _kind(value) == "a bool, not a number":
        return f"{value!r} (a bool, not a number)"
    if isinstance(value, float) and value.is_integer() and name.isidentifier():
        return f"{value!r} (a float); pass {name}={int(value)}"
    return repr(value)


def _kind(value: object) -> str:
    """What kind of thing ``value`` is, for a message: "a bool, not a number", "a float", "a str", …"""
    if isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool"):
        return "a bool, not a number"
    return f"a {type(value).__name__}"


def positive_number(value: object, name: str, *, above: float = 0.0, why: str = "") -> float:
    """``value`` as a ``float`` after checking it is a finite number ``> above`` (0 unless told), not a bool.

    Takes Python and NumPy numbers and 0-d tensors; ``why`` (a few words) is added to the message.
    """
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool:
        value = value.item()
    is_number = not isinstance(value, (bool, str, torch.Tensor)) and hasattr(value, "__float__")
    if is_number and "bool" not in str(getattr(value, "dtype", "")) and math.isfinite(float(value)) \
            and float(value) > above:
        return float(value)
    what = "a positive finite number" if above == 0 else f"a finite number larger than {above:g}"
    raise ValueError(f"{name} must be {what}{f' ({why})' if why else ''}, got {_described(value, name)}.")


def sizes_list(sizes: object, name: str = "sizes") -> list[int]:
    """Sequence lengths to measure (chapters 7 and 9): a non-empty, increasing list of positive integers.

    Python and NumPy integers pass, as in :func:`positive_int`. Returns them as a list of ``int``.
    """
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__") or isinstance(sizes, dict):
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {sizes!r}.")
    values = list(sizes)
    numbers = [_whole_number(t) for t in values]
    if not numbers or any(n is None or n < 1 for n in numbers):
        bad = next((f"; {t!r} ({_kind(t)}) is not one" for t, n in zip(values, numbers, strict=True) if n is None), "")
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {values!r}{bad}.")
    if numbers != sorted(set(numbers)):
        raise ValueError(f"{name} must be increasing without repeats, got {numbers}.")
    return numbers


def softmax_dim(x: object, dim: object) -> int:
    """The checks of :func:`attn_helpers.softmax`: ``x`` a float tensor, ``dim`` an integer within its dimensions.

    Returns ``dim`` as an ``int``. A bad ``x`` or ``dim`` type raises ``TypeError``, a ``dim`` out of range ``ValueError``.
    """
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x):
        as_float_tensor(x, "softmax input")  # raises the explanatory TypeError
    number = _whole_number(dim)
    if number is None:
        raise TypeError(f"dim must be an integer such as -1 (the last dimension), got {dim!r}.")
    if not -max(x.dim(), 1) <= number < max(x.dim(), 1):
        raise ValueError(f"dim={number} is out of range for an input of shape {tuple(x.shape)}.")
    return number


def one_sequence_args(q: object, k: object, v: object, scale: object, owner: str) -> float:
    """The checks of a function that takes one sequence, q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``
    (``owner`` names it in the message), such as :func:`attn_helpers.attention.loop_attention`; returns the scale.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        as_float_tensor(x, name, min_dim=2)
        if x.dim() != 2:
            raise ValueError(f"{owner} takes one sequence: {name} must be 2-D (t, d), got {tuple(x.shape)}.")
    if q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0]:
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)} and k {tuple(k.shape)} need the same d_k, "
            f"k and v {tuple(v.shape)} the same number of tokens."
        )
    return _scale_value(scale, q.shape[1])


def as_float_tensor(x: torch.Tensor, name: str, *, min_dim: int = 1) -> torch.Tensor:
    """Return ``x`` unchanged after checking it is a finite floating-point tensor of rank >= ``min_dim``.

    Raises ``TypeError`` for non-tensors and integer tensors, ``ValueError`` for a rank that
    is too small, an empty dimension, or NaN/inf values. One pass over ``x`` (its minimum and
    maximum, which NaN and inf reach).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(x).__name__}. "
            f"Wrap it with torch.tensor(..., dtype=torch.float32)."
        )
    if not torch.is_floating_point(x):
        raise TypeError(
            f"{name} has dtype {x.dtype}, but attention needs floating-point values "
            f"(softmax of integers is undefined). Convert it with {name}.float()."
        )
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimension(s), got shape {tuple(x.shape)}. "
            f"A sequence of t vectors of size d has shape (t, d)."
        )
    if x.numel() == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(x.shape)}): attention needs at least one token "
            f"and one feature. Check that the sentence or batch is not empty."
        )
    low, high = torch.aminmax(x.detach())  # NaN propagates to both; inf shows at one end
    if not (math.isfinite(low) and math.isfinite(high)):
        bad = "NaN" if math.isnan(low) or math.isnan(high) else "inf"
        raise ValueError(
            f"{name} contains {bad} values; attention would spread them to every output. "
            f"Find where they come from (an overflow in exp? a division by zero?) before calling this."
        )
    return x


def _same_dtype(tensors: dict[str, torch.Tensor]) -> None:
    """Check that the named tensors share one dtype; else a ``TypeError`` naming each dtype and the fix."""
    (first, reference), *rest = tensors.items()
    odd = [name for name, t in rest if t.dtype != reference.dtype]
    if odd:
        listed = ", ".join(f"{name} {t.dtype}" for name, t in tensors.items())
        fix = " and ".join(f"{name}.to({first}.dtype)" for name in odd)
        raise TypeError(
            f"{', '.join(tensors)} must share one dtype, got {listed}. Matrix products need one "
            f"dtype: convert with {fix} (or .float() on all of them)."
        )


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to, as ``torch.broadcast_shapes`` gives it, or ``None`` if they do not."""
    out = []
    for sizes in itertools.zip_longest(*(reversed(s) for s in shapes), fillvalue=1):
        big = set(sizes) - {1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(reversed(out))


def decay_rate(value: object, name: str = "decay") -> float:
    """``value`` as a float after checking it is a real number in (0, 1] (chapter 12's decay γ).

    Rejects bools, strings, tensors of more than one number, and numbers outside (0, 1].
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, (bool, str, torch.Tensor)) or not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number in (0, 1], got {value!r} ({type(value).__name__}); 1 means no decay.")
    number = float(value)
    if not 0 < number <= 1:
        raise ValueError(f"{name} must lie in (0, 1], got {number!r}: each step multiplies the state by it, "
                         f"so 1 keeps everything and 0.9 forgets a tenth a token.")
    return number


def _broadcastable(*shapes: tuple[int, ...]) -> bool:
    """True if the shapes broadcast together, as in ``torch.broadcast_shapes`` (without its slow first import)."""
    return broadcast_shape(*shapes) is not None


def _scale_value(scale: object, d_k: int) -> float:
    """The attention scale as a float: ``1/sqrt(d_k)`` for ``None``, else a positive finite number.

    A 0-d tensor (such as ``dk ** -0.5`` with ``dk = torch.tensor(50)``) is taken as its value;
    a bool is rejected (``True`` is not a scale).
    """
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, torch.Tensor) and scale.dim() == 0 and scale.dtype != torch.bool:
        scale = scale.item()
    if isinstance(scale, bool) or not hasattr(scale, "__float__") or isinstance(scale, (str, torch.Tensor)):
        kind = "a bool" if isinstance(scale, bool) else type(scale).__name__
        raise TypeError(
            f"scale must be a positive finite number, got {scale!r} ({kind}). Leave it out for "
            f"1/sqrt(d_k), or pass a number such as scale=1.0 for the raw dot products."
        )
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}.")
    return value


def _attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The checks of :func:`attn_helpers.attention`: q ``(..., t_q, d_k)``, k ``(..., t_k, d_k)``, v ``(..., t_k, d_v)``.

    Finite float tensors of one dtype, matching ``d_k`` and ``t_k``, leading dimensions that broadcast.
    """
    for name, t in (("queries", q), ("keys", k), ("values", v)):
        as_float_tensor(t, name, min_dim=2)
    _same_dtype({"queries": q, "keys": k, "values": v})
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries have d_k={q.shape[-1]} features but keys have {k.shape[-1]}: "
            f"the dot product q·k needs the same last dimension (q {tuple(q.shape)}, k {tuple(k.shape)})."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys describe {k.shape[-2]} tokens but values describe {v.shape[-2]}: "
            f"every key needs exactly one value (k {tuple(k.shape)}, v {tuple(v.shape)})."
        )
    if not _broadcastable(q.shape[:-2], k.shape[:-2], v.shape[:-2]):
        raise ValueError(
            f"the leading (batch) dimensions {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])} and "
            f"{tuple(v.shape[:-2])} of queries, keys and values do not broadcast together."
        )


def attention_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: object, scale: object) -> float:
    """All the checks of :func:`attn_helpers.attention` in one call; returns the scale as a float."""
    _attention_inputs(q, k, v)
    if mask is not None:
        batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        _attention_mask(mask, (*batch, q.shape[-2], k.shape[-2]))
    return _scale_value(scale, q.shape[-1])


def _attention_mask(mask: object, scores_shape: tuple[int, ...]) -> None:
    """Check a mask for scores of shape ``(..., t_q, t_k)``: bool (True = may attend) or additive float.

    It must broadcast to the scores without making them bigger: a mask may not add batch dimensions
    (or sizes) that the queries, keys and values do not have. A float mask may hold finite numbers and
    ``-inf``, not NaN or ``+inf``.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    together = broadcast_shape(mask.shape, scores_shape)
    if together is None:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (..., t_q, t_k); the last two dimensions must be "
            f"(t_q, t_k) = {tuple(scores_shape[-2:])} or 1."
        )
    if together != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} would turn the scores of shape {tuple(scores_shape)} into a "
            f"batch of shape {together}: a mask may not add batch dimensions that the queries, keys and values "
            f"do not have. For one sequence pass a (t_q, t_k) = {tuple(scores_shape[-2:])} mask; for several "
            f"sequences, stack them so that the inputs have the batch dimension, shape {together[:-2]} + (t, d)."
        )
    if mask.dtype == torch.bool:
        return
    if not torch.is_floating_point(mask):
        raise TypeError(
            f"mask has dtype {mask.dtype}; use a bool mask (True = may attend) or an additive float "
            f"mask (0 = may attend, -inf = blocked). For a 0/1 integer mask write mask.bool()."
        )
    if mask.numel() and not mask.detach().amax() < math.inf:  # amax is NaN if any entry is NaN
        raise ValueError("an additive float mask may hold finite numbers and -inf, not NaN or +inf.")


def _module_input(x: object, name: str, d_model: int, dtype: torch.dtype, *, min_dim: int = 1) -> None:
    """Input ``x`` ``(..., d_model)`` of a module whose weights have ``dtype`` (chapters 4-5)."""
    as_float_tensor(x, name, min_dim=min_dim)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has {x.shape[-1]} features (shape {tuple(x.shape)}) but the module was built "
            f"with d_model={d_model}: the last dimension must be d_model. Build the module with "
            f"d_model={x.shape[-1]}, or check that you did not pass a transposed tensor."
        )
    if x.dtype != dtype:
        fix = {torch.float32: ".float()", torch.float64: ".double()"}.get(dtype, f".to({dtype})")
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's weights are {dtype}. Convert the input with "
            f"{name}{fix}, or the module with module.to({x.dtype})."
        )


def _module_mask(mask: object, weights_shape: tuple[int, ...]) -> None:
    """A module's mask must broadcast to its weights ``weights_shape`` without making them bigger (adding a batch)."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}.")
    fits = mask.dim() <= len(weights_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(weights_shape), strict=False)
    )
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention weights' shape "
            f"{tuple(weights_shape)}. Use a (t_q, t_k) = {tuple(weights_shape[-2:])} mask for every "
            f"sequence, or give it size-1 dimensions where it is shared, e.g. mask[:, None] for one "
            f"(t_q, t_k) mask per sequence of a batch."
        )


def head_inputs(head: Any, x: object, mask: object) -> None:
    """The checks of ``SelfAttentionHead.forward``: ``x`` ``(..., t, d_model)``, mask for ``(..., t, t)``."""
    _module_input(x, "x", head.d_model, head.W_q.weight.dtype, min_dim=2)
    t = x.shape[-2]
    _module_mask(mask, (*x.shape[:-2], t, t))


def multi_head_inputs(mha: Any, query: object, key: object, value: object, mask: object) -> None:
    """The checks of ``MultiHeadAttention.forward``: ``(t, d_model)`` or ``(b, t, d_model)`` inputs, one mask."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        as_float_tensor(x, name)
        if x.dim() not in (2, 3):
            raise ValueError(
                f"{name} must have shape (t, d_model) or (b, t, d_model), got {tuple(x.shape)}. "
                f"Add a batch dimension with x.unsqueeze(0), or flatten extra leading dimensions."
            )
        _module_input(x, name, mha.d_model, mha.W_q.weight.dtype)
    if not query.dim() == key.dim() == value.dim():
        raise ValueError(
            f"query, key and value must all be batched (3-D) or all unbatched (2-D); got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}."
        )
    unbatched = query.dim() == 2
    b_q, b_k, b_v = (1, 1, 1) if unbatched else (query.shape[0], key.shape[0], value.shape[0])
    if not b_q == b_k == b_v:
        raise ValueError(
            f"query, key and value hold different numbers of sequences (batch sizes "
            f"{b_q}, {b_k}, {b_v}); they must be equal."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key has {key.shape[-2]} tokens but value has {value.shape[-2]}: every key needs "
            f"exactly one value."
        )
    if mask is None:
        return
    if isinstance(mask, torch.Tensor) and unbatched and mask.dim() == 4:
        raise ValueError(
            f"a 4-D mask {tuple(mask.shape)} needs batched (b, t, d_model) input; "
            f"for a single sequence use a (t_q, t_k) or (h, t_q, t_k) mask."
        )
    if isinstance(mask, torch.Tensor) and not unbatched and mask.dim() == 3 and mask.shape[0] != 1:
        raise ValueError(
            f"a 3-D mask {tuple(mask.shape)} is ambiguous for batched input: the weights "
            f"have shape (b, h, t_q, t_k). Write mask[:, None] for one mask per sequence "
            f"(b, 1, t_q, t_k) or mask[None] for one per head (1, h, t_q, t_k)."
        )
    _module_mask(mask, (b_q, mha.num_heads, query.shape[-2], key.shape[-2]))


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
    return [positive_int(n, "every length", 0) for n in lengths]


def even_int(value: object, name: str) -> int:
    """``value`` as an ``int`` after checking it is a positive even number, such as RoPE's width (chapter 11)."""
    number = positive_int(value, name)
    if number % 2:
        raise ValueError(
            f"{name} must be even, got {number}: RoPE turns the features in pairs, one pair per frequency. "
            f"Use an even {name} (e.g. {number + 1})."
        )
    return number


def scale_factor(value: object, name: str) -> float:
    """``value`` as a float after checking it is a finite number ``>= 1``: how many times longer (chapter 11)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value >= 1
    if not ok:
        raise ValueError(
            f"{name} must be a number of at least 1 (the new length over the trained one, e.g. 4 for 4 times "
            f"longer), got {value!r}."
        )
    return float(value)


def rope_inputs(x: object, positions: object, theta: object) -> tuple[int, int]:
    """The checks of RoPE with given frequencies: ``x`` ``(..., t, d)``, positions ``(t,)`` or None, theta ``(d/2,)``.

    Returns ``(t, d)`` (chapter 11).
    """
    as_float_tensor(x, "x", min_dim=2)
    t, d = x.shape[-2], even_int(x.shape[-1], "the last dimension of x")
    if not isinstance(theta, torch.Tensor) or theta.shape != (d // 2,) or not torch.is_floating_point(theta):
        raise ValueError(f"theta must be a float tensor of d/2 = {d // 2} frequencies, one per pair of "
                         f"features, got {getattr(theta, 'shape', theta)!r}.")
    if positions is not None:
        p = torch.as_tensor(positions)
        if p.dtype == torch.bool or torch.is_complex(p) or p.shape != (t,):
            raise ValueError(f"positions must hold t = {t} numbers, one per row of x, got shape {tuple(p.shape)}. "
                             f"For 0, 1, …, t-1 leave it out.")
    return t, d


def token_ids(tokens: object, vocab_size: int) -> tuple[int, int]:
    """Check a ``(b, t)`` tensor of token ids (``torch.long``) in ``0 … vocab_size - 1``; returns ``(b, t)`` (chapter 11)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long or tokens.dim() != 2 or tokens.numel() == 0:
        raise ValueError(f"tokens must be a non-empty (b, t) tensor of integer ids (torch.long), got "
                         f"{getattr(tokens, 'shape', type(tokens).__name__)} {getattr(tokens, 'dtype', '')}.")
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(f"token ids must lie in 0 … {vocab_size - 1} (the model's vocab_size is {vocab_size}), got ids "
                         f"{int(tokens.min())} … {int(tokens.max())}.")
    return tokens.shape[0], tokens.shape[1]
