"""Input checks shared by the helpers (every chapter): each raises an error that says what was wrong and what to do.

A helper calls one of these in one line before its math, so the math reads on its own. The checks
look at the inputs only (``t·d`` numbers), never at the ``t²`` scores, so they stay cheap. They are
the package's shared rules, filed by what they check, and every one is reached as ``validate.<name>``:

- ``_numbers``: single numbers and lists of them (:func:`integer`, :func:`real`, :func:`flag`, :func:`sizes_list`, …);
- ``_tensors``: tensors and attention's inputs (:func:`as_float_tensor`, :func:`key_value_tokens`,
  :func:`attention_args`, …);
- ``_modules``: the inputs of the attention modules, head counts, RoPE and token ids (:func:`head_width`,
  :func:`query_groups`, :func:`token_ids`, …).

A check that only one function needs lives beside it, as a private function built from these rules
(``attention._softmax_dim``, ``modules._multi_head_inputs``, …).

The exception policy, followed by every check in ``attn_helpers``:

- ``TypeError`` for the wrong kind of thing: a string, bool, float or None where a whole number goes, a string
  where a number goes, a list where a tensor goes, a tensor of the wrong dtype, a number where a list goes;
- ``ValueError`` for a wrong value of the right kind: a number out of range, NaN or inf, a tensor of the wrong
  shape or size, an empty list, sizes that do not divide, a name that is not among a setting's choices.

``tests/messages.py`` holds the words of these rules that the tests assert.
"""

from __future__ import annotations

from ._modules import (
    head_inputs,
    head_width,
    module_input,
    module_mask,
    query_groups,
    token_ids,
)
from ._numbers import (
    even_int,
    flag,
    integer,
    probabilities,
    real,
    sizes_list,
    whole_number,
)
from ._tensors import (
    as_float_tensor,
    attention_args,
    key_value_tokens,
    one_sequence_args,
    tiled_attention_args,
)

__all__ = [
    "integer",
    "whole_number",
    "real",
    "sizes_list",
    "one_sequence_args",
    "as_float_tensor",
    "key_value_tokens",
    "attention_args",
    "tiled_attention_args",
    "module_input",
    "module_mask",
    "head_inputs",
    "head_width",
    "query_groups",
    "even_int",
    "token_ids",
    "flag",
    "probabilities",
]
