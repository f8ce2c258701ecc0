"""One way for a test to assert an error message, and the words of `attn_helpers.validate`'s shared rules.

A test asserts an error through `raises_saying(ValueError, "num_heads", DOES_NOT_DIVIDE)`: the error's type
(CONTRIBUTING's exception policy: TypeError for the wrong kind of thing, ValueError for a wrong value) and
fragments its message must hold, each literally. A fragment that a shared rule words is one of the names below,
so that when a rule's wording changes this file is the one edit in the tests; `tests/test_validate_rules.py`
fails, naming this file, when validate stops saying one of them, and when a test file types one out instead.
"""

from __future__ import annotations

import re

import pytest

#: What validate.integer says of a value that is not a positive integer (minimum=1) or not >= 0 (minimum=0).
POSITIVE_INTEGER = "must be a positive integer"
NON_NEGATIVE_INTEGER = "must be a non-negative integer"
#: ... of one between two bounds (minimum and maximum), and of one with a minimum other than 0 and 1.
INTEGER_BETWEEN = "must be an integer between"
INTEGER_AT_LEAST = "must be an integer of at least"
#: What validate.real says of a value that is not a positive finite number (above=0), or not in a range.
POSITIVE_NUMBER = "must be a positive finite number"
NUMBER_IN = "must be a number in"
#: What validate.flag says of anything but True or False.
TRUE_OR_FALSE = "must be True or False"
#: What validate.even_int says of an odd width.
MUST_BE_EVEN = "must be even"
#: What the divisibility rule (validate.head_width, validate.query_groups) says.
DOES_NOT_DIVIDE = "does not divide"
#: What the key/value rule (validate.key_value_tokens) says.
ONE_VALUE_PER_KEY = "every key needs exactly one value"
#: What validate.token_ids says of a tensor that is not (b, t) ids, and of ids outside the vocabulary.
TOKEN_IDS = "tensor of integer ids"
TOKEN_RANGE = "token ids must lie in"

#: Every name above, for the tests that keep this file and validate in step.
RULE_WORDS = {name: value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)}


def raises_saying(error: type[BaseException] | tuple[type[BaseException], ...], *fragments: str):
    """`pytest.raises(error)` that also asserts that its message holds every fragment, literally and in any order."""
    return pytest.raises(error, match="(?s)" + "".join(f"(?=.*{re.escape(fragment)})" for fragment in fragments))
