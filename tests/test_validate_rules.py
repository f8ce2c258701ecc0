"""The steps of "Changing an input rule" (CONTRIBUTING), each caught with a sentence that says what to do.

`attn_helpers.validate` holds the rules the package shares; each raises per the exception policy of its
docstring (TypeError for the wrong kind of thing, ValueError for a wrong value of the right kind), each has a
caller outside validate and a test, no module writes its own copy of a rule, and the tests assert a rule's
words through `tests/messages.py` alone.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import messages
import pytest
import torch

import attn_helpers as ah
from attn_helpers import validate

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attn_helpers"
RULES = PACKAGE / "validate"
STEPS = "(CONTRIBUTING.md, 'Changing an input rule')"


def _t(*shape: int) -> torch.Tensor:
    return torch.ones(*shape)


_HEAD = ah.SelfAttentionHead(4, 2)

#: Each public rule of validate: a call with the wrong kind of input (it must raise TypeError), or the reason it
#: has none, and a call with a wrong value (it must raise ValueError), or the reason it has none.
POLICY = {
    "integer": (lambda: validate.integer("3", "n"), lambda: validate.integer(0, "n", minimum=1)),
    "real": (lambda: validate.real("x", "x"), lambda: validate.real(math.nan, "x")),
    "flag": (lambda: validate.flag("no", "causal"), "every bool is a right value"),
    "even_int": (lambda: validate.even_int("4", "d"), lambda: validate.even_int(5, "d")),
    "sizes_list": (lambda: validate.sizes_list(4), lambda: validate.sizes_list([])),
    "probabilities": (lambda: validate.probabilities("ab", "p"), lambda: validate.probabilities([0.5, 0.25], "p")),
    "as_float_tensor": (lambda: validate.as_float_tensor([1.0], "x"),
                        lambda: validate.as_float_tensor(torch.tensor([math.nan]), "x")),
    "key_value_tokens": ("its caller checks that k and v are tensors first (validate.as_float_tensor)",
                         lambda: validate.key_value_tokens(_t(4, 3), _t(5, 3))),
    "one_sequence_args": (lambda: validate.one_sequence_args([[1.0]], _t(1, 1), _t(1, 1), None, "f"),
                          lambda: validate.one_sequence_args(_t(2, 3), _t(4, 3), _t(5, 2), None, "f")),
    "attention_args": (lambda: validate.attention_args(_t(2, 3), _t(4, 3), _t(4, 2), "causal", None),
                       lambda: validate.attention_args(_t(2, 3), _t(4, 3), _t(4, 2), None, -1.0)),
    "tiled_attention_args": (lambda: validate.tiled_attention_args(_t(2, 3), _t(4, 3), _t(4, 2), None, 1, 2, 2, None),
                             lambda: validate.tiled_attention_args(_t(2, 3), _t(4, 3), _t(4, 2), None, False, 0, 2,
                                                                   None)),
    "module_input": (lambda: validate.module_input([1.0], "x", 4, torch.float32),
                     lambda: validate.module_input(_t(2, 3), "x", 4, torch.float32)),
    "module_mask": (lambda: validate.module_mask([[True]], (2, 2)),
                    lambda: validate.module_mask(torch.ones(3, 3, dtype=torch.bool), (2, 2))),
    "head_inputs": (lambda: validate.head_inputs(_HEAD, [1.0], None),
                    lambda: validate.head_inputs(_HEAD, _t(3, 5), None)),
    "head_width": ("its caller checks that the sizes are ints first (validate.integer)",
                   lambda: validate.head_width(12, 5)),
    "query_groups": ("its caller checks that the head counts are ints first (validate.integer)",
                     lambda: validate.query_groups(4, 3)),
    "token_ids": (lambda: validate.token_ids(_t(1, 2), 5), lambda: validate.token_ids(torch.tensor([[7]]), 5)),
}
#: The tests behind the rules, for a caller that words its own message: they return None and raise nothing.
TESTS = {
    "whole_number": lambda: validate.whole_number("3"),
}


def test_every_public_name_of_validate_has_a_row_here():
    for name in validate.__all__:
        assert name in POLICY or name in TESTS, (
            f"validate.{name} has no row in POLICY of tests/test_validate_rules.py: add a call with the wrong kind "
            f"of input (it must raise TypeError) and one with a wrong value (ValueError) {STEPS}.")
    for name in (*POLICY, *TESTS):
        assert name in validate.__all__, (
            f"POLICY or TESTS of tests/test_validate_rules.py has a row for validate.{name}, which validate no longer "
            f"exports (moved beside its caller, or gone): delete the row.")


@pytest.mark.parametrize("name", sorted(POLICY))
def test_every_rule_raises_a_type_error_for_the_wrong_kind_and_a_value_error_for_a_wrong_value(name):
    for call, error in zip(POLICY[name], (TypeError, ValueError), strict=True):
        if isinstance(call, str):
            continue  # the reason it has no such input, stated in its row
        try:
            call()
        except (TypeError, ValueError) as raised:
            assert type(raised) is error, (
                f"validate.{name} raised {type(raised).__name__} for "
                f"{'the wrong kind of input' if error is TypeError else 'a wrong value'}: the policy in "
                f"attn_helpers/validate/__init__.py wants {error.__name__}. Raise {error.__name__} there {STEPS}.")
        else:
            raise AssertionError(f"validate.{name} accepted the {'wrong kind' if error is TypeError else 'wrong value'}"
                                 f" of its row in POLICY: check it, or correct the row.")


@pytest.mark.parametrize("name", sorted(TESTS))
def test_the_tests_behind_the_rules_return_none(name):
    assert TESTS[name]() is None, f"validate.{name} is a test for a caller that words its own message: return None."


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if ".ipynb_checkpoints" not in p.parts)


def _uses(source: str, name: str) -> bool:
    """Whether ``source`` calls validate's ``name``: ``validate.name`` or a ``from .validate import`` of it."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == name and getattr(node.value, "id", "") == "validate":
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("validate") \
                and any(alias.name == name for alias in node.names):
            return True
    return False


def test_every_rule_has_a_caller_outside_validate_and_a_test():
    package = {p: p.read_text() for p in _python_files(PACKAGE) if RULES not in p.parents}
    tests = {p: p.read_text() for p in _python_files(ROOT / "tests") if p.name != Path(__file__).name}
    for name in validate.__all__:
        assert any(_uses(source, name) for source in package.values()), (
            f"validate.{name} has no caller outside attn_helpers/validate. A rule is shared: a check only one function "
            f"needs lives beside that function as a private function built from the rules; move it there, or delete "
            f"it {STEPS}.")
        assert any(_uses(source, name) for source in tests.values()), (
            f"validate.{name} has no test: add one to tests/test_validate.py that calls it with good and bad input "
            f"{STEPS}.")


def _raised(node: ast.Raise) -> str:
    call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return getattr(call, "id", "")


def test_every_raise_in_validate_is_a_type_error_or_a_value_error():
    for path in _python_files(RULES):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                assert _raised(node) in ("TypeError", "ValueError", "error"), (
                    f"{path.relative_to(ROOT)}:{node.lineno} raises {_raised(node)}: a rule raises TypeError for the "
                    f"wrong kind of input and ValueError for a wrong value, and nothing else {STEPS}.")


def _rule_it_rewrites(test: ast.expr) -> str | None:
    """The rule that the condition ``test`` of an ``if … raise`` writes again, or None."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return "the divisibility rule: call validate.head_width or validate.query_groups (validate.even_int for " \
                   "an even width)"
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" and len(node.args) == 2:
            kinds = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
            if kinds & {"bool", "int", "float", "Integral", "Real", "Number", "bool_"}:
                return "a number or bool check: call validate.integer, validate.real or validate.flag"
        if isinstance(node, ast.Attribute) and node.attr in ("isfinite", "isnan", "isinf") \
                and getattr(node.value, "id", "") == "math":
            return "the real-number rule: call validate.real"
        if isinstance(node, ast.Compare) and len(node.comparators) == 1 and all(
                _token_count(side) for side in (node.left, node.comparators[0])):
            return "the key/value rule: call validate.key_value_tokens"
    return None


def _token_count(node: ast.expr) -> bool:
    """True for ``x.shape[-2]``: the number of tokens of keys or values."""
    return isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "shape" \
        and ast.unparse(node.slice) == "-2"


def test_no_module_writes_a_rule_of_validate_again():
    for path in _python_files(PACKAGE):
        if RULES in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.If):
                continue
            raises = [s for s in node.body if isinstance(s, ast.Raise) and _raised(s) in ("TypeError", "ValueError")]
            rule = _rule_it_rewrites(node.test) if raises else None
            assert rule is None, (
                f"{path.relative_to(ROOT)}:{node.lineno} checks its input itself and raises with its own words, "
                f"which is {rule} instead, so that the rule and its message live in one place {STEPS}.")


#: A call whose message holds each of tests/messages.py's words.
SAID_BY = {
    "POSITIVE_INTEGER": lambda: validate.integer(0, "n", minimum=1),
    "NON_NEGATIVE_INTEGER": lambda: validate.integer(-1, "n", minimum=0),
    "INTEGER_BETWEEN": lambda: validate.integer(9, "n", minimum=1, maximum=4),
    "INTEGER_AT_LEAST": lambda: validate.integer(1, "n", minimum=2),
    "POSITIVE_NUMBER": lambda: validate.real(0, "x", above=0),
    "NUMBER_IN": lambda: validate.real(2, "x", above=0, at_most=1),
    "TRUE_OR_FALSE": lambda: validate.flag("no", "x"),
    "MUST_BE_EVEN": lambda: validate.even_int(3, "d"),
    "DOES_NOT_DIVIDE": lambda: validate.query_groups(4, 3),
    "ONE_VALUE_PER_KEY": lambda: validate.key_value_tokens(_t(4, 3), _t(5, 3)),
    "TOKEN_IDS": lambda: validate.token_ids(_t(1, 2), 5),
    "TOKEN_RANGE": lambda: validate.token_ids(torch.tensor([[7]]), 5),
}


@pytest.mark.parametrize("name", sorted(messages.RULE_WORDS))
def test_the_words_in_tests_messages_are_what_validate_says(name):
    assert name in SAID_BY, (f"tests/messages.py's {name} has no call in SAID_BY of tests/test_validate_rules.py: add "
                             f"one whose message holds it.")
    with pytest.raises((TypeError, ValueError)) as raised:
        SAID_BY[name]()
    assert messages.RULE_WORDS[name] in str(raised.value), (
        f"validate no longer says {messages.RULE_WORDS[name]!r} ({name} of tests/messages.py); it says "
        f"{str(raised.value)!r}. Put the new words in tests/messages.py, the one place the tests keep them {STEPS}.")


def test_tests_assert_a_rules_words_through_tests_messages_only():
    for path in _python_files(ROOT / "tests"):
        if path.name in ("messages.py", Path(__file__).name):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name, words in messages.RULE_WORDS.items():
                    assert words not in node.value, (
                        f"{path.relative_to(ROOT)}:{node.lineno} types {words!r}, words of a rule of validate: import "
                        f"{name} from messages (tests/messages.py) and assert with raises_saying, so that a change of "
                        f"wording is one edit {STEPS}.")
