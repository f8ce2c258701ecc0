"""Self-checks for chapter 11's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import long_context, position, sliding_window
from ..attention import attention
from . import CheckFailed, Watch, call, check_tensor, on_other_sizes, tensors_from_outside

__all__ = ["alibi_slopes_8", "layout_weights", "layout_function", "ring_inputs", "ring_decoder"]


def alibi_slopes_8(answer: object) -> None:
    """Exercise ex-ch11-slopes: the ALiBi slopes of the 8 heads, head 1 first."""
    try:
        slopes = torch.as_tensor(answer, dtype=torch.float64).float()
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailed(f"slopes should be 8 numbers (a list or a tensor), got {type(answer).__name__}.") from None
    i = torch.arange(1, 9, dtype=torch.float64)
    check_tensor(slopes, long_context.alibi_slopes(8), "slopes", {
        "the first head's slope is 2^(-8/h), not 2^0 = 1: the exponents start at one step, not at zero.":
            (2.0 ** -(i - 1)).float(),
        "the order is reversed: head 1 has the largest slope and the last head the smallest.":
            long_context.alibi_slopes(8).flip(0),
        "a slope is a positive number; the sign comes in the bias, which is −m · distance.":
            -long_context.alibi_slopes(8),
        "the exponent's step is 8/h with h = 8 heads; these are the slopes of 16 heads.":
            long_context.alibi_slopes(16)[:8],
        "the slopes form a geometric sequence (a constant ratio from head to head), not a linear one.": (i / 8).float(),
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
    order = long_context.halves_order(d_k)
    check_tensor(new_q, _per_head(W_q, h, order), f"to_halves(W_q, {h}){what}", {
        "W is unchanged: reorder the rows of each head.": W_q,
        "you reordered all h·d_k rows as one block; each head has its own pairs, so reorder the d_k rows of "
        "each head separately.": W_q[long_context.halves_order(h * d_k)],
        "you reordered the columns (the input features); RoPE pairs the output features, the rows of an "
        "nn.Linear weight.": W_q[:, long_context.halves_order(d_model)] if d_model % 2 == 0 else W_q,
        "this is the conversion the other way, from halves to interleaved: invert the order.":
            _per_head(W_q, h, order.argsort()),
    })
    x = torch.randn(5, d_model, generator=torch.Generator().manual_seed(1102))  # (t, d_model)
    check_tensor(_scores(new_q.detach(), new_k.detach(), x, h, "halves"),
                 _scores(W_q, W_k, x, h, "interleaved"),
                 f"scores with the halves layout{what}", atol=1e-3)


def layout_function(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise ex-ch11-layouts: ``fn(W, num_heads)`` reorders the rows of an interleaved-RoPE projection for the
    halves layout; the scores of ``rope_halves`` on the result equal those of ``ah.position.rope`` on ``W``."""
    _check_layouts(fn, 4, 8, 32, "")
    with on_other_sizes("to_halves", "h = 3 heads of d_k = 6", "take d_k from W.shape[0] and num_heads."):
        _check_layouts(fn, 3, 6, 10, " on h = 3 heads of d_k = 6")


def ring_inputs(t: int = 21, d: int = 4, seed: int = 1103) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch11-ring: queries, keys and values ``(t, d)`` of one head, positions already applied."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t, d, generator=gen) for _ in range(3))


def _by_ring(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, *, mask_empty: bool = True,
             write_first: bool = True, scale: bool = True) -> torch.Tensor:
    """The check's own ring-buffer decoder, with the switches that give the usual mistakes."""
    t, d = q.shape
    keys, values, filled, outs = torch.zeros(window, d), torch.zeros(window, d), torch.zeros(window, dtype=torch.bool), []
    for n in range(t):
        if write_first:
            keys, values = keys.index_copy(0, torch.tensor([n % window]), k[n:n + 1]), values.index_copy(
                0, torch.tensor([n % window]), v[n:n + 1])
            filled = filled | (torch.arange(window) == n % window)
        allowed = filled if mask_empty else torch.ones(window, dtype=torch.bool)
        out, _ = attention(q[n:n + 1], keys, values, allowed[None], scale=None if scale else 1.0)
        outs.append(out[0])
        if not write_first:
            keys, values = keys.index_copy(0, torch.tensor([n % window]), k[n:n + 1]), values.index_copy(
                0, torch.tensor([n % window]), v[n:n + 1])
            filled = filled | (torch.arange(window) == n % window)
    return torch.stack(outs)  # (t, d)


# the operators that score keys or normalise scores: none may see more than `window` keys at a step
_SCORING = ("mm", "bmm", "mv", "addmv", "dot", "matmul", "addmm", "baddbmm", "sum", "amax", "max", "_softmax",
            "_log_softmax", "exp", "_safe_softmax", "logsumexp")
# the operators that take rows out of a tensor: from the sequence's (t, d) keys, one row a step at most
_READING = ("slice", "narrow", "index", "index_select", "gather", "take")


def _run_ring(fn: Callable, t: int, d: int, window: int, what: str) -> None:
    q, k, v = ring_inputs(t, d)
    forbidden = {sliding_window.ring_slot: "ah.sliding_window.ring_slot",
                 sliding_window.RingCache.write: "RingCache.write",
                 sliding_window.window_mask: "ah.sliding_window.window_mask"}
    with Watch(forbidden) as watch:
        answer = call(fn, q.clone(), k.clone(), v.clone(), window, name="decode_window")
    if watch.called:
        raise CheckFailed(f"decode_window calls {', '.join(sorted(watch.called))}, which does the exercise for you. "
                          f"Hint: compute the slot and the mask yourself, from n and window.")
    big = [op for op in watch.ops if op.name in _SCORING
           and any(size > window for shape in op.inputs + op.outputs for size in shape[-2:] if len(shape))]
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
    if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and torch.isnan(answer).any():
        raise CheckFailed(f"decode_window{what} contains NaN: a query had no slot to attend, so its softmax was over "
                          f"-inf alone. Hint: at step 0 the buffer is empty until token 0 is written; write first, "
                          f"then attend.")
    expected = attention(q, k, v, sliding_window.window_mask(t, window=window))[0]
    check_tensor(answer, expected, f"decode_window{what}", {
        "before the buffer is full some slots are still empty (zeros), and the query attended them too: mask "
        "the slots that hold no token yet.": _by_ring(q, k, v, window, mask_empty=False),
        "the query attended the buffer before its own key and value were written: write first, then attend.":
            _by_ring(q, k, v, window, write_first=False),
        "you forgot the scale 1/√d.": _by_ring(q, k, v, window, scale=False),
        "this is attention over a window of window + 1 tokens: the window counts the new token itself.":
            attention(q, k, v, sliding_window.window_mask(t, window=window + 1))[0],
        "this is attention over every earlier token (a full cache), not over the last window.":
            attention(q, k, v, torch.ones(t, t, dtype=torch.bool).tril())[0],
    })


def ring_decoder(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise ex-ch11-ring: ``fn(q, k, v, window)`` decodes token by token with a ring buffer of ``window``
    slots and returns the outputs ``(t, d)``, equal to attention under the banded causal mask."""
    if outside := tensors_from_outside(fn):
        raise CheckFailed(f"decode_window reads {', '.join(outside)}, which holds tensors made before the call (a "
                          f"whole sequence's keys, or results computed beforehand): work from its arguments alone.")
    _run_ring(fn, 21, 4, 5, "")
    with on_other_sizes("decode_window", "t = 17 tokens of d = 6 with window = 7",
                        "take t and d from q.shape and use the window argument, not the exercise's numbers."):
        _run_ring(fn, 17, 6, 7, " on t = 17, d = 6, window = 7")
