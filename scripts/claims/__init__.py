"""The trained claims of the book: one module per chapter (chNN.py), each with a list CLAIMS of Claim.

A claim is one comparison of a chapter's ``assert``, typed exactly as the chapter types it, and a function of the
seed that returns the values of the names that comparison reads, computed by the same ``attn_helpers`` function the
chapter's cell calls. The comparison's bound is read from the chapter, never typed here: a claims module holds no
number (``tests/test_claims.py``), so an experiment's settings live in its package function.

    Claim(12, 'accuracy.loc[16, "linear, d_k = 8"] < 0.7',
          lambda seed: {"accuracy": ah.tasks.compare_recall(seed=seed).accuracy})

``scripts/margins.py`` finds the chapter modules (``all_claims``), evaluates each claim for several seeds under each
kernel set and prints its room. This package never imports its chapter modules, which import it for ``Claim``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import book_toc

_BELOW, _ABOVE = (ast.Lt, ast.LtE), (ast.Gt, ast.GtE)  # left < right, left > right


@dataclass(frozen=True)
class Claim:
    chapter: int
    asserts: str                                  # one comparison of a chapter assert, as the chapter types it
    names: Callable[[int], Mapping[str, object]]  # seed -> the values of the names the comparison reads

    @cached_property
    def comparison(self) -> ast.Compare:
        """The comparison, parsed: a chain of <, <=, > or >= (for example ``2 / 24 < knocked["layer 1"] < 0.25``)."""
        try:
            tree = ast.parse(self.asserts.strip(), mode="eval").body
        except SyntaxError as error:
            raise ValueError(f"chapter {self.chapter}: {self.asserts!r} is not a Python expression") from error
        if not isinstance(tree, ast.Compare) or not all(isinstance(op, _BELOW + _ABOVE) for op in tree.ops):
            raise ValueError(f"chapter {self.chapter}: {self.asserts!r} is not a chain of <, <=, > or >=")
        return tree

    def values(self, seed: int) -> list[float]:
        """The comparison's operands for `seed`, left to right, each as a float."""
        names = dict(self.names(seed))  # as globals, so that a generator expression in the assert sees them too
        operands = [self.comparison.left, *self.comparison.comparators]
        return [float(eval(compile(ast.Expression(o), "<claim>", "eval"), names)) for o in operands]  # noqa: S307

    def measured(self, values: list[float]) -> float:
        """What the table shows: the one operand that is not a constant, or for a ranking its smallest step."""
        varying = [v for o, v in zip(self._operands, values, strict=True) if not _constant(o)]
        return varying[0] if len(varying) == 1 else self.room(values)

    def room(self, values: list[float]) -> float:
        """How far the operands are inside the comparison: the smallest signed step of the chain (< 0: it fails).

        For ``a < b`` that is b - a; for ``a > b``, a - b; a chain ``a < x < b`` takes the smaller of x - a, b - x.
        """
        steps = zip(self.comparison.ops, values, values[1:], strict=False)
        return min(right - left if isinstance(op, _BELOW) else left - right for op, left, right in steps)

    @property
    def _operands(self) -> list[ast.expr]:
        return [self.comparison.left, *self.comparison.comparators]


def _constant(node: ast.expr) -> bool:
    """An operand with no name in it: a number or arithmetic on numbers (``2 / 24``)."""
    return not any(isinstance(n, ast.Name) for n in ast.walk(node))


def chapter_asserts(chapter: int) -> Iterator[str]:
    """Every comparison inside an ``assert`` of the chapter's code cells, normalised by ``ast.unparse``."""
    path = book_toc.chapter(chapter)
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert):
                yield from (ast.unparse(c) for c in ast.walk(node.test) if isinstance(c, ast.Compare))


def normalised(expression: str) -> str:
    """An expression as ``ast.unparse`` writes it, so that spacing and quotes do not matter."""
    return ast.unparse(ast.parse(expression.strip(), mode="eval").body)
