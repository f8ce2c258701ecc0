"""Every chapter 11 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

import attn_helpers as ah
from attn_helpers import long_context, sliding_window
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch11 as check
from attn_helpers.sliding_window import ring_slot as ring_slot_by_its_own_name

# ---------------------------------------------------------------- ex-ch11-slopes


EIGHT = [2.0 ** -i for i in range(1, 9)]
TWELVE = EIGHT + [2.0 ** -(i / 2) for i in (1, 3, 5, 7)]


def test_slopes_accepts_the_answer_as_a_list_or_a_tensor(capsys):
    check.alibi_slopes_12(TWELVE)
    check.alibi_slopes_12(-long_context.alibi_bias(12, 2)[:, 1, 0])
    assert capsys.readouterr().out.count("✓ slopes: correct") == 2


SLOPE_MISTAKES = [
    ([2.0 ** (-8 * i / 12) for i in range(1, 13)], "12 is not a power of 2"),
    ([2.0 ** (-i / 12) for i in range(1, 13)], "exponent is -8·i/h, not -i/h"),
    ([2.0 ** (-8 * i / 12) for i in range(0, 12)], "start at one step, not at zero"),
    (sorted(TWELVE, reverse=True), "being sorted in among them"),
    (EIGHT + [2.0 ** -(i / 2) for i in (1, 2, 3, 4)], "every other slope of 16 heads"),
    (EIGHT + [2.0 ** -(i / 2) for i in (2, 4, 6, 8)], "repeat slopes the first 8 heads have"),
    (EIGHT + [2.0 ** -(2 * i) for i in (1, 2, 3, 4)], "not from 4 heads"),
    ([2.0 ** -(i / 2) for i in range(1, 13)], "first 12 slopes of 16 heads"),
    (TWELVE[::-1], "order is reversed"),
    ([-m for m in TWELVE], "positive number"),
    ([i / 12 for i in range(1, 13)], "not a linear one"),
    ([1 / i for i in range(1, 13)], "not 1/i"),
    (EIGHT, "slopes of 8 heads.*4 more"),
    ([0.5, 0.25, 0.125], "12 numbers, one per head"),
    ("0.5, 0.25", "12 numbers"),
]


@pytest.mark.parametrize("wrong, hint", SLOPE_MISTAKES)
def test_slopes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.alibi_slopes_12(wrong)


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


def _odd_first(W, num_heads):
    d_k = W.shape[0] // num_heads
    order = torch.cat([torch.arange(1, d_k, 2), torch.arange(0, d_k, 2)])
    return W.view(num_heads, d_k, -1)[:, order].reshape(W.shape)


def _heads_inner(W, num_heads):
    d_k = W.shape[0] // num_heads
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
    return W.view(d_k, num_heads, -1)[order].reshape(W.shape)


def _not_reshaped(W, num_heads):
    d_k = W.shape[0] // num_heads
    order = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
    return W.view(num_heads, d_k, -1)[:, order]


def _in_float64(W, num_heads):
    return to_halves(W.double(), num_heads)


ORDER = long_context.halves_order(8)  # a table made before the function: the helper the exercise rules out


def _table_made_before(W, num_heads):
    return W.view(num_heads, 8, -1)[:, ORDER].reshape(W.shape)


LAYOUT_MISTAKES = [
    (_odd_first, "odd features came first"),
    (_heads_inner, "heads as the inner axis"),
    (_not_reshaped, "reshape it back"),
    (_in_float64, "dtype torch.float64"),
    (_table_made_before, "reads ORDER.*build the order"),
    (lambda W, h: W, "W is unchanged"),
    (_inverse, "the other way"),
    (_whole, "as one block"),
    (_columns, "the columns"),
    (lambda W, h: W.view(h, W.shape[0] // h, -1)[:, long_context.halves_order(W.shape[0] // h)].reshape(W.shape),
     "calls ah.long_context.halves_order"),
    (_d_k_written_in, "take d_k from the number of rows of W"),
]


@pytest.mark.parametrize("wrong, hint", LAYOUT_MISTAKES)
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


def _stacked_row_by_row(q, k, v, window):  # every step stacks the window's rows of the whole k again
    outs = []
    for n in range(q.shape[0]):
        rows = range(max(0, n - window + 1), n + 1)
        keys, values = torch.stack([k[j] for j in rows]), torch.stack([v[j] for j in rows])
        outs.append(torch.softmax(keys @ q[n] / math.sqrt(q.shape[1]), dim=0) @ values)
    return torch.stack(outs)


def _unbound(q, k, v, window):  # the rows of k handed out at once, the window's stacked again at each step
    ks, vs, outs = k.unbind(0), v.unbind(0), []
    for n in range(q.shape[0]):
        lo = max(0, n - window + 1)
        keys, values = torch.stack(ks[lo:n + 1]), torch.stack(vs[lo:n + 1])
        outs.append(torch.softmax(keys @ q[n] / math.sqrt(q.shape[1]), dim=0) @ values)
    return torch.stack(outs)


def _padded_unfold(q, k, v, window):  # zero-padding, then every window at once by unfold
    t, d = q.shape
    pk, pv = torch.nn.functional.pad(k, (0, 0, window - 1, 0)), torch.nn.functional.pad(v, (0, 0, window - 1, 0))
    kw, vw = pk.unfold(0, window, 1), pv.unfold(0, window, 1)  # (t, d, window)
    outs = []
    for n in range(t):
        scores = (q[n] @ kw[n] / math.sqrt(d)).masked_fill(torch.arange(window) < window - 1 - n, -math.inf)
        outs.append(vw[n] @ torch.softmax(scores, dim=0))
    return torch.stack(outs)


def _growing_list(q, k, v, window):  # a list of every key, of which only the last window are scored
    keys, values, outs = [], [], []
    for n in range(q.shape[0]):
        keys.append(k[n])
        values.append(v[n])
        w = torch.softmax(torch.stack(keys[-window:]) @ q[n] / math.sqrt(q.shape[1]), dim=0)
        outs.append(w @ torch.stack(values[-window:]))
    return torch.stack(outs)


def _from_ring_cache(q, k, v, window):  # the chapter's empty cache as the buffers
    cache = sliding_window.RingCache.empty(1, 1, q.shape[1], window)
    keys, values = cache.k[0, 0].clone(), cache.v[0, 0].clone()
    filled, outs = torch.zeros(window, dtype=torch.bool), []
    for n in range(q.shape[0]):
        keys[n % window], values[n % window], filled[n % window] = k[n], v[n], True
        w = torch.softmax((keys @ q[n] / math.sqrt(q.shape[1])).masked_fill(~filled, -math.inf), dim=0)
        outs.append(w @ values)
    return torch.stack(outs)


SLOTS = [n % 5 for n in range(21)]  # a table of ring slots made before the function


def _slot_table(q, k, v, window):
    keys, values = torch.zeros(window, q.shape[1]), torch.zeros(window, q.shape[1])
    filled, outs = torch.zeros(window, dtype=torch.bool), []
    for n in range(q.shape[0]):
        keys, values = keys.clone(), values.clone()
        keys[SLOTS[n]], values[SLOTS[n]], filled[SLOTS[n]] = k[n], v[n], True
        w = torch.softmax((keys @ q[n] / math.sqrt(q.shape[1])).masked_fill(~filled, -math.inf), dim=0)
        outs.append(w @ values)
    return torch.stack(outs)


def _softmax_per_slot(q, k, v, window):  # scores as a column, softmax over the wrong axis
    keys, values = torch.zeros(window, q.shape[1]), torch.zeros(window, q.shape[1])
    filled, outs = torch.zeros(window, dtype=torch.bool), []
    for n in range(q.shape[0]):
        keys, values = keys.clone(), values.clone()
        keys[n % window], values[n % window], filled[n % window] = k[n], v[n], True
        scores = (keys @ q[n:n + 1].T / math.sqrt(q.shape[1])).masked_fill(~filled[:, None], -math.inf)
        outs.append((torch.softmax(scores, dim=-1) * values).sum(0))
    return torch.stack(outs)


def _scaled_by_d(q, k, v, window):
    return _variant()(q * math.sqrt(q.shape[1]) / q.shape[1], k, v, window)


def _rows_of_one(q, k, v, window):
    return _variant()(q, k, v, window)[:, None, :]


def test_ring_accepts_a_loop_over_the_rows_and_a_copy_in_float32(capsys):
    def by_rows(q, k, v, window):
        q, k, v = q.float(), k.detach(), v.contiguous()
        keys, values = torch.zeros(window, q.shape[1]), torch.zeros(window, q.shape[1])
        filled, outs = torch.zeros(window, dtype=torch.bool), []
        for n, (q_n, k_n, v_n) in enumerate(zip(q, k, v, strict=True)):
            keys, values = keys.clone(), values.clone()
            keys[n % window], values[n % window], filled[n % window] = k_n, v_n, True
            w = torch.softmax((keys @ q_n / math.sqrt(q.shape[1])).masked_fill(~filled, -math.inf), dim=0)
            outs.append(w @ values)
        return torch.stack(outs)

    check.ring_decoder(by_rows)
    assert "✓ decode_window: correct" in capsys.readouterr().out


Q_ALL, K_ALL, V_ALL = check.ring_inputs()


def _reads_global(q, k, v, window):
    return ah.attention(Q_ALL, K_ALL, V_ALL, mask=sliding_window.window_mask(21, window=5))[0]


def _window_written_in(q, k, v, window):
    return decode_window(q, k, v, 5)


RING_MISTAKES = [
    (_full_cache, "recomputing from a full cache"),
    (_all_at_once, "recomputing from a full cache"),
    (_full_cache_elementwise, "recomputing from a full cache"),
    (_band_sliced, "several rows of the whole sequence.*full cache"),
    (_band_indexed, "several rows of the whole sequence.*full cache"),
    (_stacked_row_by_row, "takes earlier rows of k or v from the sequence again"),
    (_unbound, "takes earlier rows of k or v from the sequence again"),
    (_padded_unfold, "holds .* rows of the sequence's keys \\(or values\\) at once"),
    (_growing_list, "holds .* rows of the sequence's keys \\(or values\\) at once"),
    (_from_ring_cache, "calls RingCache.empty"),
    (_slot_table, "reads SLOTS, a table made before the call"),
    (_softmax_per_slot, "softmax over the slots"),
    (_scaled_by_d, "not 1/d"),
    (_rows_of_one, "has shape \\(21, 1, 4\\)"),
    (_variant(window_plus=1), "window \\+ 1 = 6 keys: a buffer of window \\+ 1 slots"),
    (_variant(mask_empty=False), "mask the slots that hold no token"),
    (_variant(write_first=False), "contains NaN.*write first, then attend"),
    (_attend_then_write, "attended the buffer before its own key"),
    (_variant(scale=False), "scale 1/√d"),
    (lambda q, k, v, w: _variant()(q, k, v, w - 1) if w > 1 else None, "window of window - 1 tokens"),
    (_reads_global, "reads K_ALL, Q_ALL and V_ALL"),
    (_window_written_in, "use the window argument"),
    (lambda q, k, v, w: sliding_window.RingCache.empty(1, 1, 1, w) and decode_window(q, k, v, w) * 0
     + ah.attention(q, k, v, mask=sliding_window.window_mask(q.shape[0], window=w))[0], "does the exercise for you"),
    (lambda q, k, v, w: [ring_slot_by_its_own_name(n, w) for n in range(2)] and decode_window(q, k, v, w),
     "does the exercise for you"),
]


@pytest.mark.parametrize("wrong, hint", RING_MISTAKES)
def test_ring_rejects_mistakes_and_the_shortcut(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.ring_decoder(wrong)


# ---------------------------------------------------------------- no hint quotes a solution

TOKEN = re.compile(r"\w+|[^\s\w]")


def _runs(text, n):
    """Every run of n consecutive Python-like tokens of `text`, as a tuple."""
    tokens = TOKEN.findall(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def _solutions():
    chapter = Path(__file__).parent.parent / "chapters" / "11_longer_than_trained.ipynb"
    cells = json.loads(chapter.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if "solution" in c.get("metadata", {}).get("tags", [])]
    return "\n".join(line.split("#")[0] for text in code for line in text.splitlines())


@pytest.mark.parametrize("check_fn, mistakes", [(check.alibi_slopes_12, SLOPE_MISTAKES),
                                                (check.layout_function, LAYOUT_MISTAKES),
                                                (check.ring_decoder, RING_MISTAKES)])
def test_no_hint_quotes_the_solution(check_fn, mistakes):
    """A hint names the mistake and the idea: no run of six tokens of the solutions' code is in it."""
    quoted = _runs(_solutions(), 6)
    for wrong, _ in mistakes:
        with pytest.raises(CheckFailed) as failed:
            check_fn(wrong)
        assert not _runs(str(failed.value), 6) & quoted, (str(failed.value), _runs(str(failed.value), 6) & quoted)
