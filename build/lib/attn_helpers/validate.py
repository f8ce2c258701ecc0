"""Input checks shared by the helpers: each raises an error that says what was wrong and what to do."""

from __future__ import annotations

import torch


def as_float_tensor(x: torch.Tensor, name: str, *, min_dim: int = 1) -> torch.Tensor:
    """Return ``x`` unchanged after checking it is a finite floating-point tensor of rank >= ``min_dim``.

    Raises ``TypeError`` for non-tensors and integer tensors, ``ValueError`` for a rank that
    is too small, an empty dimension, or NaN/inf values.
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
    if not torch.isfinite(x).all():
        bad = "NaN" if torch.isnan(x).any() else "inf"
        raise ValueError(
            f"{name} contains {bad} values; attention would spread them to every output. "
            f"Find where they come from (an overflow in exp? a division by zero?) before calling this."
        )
    return x
