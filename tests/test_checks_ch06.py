"""Chapter 6's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch06 as check

# ex-ch06-predict: the broadcast output shape


def test_broadcast_shape_accepts_reference(capsys):
    check.broadcast_shape((2, 4, 5, 6))
    check.broadcast_shape(torch.Size([2, 4, 5, 6]))
    check.broadcast_shape(tuple(np.array([2, 4, 5, 6])))  # NumPy's integers
    assert capsys.readouterr().out == "✓ out_shape: correct\n" * 3  # the shape is not repeated back


def test_broadcast_shape_reference_matches_torch():
    Q, K, V = (torch.randn(s) for s in (check.PREDICT_Q, check.PREDICT_K, check.PREDICT_V))
    check.broadcast_shape(ah.attention(Q, K, V)[0].shape)


@pytest.mark.parametrize("wrong, hint", [
    ((2, 4, 5, 8), "comes from the values"),
    ((2, 4, 7, 6), "one output row per query"),
    ((2, 1, 5, 6), "size-1 leading dimension stretches"),
    ((4, 2, 5, 6), "from the right"),
    ((2, 4, 5, 7), "one column per value feature"),
    ((3, 3), "broadcast right-aligned"),
])
def test_broadcast_shape_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.broadcast_shape(wrong)


def test_broadcast_shape_rejects_wrong_types():
    with pytest.raises(CheckFailed, match="not the output tensor"):
        check.broadcast_shape(torch.zeros(2, 4, 5, 6))
    with pytest.raises(CheckFailed, match=r"not a tensor of sizes: convert it with tuple\(out_shape.tolist\(\)\)"):
        check.broadcast_shape(torch.tensor([2, 4, 5, 6]))  # the sizes, kept in a tensor
    with pytest.raises(CheckFailed, match="tuple of ints"):
        check.broadcast_shape(None)
    with pytest.raises(CheckFailed, match="tuple of ints"):
        check.broadcast_shape(("two", 4, 5, 6))
    with pytest.raises(CheckFailed, match="tuple of ints"):
        check.broadcast_shape("2456")                      # the right digits, as a string
    with pytest.raises(CheckFailed, match="tuple of ints"):
        check.broadcast_shape((2.9, 4.2, 5.5, 6.7))        # floats that int() would round down to the answer
    with pytest.raises(CheckFailed, match="has no order"):
        check.broadcast_shape({4, 2, 5, 6})                 # iterates as 2, 4, 5, 6 in CPython, by chance


# ex-ch06-load: three matrices into nn.MultiheadAttention


def loaded(in_proj: torch.Tensor, out_proj: torch.Tensor, **kwargs) -> nn.MultiheadAttention:
    options = {"bias": False, "batch_first": True, **kwargs}
    mha = nn.MultiheadAttention(6, 2, **options)
    with torch.no_grad():
        mha.in_proj_weight.copy_(in_proj)
        mha.out_proj.weight.copy_(out_proj)
    return mha


def test_loaded_mha_accepts_reference(capsys):
    W_q, W_k, W_v, W_o = check.projection_matrices()
    check.loaded_mha(loaded(torch.cat([W_q, W_k, W_v]), W_o))
    out = capsys.readouterr().out
    assert "✓ in_proj_weight: correct" in out and "✓ the module's output: correct" in out


def test_loaded_mha_accepts_a_module_in_float64(capsys):
    W_q, W_k, W_v, W_o = check.projection_matrices()
    check.loaded_mha(loaded(torch.cat([W_q, W_k, W_v]), W_o, dtype=torch.float64))
    assert "✓ the module's output: correct" in capsys.readouterr().out


def test_loaded_mha_reference_equals_the_books_module():
    W_q, W_k, W_v, W_o = check.projection_matrices()
    book = ah.MultiHeadAttention(6, 2)
    with torch.no_grad():
        for lin, W in zip((book.W_q, book.W_k, book.W_v, book.W_o), (W_q, W_k, W_v, W_o), strict=True):
            lin.weight.copy_(W)
    check.loaded_mha(ah.torch_compat.to_torch_mha(book))


@pytest.mark.parametrize("make, hint", [
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q.T, W_k.T, W_v.T]), W_o), "transposed"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_k, W_q, W_v]), W_o), "queries come first"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_v, W_k]), W_o), "keys go in rows d:2d"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o.T), "copy W_o itself"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o, batch_first=False), "make it batch first"),
    (lambda W_q, W_k, W_v, W_o: loaded(torch.cat([W_q, W_k, W_v]), W_o, bias=True), "pass bias=False"),
    (lambda W_q, W_k, W_v, W_o: nn.MultiheadAttention(6, 3, bias=False, batch_first=True), "num_heads=3"),
    (lambda W_q, W_k, W_v, W_o: ah.MultiHeadAttention(6, 2), "got MultiHeadAttention"),
])
def test_loaded_mha_rejects_mistakes(make, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.loaded_mha(make(*check.projection_matrices()))


# ex-ch06-blockwise: attention without the t x t matrix


def reference_blockwise(q, k, v, block):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    total = torch.zeros(q.shape[0], 1)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        total = total * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[start:start + block]
        m = m_new
    return acc / total


def test_blockwise_accepts_reference(capsys):
    check.blockwise_function(reference_blockwise)
    assert capsys.readouterr().out == (
        "✓ output with scores near ±1000: correct\n✓ output with block=4: correct\n✓ output with block=10: correct\n"
    )


def einsum_blockwise(q, k, v, block):
    """The same algorithm written with einsum, a loop over key blocks taken with split, and no in-place updates."""
    scale = q.shape[-1] ** -0.5
    m, total, acc = None, None, None
    for k_b, v_b in zip(k.split(block), v.split(block), strict=True):
        s = torch.einsum("qd,kd->qk", q, k_b) * scale  # (t_q, block)
        m_b = s.max(dim=-1, keepdim=True).values
        m_new = m_b if m is None else torch.maximum(m, m_b)
        p = (s - m_new).exp()
        if m is None:
            total, acc = p.sum(-1, keepdim=True), p @ v_b
        else:
            total = total * (m - m_new).exp() + p.sum(-1, keepdim=True)
            acc = acc * (m - m_new).exp() + p @ v_b
        m = m_new
    return acc / total


def per_query_blockwise(q, k, v, block):
    """The update rule for one query at a time: still only a block of scores at once."""
    return torch.cat([reference_blockwise(q[i:i + 1], k, v, block) for i in range(q.shape[0])])


def in_float64(q, k, v, block):
    """Whole copies of the inputs, converted first: they grow with the keys, but much less than scores would."""
    return reference_blockwise(q.double(), k.double(), v.double(), block).float()


def keys_scaled_and_transposed_first(q, k, v, block):
    """The keys scaled once and stored transposed, then one block of scores at a time."""
    k_t = (k / math.sqrt(q.shape[-1])).T.contiguous()  # (d_k, t_k)
    return reference_blockwise(q * math.sqrt(q.shape[-1]), k_t.T, v, block)


def maximum_started_from_the_first_block(q, k, v, block):
    """The running maximum starts at the first block's, which the loop then scores again with the others."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = (q @ k[:block].T * scale).amax(-1, keepdim=True)  # (t_q, 1)
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, r = torch.exp(s - m_new), torch.exp(m - m_new)
        total, acc, m = total * r + p.sum(-1, keepdim=True), acc * r + p @ v[start:start + block], m_new
    return acc / total


def one_query_vector_at_a_time(q, k, v, block):
    """The update rule for each query as a vector (d_k,): its scores against a block are a vector (n,)."""
    scale = 1 / math.sqrt(q.shape[-1])
    rows = []
    for q_i in q:                                                    # (d_k,)
        m, total, acc = torch.tensor(-math.inf), torch.tensor(0.0), torch.zeros(v.shape[-1])
        for start in range(0, k.shape[0], block):
            s = k[start:start + block] @ q_i * scale                 # (n,)
            m_new = torch.maximum(m, s.max())
            p, r = torch.exp(s - m_new), torch.exp(m - m_new)
            total, acc, m = total * r + p.sum(), acc * r + p @ v[start:start + block], m_new
        rows.append(acc / total)
    return torch.stack(rows)


@pytest.mark.parametrize("fn", [einsum_blockwise, per_query_blockwise, in_float64, keys_scaled_and_transposed_first,
                                maximum_started_from_the_first_block])
def test_blockwise_accepts_other_correct_versions(fn, capsys):
    check.blockwise_function(fn)
    assert capsys.readouterr().out.count("correct") == 3


def scored_pairs(fn, q, k, v, block):
    with torch.no_grad(), ah.checks.Watch() as watch:
        fn(q, k, v, block)
    return check._scored_pairs(watch, q.shape[-1])


def test_blockwise_counts_the_pairs_scored_whatever_their_shape():
    """Each (query, key) pair counts once, scored in 2-D blocks, by broadcasting, or one query (a vector) at a time;
    a second pass counts every pair again. (one_query_vector_at_a_time is accepted by the check, at the cost of
    a slow memory test with 64 queries, so its count is tested here.)"""
    q, k, v = check._blockwise_data()
    t_q, t_k = q.shape[0], k.shape[0]
    for block in (4, t_k):
        assert torch.allclose(check._run_blockwise(one_query_vector_at_a_time, q, k, v, block),
                              ah.attention(q, k, v)[0], atol=1e-5)
        for fn in (reference_blockwise, einsum_blockwise, one_query_vector_at_a_time):
            assert scored_pairs(fn, q, k, v, block) == t_q * t_k, fn.__name__
        assert scored_pairs(maximum_started_from_the_first_block, q, k, v, block) == t_q * (t_k + block)
        for fn in (two_passes, two_passes_by_broadcasting, two_passes_one_query_at_a_time,
                   two_passes_one_query_at_a_time_by_broadcasting, two_passes_one_pair_at_a_time):
            assert scored_pairs(fn, q, k, v, block) == 2 * t_q * t_k, fn.__name__


def test_extreme_scores_are_exact_and_need_a_running_maximum():
    q, k, v = check._extreme_data()
    assert torch.equal(q @ k.T / math.sqrt(q.shape[-1]), check.EXTREME_SCORES)
    maxima = check.EXTREME_SCORES.view(3, -1)[:, :12].reshape(3, 3, 4).amax(-1)  # per block of 4
    assert (maxima.argmax(-1) == torch.tensor([2, 0, 1])).all() and maxima.abs().max() >= 1000


def unscaled(q, k, v, block):
    return reference_blockwise(q * math.sqrt(q.shape[-1]), k, v, block)


def not_rescaled(q, k, v, block):
    return check._blockwise_without_rescale(q, k, v, block)


def not_normalised(q, k, v, block):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        acc = acc * torch.exp(m - m_new) + torch.exp(s - m_new) @ v[start:start + block]
        m = m_new
    return acc


def no_maximum(q, k, v, block):
    """Blocks of exp(s) summed as they come, with no maximum subtracted: exp overflows."""
    total = torch.zeros(q.shape[0], 1)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        p = torch.exp(q @ k[start:start + block].T / math.sqrt(q.shape[-1]))
        total, acc = total + p.sum(-1, keepdim=True), acc + p @ v[start:start + block]
    return acc / total


def blocks_against(m, q, k, v, block):
    """Sum and output over the blocks, each row's exponentials taken against a maximum m (t_q, 1) fixed beforehand."""
    scale = 1 / math.sqrt(q.shape[-1])
    total = torch.zeros(q.shape[0], 1)
    acc = torch.zeros(q.shape[0], v.shape[-1])
    for start in range(0, k.shape[0], block):
        p = torch.exp(q @ k[start:start + block].T * scale - m)
        total, acc = total + p.sum(-1, keepdim=True), acc + p @ v[start:start + block]
    return acc / total


def first_block_maximum(q, k, v, block):
    """Subtracts the first block's maximum and never updates it."""
    m = (q @ k[:block].T / math.sqrt(q.shape[-1])).amax(-1, keepdim=True)
    return blocks_against(m, q, k, v, block)


def row_by_row_softmax(q, k, v, block):
    """A full softmax per query, one row at a time: no (t_q, t_k) tensor, but no running maximum either."""
    scale = 1 / math.sqrt(q.shape[-1])
    return torch.stack([torch.softmax(q[i] @ k.T * scale, dim=-1) @ v for i in range(q.shape[0])])


def row_by_row_by_hand(q, k, v, block):
    rows = []
    for i in range(q.shape[0]):
        s = q[i:i + 1] @ k.T / math.sqrt(q.shape[-1])  # (1, t_k)
        e = torch.exp(s - s.amax())
        rows.append(e @ v / e.sum())
    return torch.cat(rows)


def two_passes(q, k, v, block):
    """First pass: the final maximum of every row; second pass: sum and output against it. Exact, but not online."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    for start in range(0, k.shape[0], block):
        m = torch.maximum(m, (q @ k[start:start + block].T * scale).amax(-1, keepdim=True))
    return blocks_against(m, q, k, v, block)


def pairs_of_queries(q, k, v, block):  # full softmax rows, two queries at a time: never a (t_q, t_k) or (t_k,)
    rows = [torch.softmax(q_pair @ k.T / math.sqrt(q.shape[-1]), -1) @ v for q_pair in q.split(2)]
    return torch.cat(rows)


def two_passes_by_broadcasting(q, k, v, block):
    """two_passes, with the first pass's scores summed from a broadcast product rather than a matrix product."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    for start in range(0, k.shape[0], block):
        scores = (q[:, None, :] * k[None, start:start + block]).sum(-1) * scale  # (t_q, block)
        m = torch.maximum(m, scores.amax(-1, keepdim=True))
    return blocks_against(m, q, k, v, block)


def two_passes_one_query_at_a_time(q, k, v, block, score=lambda k_b, q_i: k_b @ q_i):
    """two_passes for each query as a vector (d_k,): every score is a vector (n,), never a 2-D block."""
    scale = 1 / math.sqrt(q.shape[-1])
    rows = []
    for q_i in q:                                                    # (d_k,)
        m = torch.tensor(-math.inf)
        for start in range(0, k.shape[0], block):                    # first pass: the maximum
            m = torch.maximum(m, (score(k[start:start + block], q_i) * scale).max())
        total, acc = torch.tensor(0.0), torch.zeros(v.shape[-1])
        for start in range(0, k.shape[0], block):                    # second pass: sum and output against it
            p = torch.exp(score(k[start:start + block], q_i) * scale - m)   # (n,)
            total, acc = total + p.sum(), acc + p @ v[start:start + block]
        rows.append(acc / total)
    return torch.stack(rows)


def two_passes_one_query_at_a_time_by_broadcasting(q, k, v, block):
    return two_passes_one_query_at_a_time(q, k, v, block, score=lambda k_b, q_i: (k_b * q_i).sum(-1))


def two_passes_one_pair_at_a_time(q, k, v, block):
    return two_passes_one_query_at_a_time(q, k, v, block,
                                          score=lambda k_b, q_i: torch.stack([k_j @ q_i for k_j in k_b]))


def full_matrix(q, k, v, block):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v


def sdpa(q, k, v, block):
    return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]


def all_blocks_then_two_passes(q, k, v, block):  # scores each block once, but keeps them all for a second pass
    scale = 1 / math.sqrt(q.shape[-1])
    scores = [q @ k_b.T * scale for k_b in k.split(block)]                      # every block, kept
    m = torch.stack([s.amax(-1) for s in scores], -1).amax(-1, keepdim=True)   # (t_q, 1)
    weights = [torch.exp(s - m) for s in scores]
    total = sum(w.sum(-1, keepdim=True) for w in weights)
    return sum(w @ v_b for w, v_b in zip(weights, v.split(block), strict=True)) / total


def with_the_merge_helpers(q, k, v, block):  # chapter 9's running softmax, done by the book
    parts = [ah.merge.partial_attention(q, k_b, v_b) for k_b, v_b in zip(k.split(block), v.split(block), strict=True)]
    return ah.merge.finish_partial(ah.merge.merge_partials(parts))


def softmax_per_block_then_logsumexp(q, k, v, block):  # exact, but keeps every block's result to the end
    scale = 1 / math.sqrt(q.shape[-1])
    outs, lses = [], []
    for k_b, v_b in zip(k.split(block), v.split(block), strict=True):
        s = q @ k_b.T * scale
        lses.append(torch.logsumexp(s, -1, keepdim=True))
        outs.append(torch.softmax(s, -1) @ v_b)
    share = torch.softmax(torch.cat(lses, -1), -1)                              # (t_q, n_blocks)
    return sum(share[:, i:i + 1] * o for i, o in enumerate(outs))


@pytest.mark.parametrize("fn, hint", [
    (all_blocks_then_two_passes, "grows with the number of keys"),
    (softmax_per_block_then_logsumexp, "grows with the number of keys"),
    (with_the_merge_helpers, "calls ah.merge.finish_partial, ah.merge.merge_partials and ah.merge.partial_attention"),
    (unscaled, "not scaled"),
    (not_rescaled, "rescale the running sum"),
    (not_normalised, "divide the accumulated output by the running sum"),
    (no_maximum, "output contains NaN or inf"),
    (first_block_maximum, "output contains NaN or inf"),
    (row_by_row_softmax, "full rows of t_k scores"),
    (row_by_row_by_hand, "full rows of t_k scores"),
    (two_passes, "computes each block's scores more than once"),
    (two_passes_by_broadcasting, "computes each block's scores more than once"),
    (two_passes_one_query_at_a_time, "computes each block's scores more than once"),
    (two_passes_one_query_at_a_time_by_broadcasting, "computes each block's scores more than once"),
    (two_passes_one_pair_at_a_time, "computes each block's scores more than once"),
    (pairs_of_queries, "full rows of t_k scores"),
    (full_matrix, "builds a full t_q × t_k tensor"),
    (lambda q, k, v, block: ah.attention(q, k, v)[0], "calls ah.attention"),
    (lambda q, k, v, block: ah.loop_attention(q, k, v)[0], "calls ah.loop_attention"),
    (sdpa, "F.scaled_dot_product_attention"),
    (lambda q, k, v, block: (reference_blockwise(q, k, v, block), None), "only the output tensor"),
    (lambda q, k, v, block: reference_blockwise(q, k, v, block).T, "has shape"),
])
def test_blockwise_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.blockwise_function(fn)
