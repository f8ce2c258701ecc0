"""Input checks shared by the helpers (every chapter): each raises an error that says what was wrong and what to do.

A helper calls one of these in one line before its math, so the math reads on its own. The checks
look at the inputs only (``t·d`` numbers), never at the ``t²`` scores, so they stay cheap. They are
filed by what they check, and every one is reached as ``validate.<name>``:

- ``_numbers``: single numbers and lists of them (:func:`integer`, :func:`real`, :func:`flag`, :func:`sizes_list`, …);
- ``_tensors``: tensors and attention's inputs (:func:`as_float_tensor`, :func:`attention_args`, …);
- ``_modules``: the inputs of the attention modules, head counts, RoPE and token ids (:func:`head_width`, …).
"""

from __future__ import annotations

from ._modules import (
    head_inputs,
    head_width,
    multi_head_inputs,
    ring_write,
    rope_inputs,
    token_ids,
)
from ._numbers import (
    even_int,
    flag,
    integer,
    lengths_list,
    probabilities,
    real,
    real_number,
    sizes_list,
    whole_number,
)
from ._tensors import (
    as_float_tensor,
    attention_args,
    broadcast_shape,
    one_sequence_args,
    softmax_dim,
    tiled_attention_args,
)

__all__ = [
    "integer",
    "whole_number",
    "real",
    "real_number",
    "sizes_list",
    "softmax_dim",
    "one_sequence_args",
    "as_float_tensor",
    "broadcast_shape",
    "attention_args",
    "tiled_attention_args",
    "head_inputs",
    "head_width",
    "multi_head_inputs",
    "lengths_list",
    "even_int",
    "rope_inputs",
    "ring_write",
    "token_ids",
    "flag",
    "probabilities",
]
