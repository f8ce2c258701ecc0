"""Chapter 12's hard exercise: speculative sampling's rule, checked by exact enumeration (see ``checks.ch12``)."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from fractions import Fraction

from .. import speculative
from . import CheckFailed, Watch, call, correct, listed, on_other_sizes

F = Fraction
P, Q = [F(2, 5), F(3, 10), F(1, 5), F(1, 10)], [F(1, 10), F(2, 5), F(1, 5), F(3, 10)]  # target p, draft q
_OTHER_PAIRS = [([F(3, 5), F(2, 5), F(0)], [F(1, 3), F(1, 3), F(1, 3)]),  # the target never wants token 2
                ([F(1, 6), F(1, 3), F(1, 2)], [F(1, 2), F(1, 2), F(0)])]  # the draft never proposes token 2


def _norm(values: list[Fraction]) -> list[Fraction]:
    total = sum(values)
    return [v / total for v in values]


def _excess(p: Sequence[Fraction], q: Sequence[Fraction]) -> list[Fraction]:
    return [max(F(0), a - b) for a, b in zip(p, q, strict=True)]


_MISTAKES: dict[str, Callable] = {
    "a rejected draft is replaced by a draw from p itself. But p's mass where the draft already proposed was "
    "partly delivered by the accepted drafts: draw only from what the target wants beyond what the draft gives.":
        lambda p, q, x: (min(F(1), p[x] / q[x]), list(p)),
    "a rejected draft is replaced by a draw from the draft's q: the target's distribution never enters the "
    "replacement. Draw from what the target wants beyond what the draft gives.":
        lambda p, q, x: (min(F(1), p[x] / q[x]), list(q)),
    "the replacement is drawn where the draft exceeds the target, the wrong way round: those tokens are already "
    "over-proposed.": lambda p, q, x: (min(F(1), p[x] / q[x]), _norm(_excess(q, p))),
    "the ratio is upside down: a token the target likes more than the draft must be kept more often, not less.":
        lambda p, q, x: (min(F(1), q[x] / p[x]), _norm(_excess(p, q))),
    "keeping x with probability p[x] ignores how often the draft proposes it: the chance of keeping depends on "
    "the target's and the draft's probabilities of x together.": lambda p, q, x: (p[x], _norm(_excess(p, q))),
    "keeping x outright when the target likes it at least as much as the draft, and never otherwise, keeps too "
    "few of the tokens the draft over-proposes: keep them with a probability between 0 and 1.":
        lambda p, q, x: (F(1) if p[x] >= q[x] else F(0), _norm(_excess(p, q))),
}


def _number(value: object, what: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, numbers.Rational):
        raise CheckFailed(f"{what} is {value!r} ({type(value).__name__}), not an exact fraction. Hint: p and q hold "
                          f"fractions.Fraction values, so sums, differences and quotients of them stay exact; a "
                          f"float (1.0, a division of floats, a tensor) rounds and the check compares exactly.")
    return F(value)


def _verdict(fn: Callable, p: list[Fraction], q: list[Fraction], x: int) -> tuple[Fraction, list[Fraction]]:
    """The learner's ``(accept, resample)`` for draft token ``x``, as exact fractions, after checking their form."""
    name = f"speculative_rule(p, q, {x})"
    out = call(fn, list(p), list(q), x, name="speculative_rule", given=f"p={_show(p)}, q={_show(q)}, x={x}")
    if not isinstance(out, tuple) or len(out) != 2:
        raise CheckFailed(f"{name} returned {type(out).__name__} {out!r:.80}. Hint: return two things, the "
                          f"probability of keeping x and the list of probabilities to draw a replacement from.")
    accept = _number(out[0], f"the probability of keeping x in {name}")
    resample = out[1]
    if isinstance(resample, (str, bytes)) or not isinstance(resample, Sequence) or len(resample) != len(p):
        raise CheckFailed(f"the replacement distribution of {name} should be a list of {len(p)} probabilities, one "
                          f"per token, got {resample!r:.80}.")
    resample = [_number(r, f"the replacement distribution of {name}") for r in resample]
    if not 0 <= accept <= 1:
        raise CheckFailed(f"{name} keeps x with probability {accept}, {'above 1' if accept > 1 else 'below 0'}. "
                          f"Hint: where the target likes x at least as much as the draft, x is always kept; a chance "
                          f"of keeping cannot exceed 1.")
    if any(r < 0 for r in resample):
        raise CheckFailed(f"the replacement distribution of {name} has a negative entry ({_show(resample)}). Hint: "
                          f"draw only where the target wants more than the draft gives; elsewhere the probability "
                          f"is 0, not negative.")
    if sum(resample) != 1:
        raise CheckFailed(f"the replacement distribution of {name} sums to {sum(resample)}, not 1 "
                          f"({_show(resample)}). Hint: the excess of the target over the draft must be divided by "
                          f"its own total to become a distribution.")
    return accept, resample


def _safely(rule: Callable, p: list[Fraction], q: list[Fraction], x: int) -> tuple | None:
    try:
        return rule(p, q, x)
    except ZeroDivisionError:  # the mistake divides by a p or a total that is 0 here
        return None


def _show(values: Sequence) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _check_pair(fn: Callable, p: list[Fraction], q: list[Fraction]) -> None:
    forbidden = {speculative.sampling_rule: "ah.speculative.sampling_rule",
                 speculative.emitted_distribution: "ah.speculative.emitted_distribution"}
    with Watch(forbidden) as watch:
        verdicts = {x: _verdict(fn, p, q, x) for x in range(len(q)) if q[x]}  # the draft proposes only where q > 0
    if watch.called:
        raise CheckFailed(f"speculative_rule calls {listed(sorted(watch.called))}, which applies the rule "
                          f"for you. Hint: compute the probability of keeping x and the replacement "
                          f"distribution from p and q yourself.")
    if all(accept == 1 for accept, _ in verdicts.values()):
        raise CheckFailed("speculative_rule keeps every draft token, so one step emits the draft's distribution q, "
                          "not the target's. Hint: a token the draft proposes more often than the target would "
                          "choose it must sometimes be rejected.")
    for hint, wrong in _MISTAKES.items():
        made = {x: _safely(wrong, p, q, x) for x in verdicts}  # what the mistake gives here
        same = all(made[x] == speculative.sampling_rule(p, q, x) for x in verdicts)
        if not same and all(verdicts[x] == made[x] for x in verdicts):
            raise CheckFailed(f"speculative_rule is not right yet. Hint: {hint}")
    emitted = speculative.emitted_distribution(p, q, lambda _p, _q, x: verdicts[x])
    distance = sum(abs(a - b) for a, b in zip(emitted, p, strict=True)) / 2
    if distance:
        raise CheckFailed(f"with p={_show(p)} and q={_show(q)}, one step emits {_show(emitted)}, not the target's "
                          f"p: a total-variation distance of {float(distance):.3g}. Hint: a token x must come out "
                          f"with probability p[x] in all, kept as a draft or drawn as a replacement; work out both "
                          f"parts for a token the draft over-proposes and for one it under-proposes.")
    wasted = [x for x, (accept, _) in verdicts.items() if accept < speculative.sampling_rule(p, q, x)[0]]
    if wasted:
        never = all(verdicts[x][0] == 0 for x in verdicts)
        raise CheckFailed(f"with p={_show(p)} and q={_show(q)}, one step emits p, but "
                          + ("no draft is ever kept: the target samples alone, and drafting was wasted. "
                             if never else f"draft token {wasted[0]} is kept less often than it could be, so more "
                             f"drafts are thrown away than need be. ")
                          + "Hint: keep x as often as you can without x coming out more often than the target wants "
                            "it; only what the kept drafts cannot deliver should come from replacements.")


def sampling_rule_function(fn: Callable) -> None:
    """Exercise ex-ch12-sampling: ``fn(p, q, x)`` is speculative sampling's rule, exact in fractions."""
    for p, q in [(P, Q), *_OTHER_PAIRS]:
        if p is P:
            _check_pair(fn, p, q)
            continue
        with on_other_sizes("speculative_rule", f"another p and q (p={_show(p)}, q={_show(q)})",
                            "take every size from p and q, and mind the tokens where p or q is 0."):
            _check_pair(fn, p, q)
    correct("speculative_rule")
