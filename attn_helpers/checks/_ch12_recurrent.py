"""Chapter 12's medium exercise: linear attention one token at a time, checked for the shortcuts it forbids
(see ``checks.ch12``).

The answer must equal the parallel form, and the check watches how it gets there (:class:`Watch`): no helper that
computes linear attention, no softmax, no tensor of t × t numbers or a state for every token, no numbers taken out
of PyTorch, and no step that reads the earlier keys again, which shows as work growing faster than the tokens.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable

import torch

from .. import linear_attention as la
from .._torch_private import dispatch_mode_base, tensors_in
from . import CheckFailed, Watch, call, check_tensor, listed, on_other_sizes


def recurrent_inputs(t: int = 11, d_k: int = 4, d_v: int = 3, seed: int = 1200) -> tuple[torch.Tensor, ...]:
    """Exercise ex-ch12-recurrent: q, k ``(t, d_k)`` and v ``(t, d_v)`` in float64."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t, d, generator=gen, dtype=torch.float64) for d in (d_k, d_k, d_v))


def _weighted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num: torch.Tensor, den: torch.Tensor,
              fq: torch.Tensor | None = None, fk: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs with the weight masks ``num`` (for the values) and ``den`` (for the normaliser), each (t, t)."""
    fq = la.feature_map(q) if fq is None else fq
    fk = la.feature_map(k) if fk is None else fk
    A = fq @ fk.T  # (t, t)
    return ((A * num) @ v) / (A * den).sum(-1, keepdim=True)


class _LiveStates(dispatch_mode_base()):
    """Counts the state-shaped tensors, (d_k, d_v) or (d_v, d_k), alive at once while a function runs."""

    def __init__(self, shapes: set[tuple[int, ...]]) -> None:
        super().__init__()
        self.shapes, self.live, self.made, self.most = shapes, {}, 0, 0  # live: id -> weak reference

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for x in tensors_in(out):
            if isinstance(x, torch.Tensor) and tuple(x.shape) in self.shapes:
                self.made += self.live.get(id(x), lambda: None)() is not x  # an in-place op is no new tensor
                self.live[id(x)] = weakref.ref(x)
        self.most = max(self.most, sum(ref() is not None for ref in self.live.values()))
        return out


def _run_recurrent(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float) -> object:
    t, d_k, d_v = q.shape[0], q.shape[1], v.shape[1]
    forbidden = {la.parallel: "ah.linear_attention.parallel", la.recurrent: "ah.linear_attention.recurrent",
                 la.chunked: "ah.linear_attention.chunked", la.decay_mask: "ah.linear_attention.decay_mask",
                 la.LinearAttentionHead.forward: "ah.linear_attention.LinearAttentionHead"}
    states = _LiveStates({(d_k, d_v), (d_v, d_k)})
    with Watch(forbidden) as watch, states:
        answer = call(fn, q.clone(), k.clone(), v.clone(), decay, name="linear_step_by_step")
    if watch.called:
        raise CheckFailed(f"linear_step_by_step calls {listed(sorted(watch.called))}, which computes linear "
                          f"attention for you. Hint: keep a (d_k, d_v) state and a (d_k,) normaliser, and update "
                          f"them once per token.")
    if watch.used("numpy", "tolist", "__array__"):
        raise CheckFailed("linear_step_by_step takes the numbers out of PyTorch (into NumPy or Python lists), where "
                          "the check cannot see how it computes with them. Hint: compute with the tensors "
                          "themselves, one state update per token.")
    if watch.used_softmax():
        raise CheckFailed("linear_step_by_step calls a softmax. Hint: linear attention weighs key j by a dot product "
                          "of features and divides by their sum; no exponential of the scores.")
    prefixes = {n for op in watch.ops for shape in op.outputs + op.inputs if len(shape) == 2 and d_k in shape
                for n in [shape[1] if shape[0] == d_k else shape[0]]  # (n, d_k) or (d_k, n): n keys' features
                if 1 < n < t and n not in (d_k, d_v, d_k + 1, d_v + 1)}
    if len(prefixes) >= 3:  # (2, d_k) alone may be q_i and k_i side by side
        raise CheckFailed(f"linear_step_by_step works on {len(prefixes)} different numbers of keys at once "
                          f"({', '.join(map(str, sorted(prefixes)[:4]))}, …): it weighs every earlier key again for "
                          f"each new token, which is attention over a cache, not a state. Hint: read token i "
                          f"through the state alone, and add each key to it once.")
    for op in watch.ops:
        if any(sum(size == t for size in shape) >= 2 for shape in op.outputs):
            raise CheckFailed(f"linear_step_by_step builds a tensor of shape {op.outputs[0]} (operator {op.name}), "
                              f"which holds t × t = {t} × {t} numbers: the form that grows with t. Hint: carry a "
                              f"state of fixed size from token to token instead.")
        big = [shape for shape in op.outputs if t in shape and math.prod(shape) > t * (d_k + d_v + 1)]
        if big:
            raise CheckFailed(f"linear_step_by_step builds a tensor of shape {big[0]} (operator {op.name}): one "
                              f"(d_k, d_v) matrix for every token, t = {t} of them at once. Hint: the recurrent form "
                              f"keeps ONE state, and each token enters it inside the loop.")
        if (t, d_k) in op.inputs and any(math.prod(shape) == t for shape in op.outputs):
            raise CheckFailed(f"linear_step_by_step weighs all t = {t} keys at once (operator {op.name} makes one "
                              f"number per key from a ({t}, {d_k}) tensor): that is attention over every key under "
                              f"a mask, with no state. Hint: token i reads the state alone, and each key enters the "
                              f"state once, when its token comes.")
    if states.made > 8 * t:
        raise CheckFailed(f"linear_step_by_step makes {states.made} state-sized ({d_k}, {d_v}) tensors for t = {t} "
                          f"tokens: it rebuilds the state from the earlier tokens at every step, a cost that grows "
                          f"as t². Hint: each token enters the state once; the next token starts from that state.")
    if states.most > max(6, t // 2):
        raise CheckFailed(f"linear_step_by_step keeps {states.most} state-sized ({d_k}, {d_v}) tensors alive at "
                          f"once for t = {t} tokens: a state for every token, a memory that grows with t. Hint: "
                          f"keep only the current state; the output of each token is all that is stored.")
    return answer


_LENGTHS = (5, 20)  # the check counts the operations a function runs on these two numbers of tokens


def _grows_faster_than_the_tokens(fn: Callable) -> None:
    """Refuse a function whose count of PyTorch operations grows faster than t: each step reads the earlier keys."""
    counts, scalars = [], 0
    for t in _LENGTHS:
        q, k, v = recurrent_inputs(t, seed=1202)
        with Watch() as watch:
            call(fn, q, k, v, 0.9, name="linear_step_by_step", given=f"q, k and v of t = {t} tokens")
        counts.append(len(watch.ops))
        scalars = sum(op.name == "_local_scalar_dense" for op in watch.ops)  # .item() and float(), at the longest
    growth, more = counts[1] / counts[0], _LENGTHS[1] / _LENGTHS[0]
    if growth > 2 * more:  # linear: at most `more` times the operations; reading every earlier key: about more²
        raise CheckFailed(f"linear_step_by_step runs {counts[0]} PyTorch operations for t = {_LENGTHS[0]} tokens "
                          f"and {counts[1]} for t = {_LENGTHS[1]}: {more:.0f} times the tokens take {growth:.0f} "
                          f"times the operations, so each token costs more than the one before. It goes back to the "
                          f"earlier keys at every step (a loop over them, or a list of them), which is attention "
                          f"over a cache, not a recurrence. Hint: a token's step should cost the same however many "
                          f"tokens came before it: the token reads the state alone, and each key enters the state "
                          f"once.")
    if scalars > 2 * _LENGTHS[1]:
        raise CheckFailed(f"linear_step_by_step reads {scalars} single numbers out of tensors (.item() or float()) "
                          f"for t = {_LENGTHS[1]} tokens: it computes with Python numbers, where the check cannot see "
                          f"the state. Hint: keep the state, the normaliser and the outputs as tensors, and update "
                          f"them with tensor operations.")


def _mistakes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float) -> dict[str, torch.Tensor]:
    """The outputs of plausible wrong recurrences, each with a hint naming its mistake (never the update itself)."""
    t = q.shape[0]
    causal, D = la.decay_mask(t, 1.0, q.dtype), la.decay_mask(t, decay, q.dtype)
    j = torch.arange(t, dtype=q.dtype)
    absolute = causal * decay ** j[None, :]  # (t, t): key j weighed by decay^j, its position, not its distance
    fq, fk = la.feature_map(q), la.feature_map(k)
    return {
        "the decay is missing: older tokens must fade by the decay factor at every step, in the state and in the "
        "normaliser alike.": _weighted(q, k, v, causal, causal),
        "only the state fades, not the normaliser: both hold sums over the same tokens and must fade at the same "
        "rate, or the weights no longer sum to one.": _weighted(q, k, v, D, causal),
        "only the normaliser fades, not the state: both hold sums over the same tokens and must fade at the same "
        "rate.": _weighted(q, k, v, causal, D),
        "the outputs are not divided by the normaliser's reading, so the weights do not sum to one.":
            (fq @ fk.T * D) @ v,
        "the feature map is missing: apply φ = ah.linear_attention.feature_map to the queries and the keys first.":
            ((q @ k.T * D) @ v) / (q @ k.T * D).sum(-1, keepdim=True),
        "the feature map is applied to the queries only: the keys that enter the state and the normaliser need "
        "it too.": _weighted(q, k, v, D, D, fk=k),
        "the feature map is applied to the keys only: the query that reads the state needs it too.":
            _weighted(q, k, v, D, D, fq=q),
        "the decay follows each key's position in the sequence, not how far back it lies from the reading "
        "token: decay the whole state once per step instead.": _weighted(q, k, v, absolute, absolute),
    }


def recurrent_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch12-recurrent: ``fn(q, k, v, decay)`` is causal linear attention, one state update a token."""
    for q, k, v, decay, where in ((*recurrent_inputs(), 0.8, None),
                                  (*recurrent_inputs(7, 5, 2, seed=1201), 0.6, "t = 7, d_k = 5, d_v = 2, decay 0.6")):
        context = on_other_sizes("linear_step_by_step", f"other inputs ({where})", "take every size from q, k and v, "
                                 "not from numbers, and use the decay argument.") if where else contextlib.nullcontext()
        with context:
            answer = _run_recurrent(fn, q, k, v, decay)
            if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and torch.isnan(answer).any():
                raise CheckFailed("the output contains NaN. Hint: token i sees itself, so it must be in the state "
                                  "before the state is read; otherwise the first token sees nothing.")
            name = "linear_step_by_step(q, k, v, decay)" + (f" on {where}" if where else "")
            if isinstance(answer, torch.Tensor) and answer.dtype in (torch.float32, torch.float16, torch.bfloat16):
                raise CheckFailed(f"{name} is {answer.dtype}, but q, k and v are float64 and the three forms agree "
                                  f"to float64's rounding. Hint: keep the inputs' dtype (new_zeros makes the state "
                                  f"in it).")
            check_tensor(answer, la.parallel(q, k, v, decay), name, _mistakes(q, k, v, decay), atol=1e-10)
    _grows_faster_than_the_tokens(fn)
