"""Checks of tensors and of attention's inputs: q, k, v, a mask, the scale (chapters 1, 2, 5, 7 and 10)."""

from __future__ import annotations

import itertools
import math

import torch

from ._numbers import flag, integer, real


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


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to, as ``torch.broadcast_shapes`` gives it, or ``None`` if they do not."""
    out = []
    for sizes in itertools.zip_longest(*(reversed(s) for s in shapes), fillvalue=1):
        big = set(sizes) - {1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(reversed(out))


def _broadcastable(*shapes: tuple[int, ...]) -> bool:
    """True if the shapes broadcast together, as in ``torch.broadcast_shapes`` (without its slow first import)."""
    return _broadcast_shape(*shapes) is not None


def _scale_value(scale: object, d_k: int) -> float:
    """The attention scale as a float: ``1/sqrt(d_k)`` for ``None``, else a positive finite number (:func:`real`)."""
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    return real(scale, "scale", above=0, why="leave it out for 1/sqrt(d_k), or pass scale=1.0 for the raw dot products")


def key_value_tokens(k: torch.Tensor, v: torch.Tensor, keys: str = "keys", values: str = "values") -> int:
    """The key/value rule (chapters 1, 2, 5 and 9): k ``(..., t_k, d_k)`` and v ``(..., t_k, d_v)`` describe the same
    ``t_k`` tokens, one value per key; returns ``t_k``. ``keys`` and ``values`` name them in the message."""
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{keys} describe {k.shape[-2]} tokens but {values} describe {v.shape[-2]}: every key needs exactly "
            f"one value ({keys} {tuple(k.shape)}, {values} {tuple(v.shape)})."
        )
    return k.shape[-2]


def one_sequence_args(q: object, k: object, v: object, scale: object, owner: str) -> float:
    """The checks of a function that takes one sequence, q ``(t_q, d_k)``, k ``(t_k, d_k)``, v ``(t_k, d_v)``
    (``owner`` names it in the message), such as :func:`attn_helpers.attention.loop_attention`; returns the scale.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        as_float_tensor(x, name, min_dim=2)
        if x.dim() != 2:
            raise ValueError(f"{owner} takes one sequence: {name} must be 2-D (t, d), got {tuple(x.shape)}.")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"shapes do not fit: q {tuple(q.shape)} and k {tuple(k.shape)} need the same d_k.")
    key_value_tokens(k, v)
    return _scale_value(scale, q.shape[1])


def _attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The checks of :func:`attn_helpers.attention`: q ``(..., t_q, d_k)``, k ``(..., t_k, d_k)``,
    v ``(..., t_k, d_v)``.

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
    key_value_tokens(k, v)
    if not _broadcastable(q.shape[:-2], k.shape[:-2], v.shape[:-2]):
        raise ValueError(
            f"the leading (batch) dimensions {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])} and "
            f"{tuple(v.shape[:-2])} of queries, keys and values do not broadcast together."
        )


def attention_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: object, scale: object) -> float:
    """All the checks of :func:`attn_helpers.attention` in one call; returns the scale as a float."""
    _attention_inputs(q, k, v)
    if mask is not None:
        batch = _broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
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
    together = _broadcast_shape(mask.shape, scores_shape)
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


def tiled_attention_args(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: object, causal: object, block_q: object, block_k: object,
    scale: object,
) -> tuple[float, torch.Tensor | None]:
    """The checks of chapter 10's tiled passes; returns the scale and the mask expanded to ``(..., t_q, t_k)`` (a view).

    As :func:`attention_args`, and: q, k and v with the same leading dimensions, ``causal`` a bool with
    ``t_k >= t_q``, positive block sizes, and a bool mask (True = may attend) that adds no dimensions.
    """
    scale = attention_args(q, k, v, None, scale)  # float tensors of one dtype, d_k and t_k that match
    integer(block_q, "block_q", minimum=1)
    integer(block_k, "block_k", minimum=1)
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(f"the tiled passes take queries, keys and values with the same leading dimensions, got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}. Expand them first, e.g. "
                         f"k.expand(*q.shape[:-2], *k.shape[-2:]).")
    flag(causal, "causal")
    if causal and q.shape[-2] > k.shape[-2]:
        raise ValueError(f"causal=True with t_q={q.shape[-2]} queries but t_k={k.shape[-2]} keys: the queries sit at "
                         "the end of the sequence, so the first ones would have no key. Use t_k >= t_q.")
    if mask is None:
        return scale, None
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"the tiled passes take a bool mask (True = may attend), got {getattr(mask, 'dtype', mask)!r}; "
                        "turn an additive mask into one with mask == 0.")
    scores = (*q.shape[:-2], q.shape[-2], k.shape[-2])
    if _broadcast_shape(mask.shape, scores) != scores:
        raise ValueError(f"a mask of shape {tuple(mask.shape)} cannot be cut into the tiles of scores of shape "
                         f"{scores}: its last two dimensions must be (t_q, t_k) = {scores[-2:]} (or 1), and it may "
                         f"not add leading dimensions that q, k and v do not have.")
    return scale, mask.expand(scores)
