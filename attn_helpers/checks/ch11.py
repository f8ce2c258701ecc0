"""Self-checks for the exercises of chapter 11 (chapter 11; see ``attn_helpers.checks``)."""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode

from .. import long_context, position, sliding_window
from ..attention import attention
from . import CheckFailed, Watch, call, check_tensor, listed, on_other_sizes, reached_functions, tensors_from_outside
from ._reach import read_from_outside

__all__ = ["alibi_slopes_12", "layout_weights", "layout_function", "ring_inputs", "ring_decoder"]


def _geometric(h: int, first: int = 1) -> torch.Tensor:
    """``2^(-8i/h)`` for i = first … first + h - 1: the power-of-2 rule applied to any h."""
    return (2.0 ** (-8.0 * torch.arange(first, first + h, dtype=torch.float64) / h)).float()


def alibi_slopes_12(answer: object) -> None:
    """Exercise ex-ch11-slopes: the ALiBi slopes of 12 heads, head 1 first."""
    try:
        slopes = torch.as_tensor(answer, dtype=torch.float64).float()
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailed(f"slopes should be 12 numbers (a list or a tensor), one per head, got "
                          f"{type(answer).__name__}.") from None
    if slopes.shape != (12,):
        raise CheckFailed(f"slopes should hold 12 numbers, one per head, got shape {tuple(slopes.shape)}"
                          + (": these are the slopes of 8 heads. Hint: 12 heads need 4 more, from the rule for a "
                             "head count that is not a power of 2." if slopes.shape == (8,) else "."))
    expected = long_context.alibi_slopes(12)
    eight, sixteen = _geometric(8), _geometric(16)
    i = torch.arange(1, 13, dtype=torch.float64)
    check_tensor(slopes, expected, "slopes", {
        "12 is not a power of 2, so the geometric rule with step 8/12 does not apply: start from the slopes of "
        "the power of 2 below 12 and add heads from the next one up.": _geometric(12),
        "the exponent is -8·i/h, not -i/h: the slopes run from 2^(-8/h) down to 2^(-8).":
            (2.0 ** -(i / 12)).float(),
        "the exponents start at one step, not at zero: the first head's slope is below 1.": _geometric(12, first=0),
        "the 4 extra heads take every other slope of 16 heads, those not already among the 8 (the 1st, 3rd, "
        "5th, 7th), not the first 4 of them.": torch.cat([eight, sixteen[:4]]),
        "the 4 extra heads take the slopes of 16 heads that are not among the 8 already there; these repeat "
        "slopes the first 8 heads have.": torch.cat([eight, sixteen[1:8:2]]),
        "the extra heads come from twice the power of 2 (16 heads), not from 4 heads.":
            torch.cat([eight, _geometric(4)]),
        "the slopes of 8 heads come first, in their order; the 4 extra heads follow them rather than being sorted "
        "in among them.": expected.sort(descending=True).values,
        "these are the first 12 slopes of 16 heads: the 8 of 8 heads come first, then 4 of the 16 heads' slopes "
        "that lie between them.": sixteen[:12],
        "the order is reversed: head 1 has the largest slope of the first 8 heads.": expected.flip(0),
        "a slope is a positive number; the sign comes in the bias, which is −m · distance.": -expected,
        "the slopes form a geometric sequence (a constant ratio from head to head), not a linear one.":
            (i / 12).float(),
        "the slopes form a geometric sequence (a constant ratio from head to head), not 1/i.": (1 / i).float(),
    }, atol=1e-6)


def layout_weights(h: int = 4, d_k: int = 8, d_model: int = 32, seed: int = 1101) -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise ex-ch11-layouts: the ``nn.Linear`` weights ``W_q``, ``W_k`` ``(h · d_k, d_model)`` of a checkpoint
    trained with interleaved RoPE."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(h * d_k, d_model, generator=gen), torch.randn(h * d_k, d_model, generator=gen)


def _per_head(W: torch.Tensor, h: int, order: torch.Tensor) -> torch.Tensor:
    d_k = W.shape[0] // h
    return W.view(h, d_k, -1)[:, order].reshape(W.shape)  # rows reordered inside each head


def _scores(W_q: torch.Tensor, W_k: torch.Tensor, x: torch.Tensor, h: int, layout: str) -> torch.Tensor:
    rope = long_context.rope_halves if layout == "halves" else position.rope
    t = x.shape[0]
    q, k = ((x @ W.T).view(t, h, -1).transpose(0, 1) for W in (W_q, W_k))  # (h, t, d_k) each
    return rope(q) @ rope(k).transpose(-2, -1)  # (h, t, t)


def _check_layouts(fn: Callable, h: int, d_k: int, d_model: int, what: str) -> None:
    W_q, W_k = layout_weights(h, d_k, d_model)
    with Watch([long_context.halves_order]) as watch:
        new_q, new_k = (call(fn, W.clone(), h, name="to_halves") for W in (W_q, W_k))
    if watch.called:
        raise CheckFailed("to_halves calls ah.long_context.halves_order, which builds the order for you: the "
                          "exercise asks you to build it. Hint: list the even features of a head, then the odd ones.")
    name = f"to_halves(W_q, {h}){what}"
    if isinstance(new_q, torch.Tensor) and new_q.shape == (h, d_k, d_model):
        raise CheckFailed(f"{name} has shape {tuple(new_q.shape)}, one block of rows per head. Hint: reshape it back "
                          f"to W's shape (h · d_k, d_model) = {tuple(W_q.shape)}, the shape nn.Linear needs.")
    if isinstance(new_q, torch.Tensor) and torch.is_floating_point(new_q) and new_q.dtype != W_q.dtype:
        raise CheckFailed(f"{name} has dtype {new_q.dtype}, and W was {W_q.dtype}: a conversion moves rows and "
                          f"changes no number. Hint: keep W's dtype (reorder W itself rather than a converted copy).")
    order = long_context.halves_order(d_k)
    odd_first = torch.cat([torch.arange(1, d_k, 2), torch.arange(0, d_k, 2)])
    check_tensor(new_q, _per_head(W_q, h, order), name, {
        "W is unchanged: reorder the rows of each head.": W_q,
        "you reordered all h·d_k rows as one block; each head has its own pairs, so reorder the d_k rows of "
        "each head separately.": W_q[long_context.halves_order(h * d_k)],
        "you reordered the columns (the input features); RoPE pairs the output features, the rows of an "
        "nn.Linear weight.": W_q[:, long_context.halves_order(d_model)] if d_model % 2 == 0 else W_q,
        "this is the conversion the other way, from halves to interleaved: invert the order.":
            _per_head(W_q, h, order.argsort()),
        "the odd features came first: pair (2i, 2i+1) becomes (i, i + d/2), so feature 2i moves to i, in the "
        "first half, and the odd one to the second half.": _per_head(W_q, h, odd_first),
        "you took the heads as the inner axis: head j owns the d_k consecutive rows j·d_k … (j+1)·d_k - 1, so "
        "the head is the outer of the two axes the rows split into.":
            W_q.view(d_k, h, -1)[order].reshape(W_q.shape),
    })
    x = torch.randn(5, d_model, generator=torch.Generator().manual_seed(1102))  # (t, d_model)
    check_tensor(_scores(new_q.detach(), new_k.detach(), x, h, "halves"),
                 _scores(W_q, W_k, x, h, "interleaved"),
                 f"scores with the halves layout{what}", atol=1e-3)


def layout_function(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise ex-ch11-layouts: ``fn(W, num_heads)`` reorders the rows of an interleaved-RoPE projection for the
    halves layout; the scores of ``rope_halves`` on the result equal those of ``ah.position.rope`` on ``W``."""
    if outside := tensors_from_outside(fn):
        raise CheckFailed(f"to_halves reads {listed(outside)}, which holds tensors made before the call (an order "
                          f"or weights built beforehand): work from its arguments alone. Hint: build the order of "
                          f"the features inside the function, from d_k.")
    _check_layouts(fn, 4, 8, 32, "")
    with on_other_sizes("to_halves", "h = 3 heads of d_k = 6", "take d_k from the number of rows of W and num_heads."):
        _check_layouts(fn, 3, 6, 10, " on h = 3 heads of d_k = 6")


def ring_inputs(t: int = 21, d: int = 4, seed: int = 1103) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch11-ring: queries, keys and values ``(t, d)`` of one head, positions already applied."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t, d, generator=gen) for _ in range(3))


def _by_ring(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, *, mask_empty: bool = True,
             write_first: bool = True, scale: bool = True, divide: float = 1.0) -> torch.Tensor:
    """The check's own ring-buffer decoder, with the switches that give the usual mistakes."""
    t, d = q.shape
    keys, values = torch.zeros(window, d), torch.zeros(window, d)
    filled, outs = torch.zeros(window, dtype=torch.bool), []
    for n in range(t):
        if write_first:
            keys, values = keys.index_copy(0, torch.tensor([n % window]), k[n:n + 1]), values.index_copy(
                0, torch.tensor([n % window]), v[n:n + 1])
            filled = filled | (torch.arange(window) == n % window)
        allowed = filled if mask_empty else torch.ones(window, dtype=torch.bool)
        out, _ = attention(q[n:n + 1], keys, values, allowed[None], scale=None if scale else 1.0 / divide)
        outs.append(out[0])
        if not write_first:
            keys, values = keys.index_copy(0, torch.tensor([n % window]), k[n:n + 1]), values.index_copy(
                0, torch.tensor([n % window]), v[n:n + 1])
            filled = filled | (torch.arange(window) == n % window)
    return torch.stack(outs)  # (t, d)


class _Rows(TorchFunctionMode):
    """Counts the rows of the sequence's keys and values (``k``, ``v``, ``(t, d)``) a decoder takes out of them:
    in all, and alive at once; and whether a row that iterating over ``k`` (``unbind``) handed out is used again
    after a later row was used."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor) -> None:
        super().__init__()
        self.whole = {id(k): k, id(v): v}  # k, v and their aliases (same shape: .float(), .detach(), …)
        self.d, self.shape = k.shape[1], k.shape
        self.taken = {id(k): 0, id(v): 0}
        self.alive = {id(k): 0, id(v): 0}
        self.most_alive = 0
        self.unbound: dict[int, tuple[weakref.ref, int]] = {}  # id of a row from unbind -> (the row, its index)
        self.last_used = -1
        self.reused = False

    def _gone(self, root: int, rows: int) -> None:
        self.alive[root] -= rows

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        flat = [a for a in (*args, *kwargs.values()) for a in (a if isinstance(a, (list, tuple)) else (a,))]
        for a in flat:
            found = self.unbound.get(id(a))
            if found is not None and found[0]() is a:
                self.reused |= found[1] < self.last_used
                self.last_used = max(self.last_used, found[1])
        source = next((self.whole[id(a)] for a in flat if id(a) in self.whole and self.whole[id(a)] is a), None)
        if source is None:
            return out
        outs = [o for o in (out if isinstance(out, (list, tuple)) else (out,)) if isinstance(o, torch.Tensor)]
        root = id(source)
        for index, o in enumerate(outs):
            if o is source or id(o) in self.whole:
                continue
            if o.shape == self.shape:
                self.whole[id(o)] = o
                self.taken[id(o)] = self.alive[id(o)] = 0
            elif getattr(func, "__name__", "") in ("unbind", "__iter__") or len(outs) == self.shape[0] > 1:
                self.unbound[id(o)] = (weakref.ref(o), index)
            else:
                rows = o.numel() // self.d
                self.taken[root] += rows
                self.alive[root] += rows
                self.most_alive = max(self.most_alive, self.alive[root])
                weakref.finalize(o, self._gone, root, rows)
        return out


def _tables_from_outside(fn: Callable) -> list[str]:
    """The lists, tuples, dicts and sets ``fn`` (or a function of the notebook it calls) reads from outside."""
    found = set()
    for reached in reached_functions(fn):
        inner = getattr(reached, "__wrapped__", reached)
        if hasattr(inner, "__code__"):
            found |= {name for name, value in read_from_outside(inner).items()
                      if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value)}
    return sorted(found)


# the operators that score keys or normalise scores: none may see more than `window` keys at a step
_SCORING = ("mm", "bmm", "mv", "addmv", "dot", "matmul", "addmm", "baddbmm", "sum", "amax", "max", "_softmax",
            "_log_softmax", "exp", "_safe_softmax", "logsumexp")
# the operators that take rows out of a tensor: from the sequence's (t, d) keys, one row a step at most
_READING = ("slice", "narrow", "index", "index_select", "gather", "take")


def _run_ring(fn: Callable, t: int, d: int, window: int, what: str) -> None:
    q, k, v = ring_inputs(t, d)
    forbidden = {sliding_window.ring_slot: "ah.sliding_window.ring_slot",
                 sliding_window.RingCache.write: "RingCache.write",
                 sliding_window.RingCache.empty.__func__: "RingCache.empty",
                 sliding_window.window_mask: "ah.sliding_window.window_mask"}
    k_in, v_in = k.clone(), v.clone()
    rows = _Rows(k_in, v_in)
    with Watch(forbidden) as watch, rows:
        answer = call(fn, q.clone(), k_in, v_in, window, name="decode_window")
    if watch.called:
        raise CheckFailed(f"decode_window calls {listed(sorted(watch.called))}, which does the exercise for you. "
                          f"Hint: make the two buffers, the slot and the mask yourself, from n and window.")
    big = [op for op in watch.ops if op.name in _SCORING
           and any(size > window for shape in op.inputs + op.outputs for size in shape[-2:] if len(shape))]
    sizes = {size for op in big for shape in op.inputs + op.outputs for size in shape[-2:] if size > window}
    if big and sizes == {window + 1}:
        raise CheckFailed(
            f"decode_window scores a query against window + 1 = {window + 1} keys: a buffer of window + 1 slots. "
            f"Hint: the window counts the new token itself, so its window slots hold the new token and the "
            f"window - 1 before it.")
    if big:
        raise CheckFailed(
            f"decode_window scores a query against more than window = {window} keys ({big[0].name} on shapes "
            f"{big[0].inputs}): that is recomputing from a full cache (or from all the queries at once), which "
            f"the ring buffer replaces. Hint: at step n, score q[n] against the {window} slots of the buffer only.")
    several = [op for op in watch.ops if op.name in _READING and op.inputs and op.inputs[0] == (t, d)
               and any(len(shape) and 1 < shape[0] < t for shape in op.outputs)]
    if several:
        raise CheckFailed(
            f"decode_window takes several rows of the whole sequence's q, k or v at once ({several[0].name} from "
            f"{several[0].inputs[0]} to {several[0].outputs[0]}, as k[n - window + 1 : n + 1] does): that is reading "
            f"from a full cache of every key, which the ring buffer replaces. Hint: at step n take only k[n] and "
            f"v[n] from the sequence; the earlier keys must come from the buffer's slots.")
    if rows.most_alive > window + 2:
        raise CheckFailed(
            f"decode_window holds {rows.most_alive} rows of the sequence's keys (or values) at once (a list of every "
            f"key so far, or a padded copy of k): that is a full cache, however few of them it scores. Hint: keep "
            f"at most window keys and values, in the buffer's slots.")
    if max(rows.taken.values()) > 2 * t or rows.reused:
        raise CheckFailed(
            "decode_window takes earlier rows of k or v from the sequence again at later steps (the window's keys "
            "stacked row by row, or the rows of k.unbind(0) or of a loop over k stacked again): that reads a full "
            "cache of every key. Hint: at step n take only k[n] and v[n] from the sequence, write them into their "
            "slots, and read the earlier keys from the buffer.")
    if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and torch.isnan(answer).any():
        if answer.dim() and torch.isnan(answer[1:]).any():
            raise CheckFailed(f"decode_window{what} contains NaN at later steps too: a slot that holds no token got "
                              f"a softmax of its own (over -inf alone). Hint: take the softmax over the slots, the "
                              f"buffer's axis, so each query's weights share one softmax.")
        raise CheckFailed(f"decode_window{what} contains NaN: a query had no slot to attend, so its softmax was over "
                          f"-inf alone. Hint: at step 0 the buffer is empty until token 0 is written; write first, "
                          f"then attend.")
    if isinstance(answer, torch.Tensor) and answer.shape == (t, 1, d):
        raise CheckFailed(f"decode_window{what} has shape {(t, 1, d)}: one (1, d) row per step, stacked. Hint: "
                          f"return (t, d), one row per token: concatenate the rows, or stack rows of shape (d,).")
    expected = attention(q, k, v, sliding_window.window_mask(t, window=window))[0]
    check_tensor(answer, expected, f"decode_window{what}", {
        "before the buffer is full some slots are still empty (zeros), and the query attended them too: mask "
        "the slots that hold no token yet.": _by_ring(q, k, v, window, mask_empty=False),
        "the query attended the buffer before its own key and value were written: write first, then attend.":
            _by_ring(q, k, v, window, write_first=False),
        "you forgot the scale 1/√d.": _by_ring(q, k, v, window, scale=False),
        "the scale is 1/√d, not 1/d.": _by_ring(q, k, v, window, scale=False, divide=d),
        "this is attention over a window of window + 1 tokens: the window counts the new token itself.":
            attention(q, k, v, sliding_window.window_mask(t, window=window + 1))[0],
        "this is attention over a window of window - 1 tokens: the buffer needs window slots, the new token's "
        "and the window - 1 before it.": attention(q, k, v, sliding_window.window_mask(t, window=window - 1))[0]
        if window > 1 else expected,
        "this is attention over every earlier token (a full cache), not over the last window.":
            attention(q, k, v, torch.ones(t, t, dtype=torch.bool).tril())[0],
    })


def ring_decoder(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise ex-ch11-ring: ``fn(q, k, v, window)`` decodes token by token with a ring buffer of ``window``
    slots and returns the outputs ``(t, d)``, equal to attention under the banded causal mask."""
    if outside := tensors_from_outside(fn):
        raise CheckFailed(f"decode_window reads {listed(outside)}, which holds tensors made before the call (a "
                          f"whole sequence's keys, or results computed beforehand): work from its arguments alone.")
    if tables := _tables_from_outside(fn):
        raise CheckFailed(f"decode_window reads {listed(tables)}, a table made before the call (of slots or "
                          f"positions, for one window and one length). Hint: compute each step's slot inside the "
                          f"function, from n and window.")
    _run_ring(fn, 21, 4, 5, "")
    with on_other_sizes("decode_window", "t = 17 tokens of d = 6 with window = 7",
                        "take t and d from q.shape and use the window argument, not the exercise's numbers."):
        _run_ring(fn, 17, 6, 7, " on t = 17, d = 6, window = 7")
