"""Chapter 9's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch09 as check

# ex-ch09-predict: the bytes of a grouped-query cache

PER_NUMBER = 2  # bfloat16


def test_cache_bytes_accepts_reference(capsys):
    check.cache_bytes(2 * check.N_LAYERS * check.G * check.D_K * PER_NUMBER * check.T)
    assert "✓ cache_bytes: correct" in capsys.readouterr().out


def test_cache_bytes_accepts_the_measured_cache(capsys):
    torch.manual_seed(0)
    model = ah.inference.TinyDecoder(50, check.H * check.D_K, check.H, check.G, check.N_LAYERS).to(check.DTYPE)
    with torch.no_grad():
        _, caches = model(torch.zeros(1, check.T, dtype=torch.long))
    check.cache_bytes(sum(c.nbytes for c in caches))
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (2 * 4 * 8 * 16 * 2 * 100, "g = 2 shared heads"),
    (4 * 2 * 16 * 2 * 100, "keys AND values"),
    (2 * 4 * 2 * 16 * 4 * 100, "2 bytes"),
    (2 * 4 * 2 * 16 * 2, "per token"),
    (2 * 2 * 16 * 2 * 100, "n_layers"),
    (2 * 4 * 2 * 128 * 2 * 100, r"model's width \(128\) as the width of a key"),  # d_model for d_k
    (2 * 4 * 8 * 128 * 2 * 100, "every key/value head as d_model = 128 numbers wide and all h = 8"),
    ("51200", "should be a number"),
    (12345, "is not right"),
])
def test_cache_bytes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.cache_bytes(wrong)


def measured_bytes(*args):
    torch.manual_seed(0)
    model = ah.inference.TinyDecoder(*args).to(check.DTYPE)
    with torch.no_grad():
        _, caches = model(torch.zeros(1, check.T, dtype=torch.long))
    return sum(c.nbytes for c in caches)


@pytest.mark.parametrize("swapped, hint", [
    ((4, 128, 8, 2, 50), "vocabulary size and the number of layers were swapped"),  # 50 layers
    ((50, 128, 4, 2, 8), "num_heads and n_layers swapped"),  # d_k = 32, 8 layers
])
def test_cache_bytes_names_a_model_built_with_swapped_arguments(swapped, hint):
    with pytest.raises(CheckFailed, match=hint) as failure:
        check.cache_bytes(measured_bytes(*swapped))
    assert "keyword" in str(failure.value) and "51200" not in str(failure.value)


def test_swapping_num_kv_heads_and_n_layers_gives_the_same_bytes_which_is_why_the_exercise_asks_for_keywords(capsys):
    right = measured_bytes(50, 128, 8, 2, 4)
    assert measured_bytes(50, 128, 8, 4, 2) == right  # no check of a number can tell these apart
    check.cache_bytes(right)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("swapped", [(128, 50, 8, 2, 4), (50, 128, 2, 8, 4), (50, 4, 8, 2, 128)])
def test_other_swaps_do_not_build_a_model(swapped):
    with pytest.raises(ValueError):
        measured_bytes(*swapped)


# ex-ch09-merge: merging two (m, l, o) triples


def reference_merge(a, b):
    m = torch.maximum(a[0], b[0])
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    fa, fb = torch.exp(a[0] - safe), torch.exp(b[0] - safe)
    return m, a[1] * fa + b[1] * fb, a[2] * fa + b[2] * fb


def test_merge_accepts_reference(capsys):
    check.merge_function(reference_merge)
    out = capsys.readouterr().out
    assert "✓ m: correct" in out and "✓ o / l against attention over all keys: correct" in out


def nan_merge(a, b):  # forgets that -inf - (-inf) is NaN
    m = torch.maximum(a[0], b[0])
    fa, fb = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * fa + b[1] * fb, a[2] * fa + b[2] * fb


def no_rescale(a, b):
    return torch.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2]


def normalised(a, b):
    m, ell, o = reference_merge(a, b)
    return m, ell, o / torch.where(ell == 0, torch.ones_like(ell), ell)


def divided_by_l(a, b):  # the guard is there, but o is normalised: 0 / 0 for the query with no key anywhere
    m, ell, o = reference_merge(a, b)
    return m, ell, o / ell


def test_merge_names_the_division_by_a_zero_sum_not_the_guard():
    with pytest.raises(CheckFailed, match="divided by l, which is 0 for that query: 0 / 0 is NaN") as failure:
        check.merge_function(divided_by_l)
    assert "replace an infinite M" not in str(failure.value)  # the guard is there: that hint would mislead


def test_merge_still_names_the_missing_guard_when_the_output_is_divided_too():
    def no_guard_divided(a, b):
        m, ell, o = nan_merge(a, b)
        return m, ell, o / ell

    with pytest.raises(CheckFailed, match="replace an infinite M by 0 first"):
        check.merge_function(no_guard_divided)


def min_instead_of_max(a, b):
    return (torch.minimum(a[0], b[0]), *reference_merge(a, b)[1:])


def m_o_l_order(a, b):
    m, ell, o = reference_merge(a, b)
    return m, o, ell


def l_m_o_order(a, b):
    m, ell, o = reference_merge(a, b)
    return ell, m, o


def zeroed_m(a, b):  # returns the -inf-free copy of the maximum instead of the maximum
    m, ell, o = reference_merge(a, b)
    return torch.where(torch.isinf(m), torch.zeros_like(m), m), ell, o


def merge_by_helper(a, b):  # the shortcut the exercise forbids, reached by a name of its own
    from attn_helpers.merge import merge_partials as merge

    return merge([a, b])


@pytest.mark.parametrize("wrong, hint", [
    (lambda a, b: ah.merge.merge_partials([a, b]), "calls ah.merge.merge_partials"),
    (merge_by_helper, "calls ah.merge.merge_partials"),
    (nan_merge, "contains NaN"),
    (no_rescale, "rescale each sum"),
    (normalised, "keep o unnormalised"),
    (min_instead_of_max, "larger of the two"),
    (lambda a, b: reference_merge(a, b)[2], "should return the triple"),
    (m_o_l_order, r"order \(m, o, l\)"),
    (l_m_o_order, r"order \(l, m, o\)"),
    (zeroed_m, "should stay -inf"),
])
def test_merge_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.merge_function(wrong)


def test_merge_hint_on_m_names_the_mistake_without_the_code():
    with pytest.raises(CheckFailed, match="larger of the two shards' maxima") as failure:
        check.merge_function(min_instead_of_max)
    assert "torch.maximum" not in str(failure.value)  # the hint names the rule, not the line that solves it


def test_merge_names_a_triple_on_another_device():  # "meta" stands in for a GPU
    with pytest.raises(CheckFailed, match="m is on the meta device"):
        check.merge_function(lambda a, b: tuple(x.to("meta") for x in reference_merge(a, b)))


# ex-ch09-gqa: grouped-query attention for one new token, without copying keys


def reference_gqa(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    stacked = q.reshape(b, g, h // g, d_k)  # (b, g, h/g, d_k)
    w = torch.softmax(stacked @ k.transpose(-2, -1) / d_k ** 0.5, dim=-1)  # (b, g, h/g, t)
    return (w @ v).reshape(b, h, 1, -1)


def test_gqa_accepts_reference(capsys):
    check.gqa_function(reference_gqa)
    assert "✓ gqa_decode(q, k, v): correct" in capsys.readouterr().out


def test_gqa_names_an_output_on_another_device():  # "meta" stands in for a GPU
    on_gpu = reference_gqa(*check.gqa_inputs()).to("meta")  # moved outside the function the check watches
    with pytest.raises(CheckFailed, match=r"gqa_decode\(q, k, v\) is on the meta device"):
        check.gqa_function(lambda q, k, v: on_gpu)


def in_float64_with_einsum(q, k, v):  # another right way: converted copies of the cache, but one each
    b, h, _, d_k = q.shape
    g = k.shape[1]
    q, k, v = q.double().reshape(b, g, h // g, d_k), k.double(), v.double()
    w = torch.softmax(torch.einsum("bgrd,bgtd->bgrt", q, k) / d_k ** 0.5, dim=-1)  # (b, g, h/g, t)
    return torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(b, h, 1, d_k).float()


def test_gqa_accepts_another_way_that_copies_the_cache_once(capsys):
    check.gqa_function(in_float64_with_einsum)
    assert "✓ gqa_decode(q, k, v): correct" in capsys.readouterr().out


def test_the_helper_computes_the_expected_output():  # the check forbids calling it; it must still be right
    q, k, v = check.gqa_inputs()
    assert torch.allclose(ah.inference.grouped_query_attention(q, k, v)[0], reference_gqa(q, k, v), atol=1e-6)


def repeated(q, k, v):  # right numbers, but copies the keys once per query head
    r = q.shape[1] // k.shape[1]
    return ah.attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1))[0]


def broadcast(q, k, v):  # right numbers, but matmul copies the broadcast keys
    b, h, _, d_k = q.shape
    g = k.shape[1]
    return ah.attention(q.view(b, g, h // g, 1, d_k), k[:, :, None], v[:, :, None])[0].reshape(b, h, 1, d_k)


def repeated_per_batch_element(q, k, v):  # right numbers; each copy is smaller than (b, h, t, d_k)
    r = q.shape[1] // k.shape[1]
    return torch.stack([ah.attention(q[i], k[i].repeat_interleave(r, 0), v[i].repeat_interleave(r, 0))[0]
                        for i in range(q.shape[0])])


def repeated_per_group(q, k, v):  # right numbers; copies of one (t, d_k) head at a time, r per group
    b, h, _, d_k = q.shape
    g = k.shape[1]
    r = h // g
    heads = []
    for i in range(b):
        for j in range(g):
            keys, values = k[i, j].expand(r, -1, -1).contiguous(), v[i, j].expand(r, -1, -1).contiguous()
            heads.append(ah.attention(q[i, j * r:(j + 1) * r], keys, values)[0])  # (r, 1, d_k)
    return torch.stack(heads).reshape(b, h, 1, d_k)


def repeated_transposed(q, k, v):  # right numbers; the keys copied per head in (d_k, t) layout
    r = q.shape[1] // k.shape[1]
    keys_t = k.transpose(-2, -1).repeat_interleave(r, 1)  # (b, h, d_k, t)
    w = torch.softmax(q @ keys_t / q.shape[-1] ** 0.5, dim=-1)
    return w @ v.repeat_interleave(r, 1)


def sdpa_math(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def wrong_pairing(q, k, v):
    r = q.shape[1] // k.shape[1]
    return ah.attention(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1))[0]


def unscaled(q, k, v):
    b, h, _, d_k = q.shape
    w = torch.softmax(q.reshape(b, k.shape[1], -1, d_k) @ k.transpose(-2, -1), dim=-1)
    return (w @ v).reshape(b, h, 1, -1)


def sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


@pytest.mark.parametrize("wrong, hint", [
    (repeated, "copied once per query head"),
    (broadcast, "copied once per query head"),
    (repeated_per_batch_element, "copied once per query head"),
    (repeated_per_group, "copied once per query head"),
    (repeated_transposed, "copied once per query head"),
    (lambda q, k, v: ah.inference.grouped_query_attention(q, k, v)[0], "calls ah.inference.grouped_query_attention"),
    (sdpa_math, "calls scaled_dot_product_attention"),
    (wrong_pairing, "wrong key heads"),
    (unscaled, "not scaled"),
    (sdpa, "calls scaled_dot_product_attention"),
    (lambda q, k, v: (reference_gqa(q, k, v), None), "not a tuple"),
])
def test_gqa_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.gqa_function(wrong)


def scaled_copies_per_head(q, k, v):  # keys scaled first, then copied for every query head
    b, h, _, d_k = q.shape
    r = h // k.shape[1]
    kk = (k / d_k ** 0.5).repeat_interleave(r, dim=1)  # (b, h, t, d_k)
    w = torch.softmax(q @ kk.transpose(-2, -1), dim=-1)  # (b, h, 1, t)
    return (w.reshape(b, k.shape[1], r, -1) @ v).reshape(b, h, 1, d_k)


def test_gqa_rejects_copies_of_scaled_keys():
    with pytest.raises(CheckFailed, match="copied once per query head"):
        check.gqa_function(scaled_copies_per_head)


def attend(q, keys, values):  # (b, h, 1, d_k) from keys and values already copied per query head
    w = torch.softmax(q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return w @ values


def copied_into_a_buffer(q, k, v):  # right numbers; each head's keys written into a buffer made first
    b, h, _, d_k = q.shape
    r = h // k.shape[1]
    keys, values = q.new_zeros(b, h, k.shape[2], d_k), q.new_zeros(b, h, v.shape[2], d_k)
    for i in range(h):
        keys[:, i], values[:, i] = k[:, i // r], v[:, i // r]
    return attend(q, keys, values)


def copied_with_out(q, k, v):  # right numbers; the copies written with out= into uninitialised buffers
    r = q.shape[1] // k.shape[1]
    heads = torch.arange(q.shape[1]) // r
    keys, values = torch.empty(0), torch.empty(0)
    torch.index_select(k, 1, heads, out=keys)
    torch.index_select(v, 1, heads, out=values)
    return attend(q, keys, values)


def copied_as_flat_rows(q, k, v):  # right numbers; each head's keys flattened to one row, rows repeated
    b, h, _, d_k = q.shape
    g, t = k.shape[1], k.shape[2]
    rows_k = k.reshape(b * g, t * d_k).repeat_interleave(h // g, 0)  # (b h, t d_k)
    rows_v = v.reshape(b * g, t * d_k).repeat_interleave(h // g, 0)
    return attend(q, rows_k.view(b, h, t, d_k), rows_v.view(b, h, t, d_k))


def copied_by_numpy(q, k, v):  # right numbers; NumPy makes the copies, out of PyTorch's operators' sight
    r = q.shape[1] // k.shape[1]
    keys = torch.from_numpy(k.numpy().repeat(r, axis=1))
    values = torch.from_numpy(v.numpy().repeat(r, axis=1))
    heads = [attend(q[:, i:i + 1], keys[:, i:i + 1], values[:, i:i + 1]) for i in range(q.shape[1])]
    return torch.cat(heads, dim=1)  # one head at a time: each operator sees one slice of NumPy's copy


@pytest.mark.parametrize("copies", [copied_into_a_buffer, copied_with_out, copied_as_flat_rows, copied_by_numpy])
def test_gqa_rejects_copies_written_into_buffers_or_flattened(copies):
    with pytest.raises(CheckFailed, match="copied once per query head"):
        check.gqa_function(copies)


def rescaled_in_place(q, k, v):  # right, one copy of the cache, changed in place several times
    b, h, _, d_k = q.shape
    g = k.shape[1]
    keys = k.clone()
    for _ in range(h):
        keys.mul_(2.0)
    keys.div_(2.0 ** h)
    w = torch.softmax(q.reshape(b, g, h // g, d_k) @ keys.transpose(-2, -1) / d_k ** 0.5, dim=-1)
    return (w @ v).reshape(b, h, 1, d_k)


def transposed_once_into_a_buffer(q, k, v):  # right: one copy of the keys, written into torch.empty, scaled in place
    b, h, _, d_k = q.shape
    g = k.shape[1]
    keys_t = torch.empty(b, g, d_k, k.shape[2])
    keys_t.copy_(k.transpose(-2, -1)).mul_(d_k ** -0.5)
    w = torch.softmax(q.view(b, g, h // g, d_k) @ keys_t, dim=-1)
    return (w @ v).reshape(b, h, 1, d_k)


@pytest.mark.parametrize("one_copy", [rescaled_in_place, transposed_once_into_a_buffer])
def test_gqa_accepts_one_copy_changed_in_place(one_copy, capsys):
    check.gqa_function(one_copy)
    assert "✓ gqa_decode(q, k, v): correct" in capsys.readouterr().out


def test_uninitialised_memory_is_not_counted_as_a_copy():
    # torch.empty returns whatever the memory held, which may be keys copied and freed just before: that is
    # no copy made by the function, so the counter ignores the empty family whatever their bytes.
    from attn_helpers.checks.ch09 import _CopyCounter

    k = torch.randn(1, 2, 6, 3)

    def empty_holding_keys(*args, **kwargs):
        return k.clone()

    empty_holding_keys.overloadpacket = torch.ops.aten.empty_like
    empty_holding_keys._schema = torch.ops.aten.empty_like.default._schema
    counter = _CopyCounter(k)
    for _ in range(4):
        counter.__torch_dispatch__(empty_holding_keys, (torch.Tensor,), (k,))
    assert counter.most_copies() == 0
    counter.__torch_dispatch__(torch.ops.aten.clone.default, (torch.Tensor,), (k,))
    assert counter.most_copies() == 1
    # the keys written into such a buffer are one copy, whatever it held before; rewritten unchanged, no more
    empty = counter.__torch_dispatch__(empty_holding_keys, (torch.Tensor,), (k,))
    for _ in range(3):
        counter.__torch_dispatch__(torch.ops.aten.copy_.default, (torch.Tensor,), (empty, k))
    assert counter.most_copies() == 2


# Right answers that convert, scale or transpose the whole cache several times, one copy of each form
# (found by an audit: before, four such copies added up to the h/g = 4 copies the check refuses).

def converted_scaled_transposed(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    k_t = (k.double() / d_k ** 0.5).transpose(-2, -1).contiguous().float()  # (b, g, d_k, t)
    w = torch.softmax(q.reshape(b, g, h // g, d_k) @ k_t, dim=-1)
    return (w @ v).reshape(b, h, 1, d_k)


def cloned_then_float64(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    k64 = k.clone().double() / d_k ** 0.5
    k_t = k64.transpose(-2, -1).contiguous()
    w = torch.softmax(q.double().reshape(b, g, h // g, d_k) @ k_t, dim=-1)
    return (w @ v.double()).reshape(b, h, 1, d_k).float()


def per_group_in_float64(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    r = h // g
    outs = []
    for j in range(g):
        k_j = k[:, j].contiguous().double() / d_k ** 0.5
        w = torch.softmax(q[:, j * r:(j + 1) * r, 0].double() @ k_j.transpose(1, 2).contiguous(), dim=-1)
        outs.append((w @ v[:, j].double()).float())
    return torch.cat(outs, 1).unsqueeze(2)


def buffer_changed_in_place(q, k, v):
    b, h, _, d_k = q.shape
    g = k.shape[1]
    k_t = torch.empty(b, g, d_k, k.shape[2])
    k_t.copy_(k.mT)
    k_t.div_(d_k ** 0.5)
    k_t.clamp_(-1e4, 1e4)
    k_t.nan_to_num_()
    w = torch.softmax(q.view(b, g, h // g, d_k) @ k_t, dim=-1)
    return (w @ v).view(b, h, 1, d_k)


def scratch_freed_first(q, k, v):  # the clone may land where torch.empty's memory was
    b, h, _, d_k = q.shape
    g = k.shape[1]
    scratch = torch.empty_like(k)
    del scratch
    keys = k.clone()
    keys.mul_(d_k ** -0.25)
    keys.mul_(d_k ** -0.25)
    keys.nan_to_num_()
    w = torch.softmax(q.view(b, g, h // g, d_k) @ keys.mT, dim=-1)
    return (w @ v).view(b, h, 1, d_k)


@pytest.mark.parametrize("right", [converted_scaled_transposed, cloned_then_float64, per_group_in_float64,
                                   buffer_changed_in_place, scratch_freed_first])
def test_gqa_accepts_the_cache_converted_several_times(right, capsys):
    check.gqa_function(right)
    assert "✓ gqa_decode(q, k, v): correct" in capsys.readouterr().out


# Copies per query head that never form a whole (t, d_k) block: written a token at a time, or laid out
# (b, t, h, d_k) as other libraries keep their caches.

def filled_token_by_token(q, k, v):
    b, h, _, d_k = q.shape
    r = h // k.shape[1]
    keys, values = torch.zeros(b, h, k.shape[2], d_k), torch.zeros(b, h, k.shape[2], d_k)
    for i in range(h):
        for s in range(k.shape[2]):
            keys[:, i, s], values[:, i, s] = k[:, i // r, s], v[:, i // r, s]
    return attend(q, keys, values)


def tokens_first(q, k, v):
    r = q.shape[1] // k.shape[1]
    keys = k.transpose(1, 2).repeat_interleave(r, dim=2)  # (b, t, h, d_k)
    values = v.transpose(1, 2).repeat_interleave(r, dim=2)
    w = ((q[:, :, 0].unsqueeze(1) * keys).sum(-1) / q.shape[-1] ** 0.5).softmax(1)  # (b, t, h)
    return (w.unsqueeze(-1) * values).sum(1).unsqueeze(2)


def each_token_repeated(q, k, v):
    b, h, _, d_k = q.shape
    g, t = k.shape[1], k.shape[2]
    r = h // g
    keys = k.repeat_interleave(r, dim=2).view(b, g, t, r, d_k)
    values = v.repeat_interleave(r, dim=2).view(b, g, t, r, d_k)
    w = ((q.view(b, g, r, d_k).unsqueeze(2) * keys).sum(-1) / d_k ** 0.5).softmax(2)  # (b, g, t, r)
    return (w.unsqueeze(-1) * values).sum(2).reshape(b, h, 1, d_k)


@pytest.mark.parametrize("copies", [filled_token_by_token, tokens_first, each_token_repeated])
def test_gqa_rejects_copies_made_a_token_at_a_time_or_tokens_first(copies):
    with pytest.raises(CheckFailed, match="copied once per query head"):
        check.gqa_function(copies)


def test_gqa_rejects_an_answer_kept_from_the_exercises_call():
    q, k, v = check.gqa_inputs()
    kept = {q.sum().item(): reference_gqa(q, k, v)}  # computed outside any watch, as the chapter's cell could

    def from_memory(q, k, v):
        return kept.get(q.sum().item(), torch.zeros_like(q))

    with pytest.raises(CheckFailed, match="on another cache"):
        check.gqa_function(from_memory)


def test_gqa_rejects_sdpa_hidden_from_the_torch_function_record():
    def hidden(q, k, v):
        b, h, _, d_k = q.shape
        g = k.shape[1]
        with torch._C.DisableTorchFunction():
            out = torch.nn.functional.scaled_dot_product_attention(q.reshape(b * g, h // g, d_k),
                                                                   k.reshape(b * g, -1, d_k), v.reshape(b * g, -1, d_k))
        return out.reshape(b, h, 1, d_k)

    with pytest.raises(CheckFailed, match="switches off the check's record of PyTorch calls"):
        check.gqa_function(hidden)


def test_merge_may_return_a_list(capsys):
    check.merge_function(lambda a, b: list(reference_merge(a, b)))
    assert "correct" in capsys.readouterr().out
