"""Every chapter 11 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers import long_context, sliding_window
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch11 as check
from attn_helpers.sliding_window import ring_slot as ring_slot_by_its_own_name

# ---------------------------------------------------------------- ex-ch11-slopes


def test_slopes_accepts_the_answer_as_a_list_or_a_tensor(capsys):
    check.alibi_slopes_8([2.0 ** -i for i in range(1, 9)])
    check.alibi_slopes_8(-long_context.alibi_bias(8, 2)[:, 1, 0])
    assert capsys.readouterr().out.count("✓ slopes: correct") == 2


@pytest.mark.parametrize("wrong, hint", [
    ([2.0 ** -i for i in range(0, 8)], "not 2\\^0 = 1"),
    ([2.0 ** -i for i in range(8, 0, -1)], "order is reversed"),
    ([-(2.0 ** -i) for i in range(1, 9)], "positive number"),
    ([2.0 ** (-i / 2) for i in range(1, 9)], "slopes of 16 heads"),
    ([i / 8 for i in range(1, 9)], "not a linear one"),
    ([1 / i for i in range(1, 9)], "not 1/i"),
    ([0.5, 0.25, 0.125, 0.0625], "shape"),
    ("0.5, 0.25", "8 numbers"),
])
def test_slopes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.alibi_slopes_8(wrong)


# ---------------------------------------------------------------- ex-ch11-layouts


def to_halves(W, num_heads):
    d_k = W.shape[0] // num_heads
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
    return W.view(num_heads, d_k, -1)[:, order].reshape(W.shape)


def test_layouts_accepts_solution(capsys):
    check.layout_function(to_halves)
    out = capsys.readouterr().out
    assert "✓ to_halves(W_q, 4): correct" in out and "on h = 3 heads of d_k = 6: correct" in out


def _inverse(W, num_heads):
    d_k = W.shape[0] // num_heads
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)]).argsort()
    return W.view(num_heads, d_k, -1)[:, order].reshape(W.shape)


def _whole(W, num_heads):
    return W[torch.cat([torch.arange(0, W.shape[0], 2), torch.arange(1, W.shape[0], 2)])]


def _columns(W, num_heads):
    return W[:, torch.cat([torch.arange(0, W.shape[1], 2), torch.arange(1, W.shape[1], 2)])]


def _d_k_written_in(W, num_heads):
    order = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])
    return W.view(num_heads, 8, -1)[:, order].reshape(W.shape)


@pytest.mark.parametrize("wrong, hint", [
    (lambda W, h: W, "W is unchanged"),
    (_inverse, "the other way"),
    (_whole, "as one block"),
    (_columns, "the columns"),
    (lambda W, h: W.view(h, W.shape[0] // h, -1)[:, long_context.halves_order(W.shape[0] // h)].reshape(W.shape),
     "calls ah.long_context.halves_order"),
    (_d_k_written_in, "take d_k from W.shape"),
])
def test_layouts_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.layout_function(wrong)


# ---------------------------------------------------------------- ex-ch11-ring


def decode_window(q, k, v, window):
    t, d = q.shape
    keys, values = torch.zeros(window, d), torch.zeros(window, d)
    filled = torch.zeros(window, dtype=torch.bool)
    outs = []
    for n in range(t):
        slot = n % window
        keys, values = keys.clone(), values.clone()
        keys[slot], values[slot], filled[slot] = k[n], v[n], True
        w = torch.softmax((keys @ q[n] / math.sqrt(d)).masked_fill(~filled, -math.inf), dim=0)
        outs.append(w @ values)
    return torch.stack(outs)


def test_ring_accepts_solution(capsys):
    check.ring_decoder(decode_window)
    out = capsys.readouterr().out
    assert "✓ decode_window: correct" in out and "on t = 17, d = 6, window = 7: correct" in out


def test_ring_accepts_a_batched_buffer_with_the_books_attention(capsys):
    def with_ah_attention(q, k, v, window):
        keys, values = torch.zeros(window, q.shape[1]), torch.zeros(window, q.shape[1])
        filled, outs = torch.zeros(window, dtype=torch.bool), []
        for n in range(q.shape[0]):
            at = torch.arange(window) == n % window
            keys, values = torch.where(at[:, None], k[n], keys), torch.where(at[:, None], v[n], values)
            filled = filled | at
            outs.append(ah.attention(q[n:n + 1], keys, values, mask=filled[None])[0])
        return torch.cat(outs)

    check.ring_decoder(with_ah_attention)
    assert "✓ decode_window: correct" in capsys.readouterr().out


def _full_cache(q, k, v, window):  # the shortcut: keep every key, mask to the band
    outs = []
    for n in range(q.shape[0]):
        keys, values = k[: n + 1], v[: n + 1]
        scores = keys @ q[n] / math.sqrt(q.shape[1])
        scores[: max(0, n + 1 - window)] = -math.inf
        outs.append(torch.softmax(scores, dim=0) @ values)
    return torch.stack(outs)


def _full_cache_elementwise(q, k, v, window):  # the same shortcut without a matrix product
    outs = []
    for n in range(q.shape[0]):
        scores = (k[: n + 1] * q[n]).sum(-1) / math.sqrt(q.shape[1])
        scores[: max(0, n + 1 - window)] = -math.inf
        w = scores.exp() / scores.exp().sum()
        outs.append((w[:, None] * v[: n + 1]).sum(0))
    return torch.stack(outs)


def _all_at_once(q, k, v, window):
    t = q.shape[0]
    band = torch.ones(t, t, dtype=torch.bool).tril() & ~torch.ones(t, t, dtype=torch.bool).tril(-window)
    return ah.attention(q, k, v, mask=band)[0]


def _variant(mask_empty=True, write_first=True, scale=True, window_plus=0):
    def fn(q, k, v, window):
        window_used = window + window_plus
        t, d = q.shape
        keys, values = torch.zeros(window_used, d), torch.zeros(window_used, d)
        filled, outs = torch.zeros(window_used, dtype=torch.bool), []
        for n in range(t):
            slot = n % window_used
            if write_first:
                keys, values = keys.clone(), values.clone()
                keys[slot], values[slot], filled[slot] = k[n], v[n], True
            allowed = filled if mask_empty else torch.ones(window_used, dtype=torch.bool)
            scores = (keys @ q[n]) / (math.sqrt(d) if scale else 1.0)
            outs.append(torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=0) @ values)
            if not write_first:
                keys, values = keys.clone(), values.clone()
                keys[slot], values[slot], filled[slot] = k[n], v[n], True
        return torch.stack(outs)
    return fn


def _attend_then_write(q, k, v, window):  # with the book's attention: a query with no slot gets zeros, not NaN
    keys, values = torch.zeros(window, q.shape[1]), torch.zeros(window, q.shape[1])
    filled, outs = torch.zeros(window, dtype=torch.bool), []
    for n in range(q.shape[0]):
        outs.append(ah.attention(q[n:n + 1], keys, values, mask=filled[None])[0])
        at = torch.arange(window) == n % window
        keys, values = torch.where(at[:, None], k[n], keys), torch.where(at[:, None], v[n], values)
        filled = filled | at
    return torch.cat(outs)


def _band_sliced(q, k, v, window):  # no buffer: the last window keys sliced from the whole sequence each step
    outs = []
    for n in range(q.shape[0]):
        keys, values = k[max(0, n - window + 1): n + 1], v[max(0, n - window + 1): n + 1]
        outs.append(torch.softmax(keys @ q[n] / math.sqrt(q.shape[1]), dim=0) @ values)
    return torch.stack(outs)


def _band_indexed(q, k, v, window):  # the same, through index_select
    outs = []
    for n in range(q.shape[0]):
        rows = torch.arange(max(0, n - window + 1), n + 1)
        keys, values = k.index_select(0, rows), v.index_select(0, rows)
        outs.append(torch.softmax(keys @ q[n] / math.sqrt(q.shape[1]), dim=0) @ values)
    return torch.stack(outs)


def test_ring_accepts_a_first_in_first_out_buffer_of_window_keys(capsys):
    def fifo(q, k, v, window):  # never more than window keys kept: not the full-cache shortcut
        keys, values, outs = [], [], []
        for n in range(q.shape[0]):
            keys, values = (keys + [k[n]])[-window:], (values + [v[n]])[-window:]
            w = torch.softmax(torch.stack(keys) @ q[n] / math.sqrt(q.shape[1]), dim=0)
            outs.append(w @ torch.stack(values))
        return torch.stack(outs)

    check.ring_decoder(fifo)
    assert "✓ decode_window: correct" in capsys.readouterr().out


Q_ALL, K_ALL, V_ALL = check.ring_inputs()


def _reads_global(q, k, v, window):
    return ah.attention(Q_ALL, K_ALL, V_ALL, mask=sliding_window.window_mask(21, window=5))[0]


def _window_written_in(q, k, v, window):
    return decode_window(q, k, v, 5)


@pytest.mark.parametrize("wrong, hint", [
    (_full_cache, "recomputing from a full cache"),
    (_all_at_once, "recomputing from a full cache"),
    (_full_cache_elementwise, "recomputing from a full cache"),
    (_band_sliced, "several rows of the whole sequence.*full cache"),
    (_band_indexed, "several rows of the whole sequence.*full cache"),
    (_variant(mask_empty=False), "mask the slots that hold no token"),
    (_variant(write_first=False), "contains NaN.*write first, then attend"),
    (_attend_then_write, "attended the buffer before its own key"),
    (_variant(scale=False), "scale 1/√d"),
    (lambda q, k, v, w: _variant()(q, k, v, w - 1) if w > 1 else None, "window of window \\+ 1|wrong values"),
    (_reads_global, "reads K_ALL, Q_ALL, V_ALL"),
    (_window_written_in, "use the window argument"),
    (lambda q, k, v, w: sliding_window.RingCache.empty(1, 1, 1, w) and decode_window(q, k, v, w) * 0
     + ah.attention(q, k, v, mask=sliding_window.window_mask(q.shape[0], window=w))[0], "does the exercise for you"),
    (lambda q, k, v, w: [ring_slot_by_its_own_name(n, w) for n in range(2)] and decode_window(q, k, v, w),
     "does the exercise for you"),
])
def test_ring_rejects_mistakes_and_the_shortcut(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.ring_decoder(wrong)
