"""FlashAttention in tiles (chapter 10): exact forward and backward, causal tile skipping, traffic counts, bad input."""

import math
from functools import partial

import pytest
import torch
from messages import POSITIVE_INTEGER, TRUE_OR_FALSE, raises_saying

import attn_helpers as ah
from attn_helpers import flash, traffic


def qkv(t_q, t_k, d_k=8, d_v=6, lead=(2, 3), dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*lead, t_q, d_k, generator=gen, dtype=dtype),
            torch.randn(*lead, t_k, d_k, generator=gen, dtype=dtype),
            torch.randn(*lead, t_k, d_v, generator=gen, dtype=dtype))


def plain_lse(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return torch.logsumexp(s, dim=-1, keepdim=True)


@pytest.mark.parametrize("t, block_q, block_k", [(16, 4, 4), (37, 8, 5), (100, 64, 64), (7, 3, 2), (5, 16, 16),
                                                 (64, 1, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_equals_attention_in_float64(t, block_q, block_k, causal):
    q, k, v = qkv(t, t)
    mask = ah.causal_mask(t) if causal else None
    o, L = flash.flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    assert (o - ah.attention(q, k, v, mask)[0]).abs().max() <= 1e-12
    assert (L - plain_lse(q, k, mask)).abs().max() <= 1e-12


def test_forward_with_fewer_queries_and_a_bool_mask():
    q, k, v = qkv(5, 9)
    o, _ = flash.flash_forward(q, k, v, causal=True, block_q=2, block_k=3)
    assert torch.allclose(o, ah.attention(q, k, v, ah.causal_mask(5, 9))[0], atol=1e-12)
    mask = torch.rand(5, 9, generator=torch.Generator().manual_seed(1)) > 0.4
    mask[2] = False  # a query with no allowed key: output 0, L = -inf, never NaN
    o, L = flash.flash_forward(q, k, v, mask=mask, block_q=2, block_k=4)
    assert torch.allclose(o, ah.attention(q, k, v, mask)[0], atol=1e-12)
    assert torch.equal(o[..., 2, :], torch.zeros_like(o[..., 2, :])) and torch.isneginf(L[..., 2, :]).all()
    do = torch.randn_like(o)
    grads = flash.flash_backward(q, k, v, o, L, do, mask=mask, block_q=2, block_k=4)
    assert all(torch.isfinite(g).all() for g in grads)


def autograd_grads(q, k, v, do, mask=None):
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    out, _ = ah.attention(q, k, v, mask)
    out.backward(do)
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("t, block_q, block_k", [(16, 4, 4), (37, 8, 5), (7, 3, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_equals_autograd_in_float64(t, block_q, block_k, causal):
    q, k, v = qkv(t, t)
    o, L = flash.flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    do = torch.randn_like(o)
    ours = flash.flash_backward(q, k, v, o, L, do, causal=causal, block_q=block_q, block_k=block_k)
    theirs = autograd_grads(q, k, v, do, ah.causal_mask(t) if causal else None)
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and (a - b).abs().max() <= 1e-10


def test_backward_equals_autograd_in_float32_at_512_by_64():
    q, k, v = qkv(512, 512, 64, 64, lead=(1,), dtype=torch.float32)
    do = torch.randn(1, 512, 64, generator=torch.Generator().manual_seed(3))
    o, L = flash.flash_forward(q, k, v)
    for a, b in zip(flash.flash_backward(q, k, v, o, L, do), autograd_grads(q, k, v, do), strict=True):
        assert (a - b).abs().max() <= 1e-5


def test_autograd_function_passes_gradcheck():
    q, k, v = (x.requires_grad_() for x in qkv(7, 7, 3, 2, lead=()))
    assert torch.autograd.gradcheck(lambda a, b, c: flash.flash_attention(a, b, c, causal=True, block_q=3, block_k=2),
                                    (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: flash.flash_attention(a, b, c, block_q=2, block_k=4), (q, k, v))


def test_function_saves_only_inputs_output_and_lse():
    q, k, v = (x.requires_grad_() for x in qkv(12, 12, lead=()))
    o = flash.flash_attention(q, k, v, block_q=4, block_k=4)
    saved = o.grad_fn.saved_tensors
    assert [tuple(x.shape) for x in saved] == [(12, 8), (12, 8), (12, 6), (12, 6), (12, 1)]


@pytest.mark.parametrize("t, block_q, block_k, computed, masked", [
    (10, 4, 3, 9, 5), (8, 4, 4, 3, 2), (1024, 64, 64, 136, 16), (6, 6, 6, 1, 1), (9, 2, 9, 5, 4)])
def test_causal_tile_counts(t, block_q, block_k, computed, masked):
    counts = flash.tile_counts(t, t, block_q, block_k, causal=True)
    assert (counts["computed"], counts["masked"]) == (computed, masked)
    assert counts["computed"] + counts["skipped"] == counts["all"] == math.ceil(t / block_q) * math.ceil(t / block_k)
    assert flash.tile_counts(t, t, block_q, block_k)["computed"] == counts["all"]


def test_skipped_tiles_have_no_allowed_key_and_unmasked_tiles_no_blocked_one():
    mask = ah.causal_mask(10, 13)
    done = list(flash.tiles(10, 13, 4, 3, causal=True))
    for r in range(0, 10, 4):
        for c in range(0, 13, 3):
            block = mask[r:r + 4, c:c + 3]
            tile = next((x for x in done if x.rows.start == r and x.cols.start == c), None)
            assert (tile is None) == (not block.any())
            if tile is not None:
                assert tile.masked == (not block.all())


def test_causal_flops_follow_the_tiles():
    q, k, v = qkv(256, 256, 16, 16, lead=(1,), dtype=torch.float32)
    causal = ah.cost.count_flops(lambda *a: flash.flash_forward(*a, causal=True, block_q=32, block_k=32), q, k, v)
    full = ah.cost.count_flops(lambda *a: flash.flash_forward(*a, mask=ah.causal_mask(256), block_q=32, block_k=32),
                               q, k, v)
    assert full == 4 * 16 * 256 * 256 and causal == 4 * 16 * 32 * 32 * 36


@pytest.mark.parametrize("t, d, M", [(256, 16, 1024), (300, 8, 512), (128, 32, 8192)])
def test_traffic_counts_match_their_formulas(t, d, M):
    q, k, v = qkv(t, t, d, d, lead=(1,), dtype=torch.float32)
    block_q, block_k = traffic.fitted_blocks(M, d)
    tiled, standard = traffic.Traffic(M=M), traffic.Traffic()
    o, _ = flash.flash_forward(q, k, v, block_q=block_q, block_k=block_k, traffic=tiled)
    assert tiled.reads == t * d + 2 * t * d * math.ceil(t / block_q) and tiled.writes == t * d + t
    assert torch.allclose(traffic.standard_attention(q, k, v, standard), o, atol=1e-6)
    assert standard.total == 4 * t * d + 4 * t * t and standard.reads == 2 * t * d + 2 * t * t + t * d


def test_traffic_reads_are_what_the_loops_slice_out():  # counted another way: the slices PyTorch ran
    q, k, v = qkv(300, 300, 16, 16, lead=(1,), dtype=torch.float32)
    counter = traffic.Traffic()
    with ah.checks.Watch() as watch:
        flash.flash_forward(q, k, v, block_q=64, block_k=48, traffic=counter)
    sliced = sum(math.prod(shape) for op in watch.ops if op.name == "slice" and op.inputs[0] == tuple(q.shape)
                 for shape in op.outputs)
    assert sliced == counter.reads == 300 * 16 + 2 * 300 * 16 * 5


def test_paper_blocks_need_more_than_M_and_the_counter_refuses_them():
    M, d = 2 ** 14, 64
    block_q, block_k = traffic.paper_blocks(M, d)
    assert (block_q, block_k) == (64, 64) and traffic.fast_memory(block_q, block_k, d, d) == 20608  # 1.26 M
    q, k, v = qkv(256, 256, d, d, lead=(1,), dtype=torch.float32)
    with pytest.raises(ValueError, match="holds 20,608 numbers in fast memory, more than M = 16,384"):
        flash.flash_forward(q, k, v, block_q=block_q, block_k=block_k, traffic=traffic.Traffic(M=M))
    fitted = traffic.fitted_blocks(M, d)  # the outer block kept, the inner one cut: they fill M exactly
    assert fitted == (64, 42) and traffic.fast_memory(*fitted, d, d) == M < traffic.fast_memory(64, 43, d, d)
    flash.flash_forward(q, k, v, block_q=fitted[0], block_k=fitted[1], traffic=traffic.Traffic(M=M))
    assert traffic.fitted_blocks(2 ** 14, 32) == traffic.paper_blocks(2 ** 14, 32)  # the paper's fit there
    with pytest.raises(ValueError, match="cannot hold even one query"):
        traffic.fitted_blocks(100, 64)
    block_q, block_k = traffic.fitted_blocks(100, 1)  # d = 1: the paper's 25 queries leave no room for a key
    assert block_k == 1 and traffic.fast_memory(block_q, 1, 1, 1) <= 100 < traffic.fast_memory(block_q + 1, 1, 1, 1)


def test_the_traffic_depends_on_the_outer_block_alone():  # why fitted_blocks cuts the inner block, counted by running
    M, d, t = 2 ** 14, 64, 256
    q, k, v = qkv(t, t, d, d, lead=(1,), dtype=torch.float32)

    def moved(block_q, block_k):
        counter = traffic.Traffic(M=M)
        with ah.checks.Watch() as watch:
            flash.flash_forward(q, k, v, block_q=block_q, block_k=block_k, traffic=counter)
        sliced = sum(math.prod(s) for op in watch.ops if op.name == "slice" and op.inputs[0] == q.shape
                     for s in op.outputs)  # what PyTorch sliced out of Q, K and V: the reads, counted another way
        assert sliced == counter.reads
        return counter.total

    assert moved(64, 42) == moved(64, 21) == moved(64, 5) == 2 * t * d + t + 2 * t * d * (t // 64)
    assert moved(42, 64) == 2 * t * d + t + 2 * t * d * math.ceil(t / 42) > moved(64, 42)  # the old fitted blocks
    standard = traffic.Traffic()
    traffic.standard_attention(q, k, v, standard)
    assert standard.total / moved(64, 42) > 1.9  # about M / 2d² = 2 at this t; the old blocks gave less than 1.5
    with raises_saying(ValueError, "M " + POSITIVE_INTEGER):
        traffic.Traffic(M=0)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_in_both_loop_orders(causal):
    t, d, block = 96, 8, 16
    q, k, v = qkv(t, t, d, d, lead=(1,))
    o, L = flash.flash_forward(q, k, v, causal=causal, block_q=block, block_k=block)
    do = torch.randn_like(o)
    counts = {}
    for keys_outside in (True, False):
        counts[keys_outside] = traffic.Traffic()
        grads = flash.flash_backward(q, k, v, o, L, do, causal=causal, block_q=block, block_k=block,
                                     keys_outside=keys_outside, traffic=counts[keys_outside])
        for a, b in zip(grads, autograd_grads(q, k, v, do, ah.causal_mask(t) if causal else None), strict=True):
            assert (a - b).abs().max() <= 1e-10
    assert counts[True].total < counts[False].total
    if not causal:  # keys outside: 4td + 2t a pass over the queries; queries outside: 6td a pass over the keys
        n = t // block
        assert counts[True].total == 6 * t * d + t + n * (4 * t * d + 2 * t)
        assert counts[False].total == 5 * t * d + 3 * t + n * 6 * t * d


@pytest.mark.parametrize("keys_outside", [True, False])
def test_backward_refuses_blocks_whose_step_does_not_fit_in_M(keys_outside):
    t, d, block = 96, 8, 16
    q, k, v = qkv(t, t, d, d, lead=(1,))
    o, L = flash.flash_forward(q, k, v, block_q=block, block_k=block)
    # Q_i, dO_i, dQ_i, then L_i, D_i; K_j, V_j, dK_j, dV_j; the tiles P and dS
    need = 3 * block * d + 2 * block + 4 * block * d + 2 * block * block
    run = partial(flash.flash_backward, q, k, v, o, L, o, block_q=block, block_k=block, keys_outside=keys_outside)
    run(traffic=traffic.Traffic(M=need))
    with pytest.raises(ValueError, match=f"holds {need:,} numbers in fast memory, more than M = {need - 1:,}"):
        run(traffic=traffic.Traffic(M=need - 1))


def test_double_backward_raises_instead_of_a_wrong_second_derivative():
    q, k, v = (x.requires_grad_() for x in qkv(7, 7, 3, 2, lead=()))
    fn = lambda a, b, c: flash.flash_attention(a, b, c, block_q=3, block_k=2)  # noqa: E731
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.gradgradcheck(fn, (q, k, v))
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.grad(fn(q, k, v).sum(), q, create_graph=True)
    assert torch.autograd.gradcheck(fn, (q, k, v))  # the first derivative is still there


def test_bfloat16_accumulates_in_float32():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 256, 64, generator=gen).bfloat16() for _ in range(3))
    o, L = flash.flash_forward(q, k, v)
    exact, _ = ah.attention(q.double(), k.double(), v.double())
    assert o.dtype == torch.bfloat16 and L.dtype == torch.float32
    assert (o.double() - exact).abs().max() < 3e-3 < (ah.attention(q, k, v)[0].double() - exact).abs().max()
    grads = flash.flash_backward(q, k, v, o, L, torch.ones_like(o))
    assert all(g.dtype == torch.bfloat16 for g in grads)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"block_q": 0}, ValueError, "block_q " + POSITIVE_INTEGER),
    ({"block_k": 2.5}, TypeError, "block_k " + POSITIVE_INTEGER),
    ({"block_k": True}, TypeError, "a bool"),
    ({"causal": 1}, TypeError, "causal " + TRUE_OR_FALSE),
    ({"mask": torch.ones(6, 5, dtype=torch.bool)}, ValueError, "cannot be cut into the tiles"),
    ({"mask": torch.ones(3, 5, 6, dtype=torch.bool)}, ValueError, "may not add leading dimensions"),
    ({"mask": torch.zeros(5, 6)}, TypeError, "bool mask"),
])
def test_bad_settings_raise_clear_errors(kwargs, error, match):
    q, k, v = qkv(5, 6, lead=())
    with raises_saying(error, match):
        flash.flash_forward(q, k, v, **kwargs)


def test_mismatched_shapes_raise_clear_errors():
    q, k, v = qkv(5, 6, lead=(2,))
    with pytest.raises(ValueError, match="same leading dimensions"):
        flash.flash_forward(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="d_k"):
        flash.flash_forward(q, k[..., :3], v)
    with pytest.raises(ValueError, match="causal=True with t_q=5"):
        flash.flash_forward(q, k[..., :4, :], v[..., :4, :], causal=True)
    o, L = flash.flash_forward(q, k, v)
    with pytest.raises(ValueError, match="pass what flash_forward returned"):
        flash.flash_backward(q, k, v, o, L[..., :3, :], o)
    with raises_saying(ValueError, "t_q " + POSITIVE_INTEGER):
        flash.tile_counts(0, 4, 2, 2)
    with raises_saying(ValueError, "M " + POSITIVE_INTEGER):
        traffic.paper_blocks(-1, 8)
    with raises_saying(TypeError, "keys_outside " + TRUE_OR_FALSE):
        flash.flash_backward(q, k, v, o, L, o, keys_outside="yes")


def test_copy_task_both_ways_trains_the_same_head_twice():  # chapter 10's trained claim, on a short run
    losses, accuracy = flash.copy_task_both_ways(seed=1, steps=5)
    assert list(losses.columns) == ["ah.attention", "flash_attention"] and list(losses.index) == [1, 2, 3, 4, 5]
    assert (losses["ah.attention"] - losses["flash_attention"]).abs().max() <= 1e-10
    assert set(accuracy) == {"ah.attention", "flash_attention"}
    other, _ = flash.copy_task_both_ways(seed=2, steps=5)
    assert not other.equals(losses)  # the seed draws other weights and batches
    before = torch.random.get_rng_state()
    flash.copy_task_both_ways(seed=1, steps=1)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's generator is left as it was
    with pytest.raises(ValueError, match="seed"):
        flash.copy_task_both_ways(seed=-1)


def test_plot_tiles_labels_each_tile_and_counts_the_masked_among_the_computed():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = flash.plot_tiles(16, 16, 4, 4, causal=True)
    labels = [text.get_text() for text in ax.texts]
    assert (labels.count("computed"), labels.count("masked"), labels.count("skipped")) == (6, 4, 6)
    assert "10 computed (4 of them masked), 6 skipped" in ax.get_title()
    plt.close(ax.figure)
