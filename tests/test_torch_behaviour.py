"""PyTorch behaviour that the chapters state as fact, pinned one test per claim.

The book pins torch 2.13 (requirements.txt) and runs on the CPU. Each test below checks one thing the text
says about PyTorch itself (not about the book's code), and its docstring names the chapter that says it.
If an upgrade changes one of these, its test fails by name, and the sentence in that chapter must change
with it. Tensors are small and the module runs in a few seconds.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import attn_helpers as ah
from attn_helpers._torch_private import dispatch_mode_base


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def identity_mha(d: int, **options) -> nn.MultiheadAttention:
    """One head, no bias, identity projections: plain attention softmax(X Xᵀ/√d) X (chapter 6)."""
    mha = nn.MultiheadAttention(d, num_heads=1, bias=False, batch_first=True, **options)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d))
    return mha


class OpNames(dispatch_mode_base()):
    """Records the ATen operators that run, with their non-tensor arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.calls.append((str(func), [a for a in args if not isinstance(a, torch.Tensor)]))
        return func(*args, **(kwargs or {}))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


# ------------------------------------------------------------------ the version these claims were checked on


def test_the_book_pins_torch_2_13():
    """Chapters 3, 6, 7 and 9 name torch 2.13 as the version their statements about PyTorch hold for."""
    assert torch.__version__.split("+")[0].startswith("2.13.")


# ------------------------------------------------------------------ softmax and float rounding


def test_torch_softmax_is_stable_for_large_scores():
    """Chapter 2: torch.softmax subtracts each row's maximum internally, so huge scores give finite weights."""
    big = torch.softmax(torch.tensor([1000.0, 999.0, 998.0]), dim=-1)
    assert torch.isfinite(big).all() and torch.allclose(big, torch.softmax(torch.tensor([2.0, 1.0, 0.0]), dim=-1))


def test_minus_1e9_becomes_minus_infinity_in_float16_and_blocks_like_it():
    """Chapter 7: in float16, -1e9 does not exist: torch.tensor(-1e9, dtype=torch.float16) rounds it to -inf, so an
    additive mask made of it gives a row blocked through and through NaN from torch.softmax, as -inf does."""
    minus_1e9 = torch.tensor(-1e9, dtype=torch.float16)
    assert minus_1e9.item() == -math.inf
    scores = torch.tensor([[1.0, 2.0, 0.5], [1.0, 2.0, 0.5]], dtype=torch.float16)
    may_attend = torch.tensor([[True, True, False], [False, False, False]])
    weights = torch.softmax(scores + torch.where(may_attend, torch.tensor(0.0, dtype=torch.float16), minus_1e9), dim=-1)
    assert torch.isnan(weights[1]).all() and not torch.isnan(weights[0]).any()


@pytest.mark.parametrize("function", ["softmax", "sdpa", "nn.MultiheadAttention"])
def test_minus_1e9_added_gives_a_fully_masked_row_the_uniform_average(function):
    """Chapter 7: -1e9 gives the uniform row over the blocked keys, whichever function adds it: in float32 the
    scores of ordinary size plus -1e9 round to the same number. (The chapter's cell asserts the rounding.)"""
    X = randn(3, 4)
    allowed = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    minus_1e9 = torch.zeros(3, 3).masked_fill(~allowed, -1e9)
    with torch.no_grad():
        if function == "softmax":
            row = torch.softmax(X @ X.T / 2 + minus_1e9, dim=-1)[1] @ X
        elif function == "sdpa":
            row = F.scaled_dot_product_attention(X, X, X, attn_mask=minus_1e9)[1]
        else:
            row = identity_mha(4)(X, X, X, attn_mask=minus_1e9)[0][1]
    assert torch.allclose(row, X.mean(dim=0), atol=1e-6)


def test_sdpa_math_backend_scales_queries_and_keys_by_the_square_root_of_the_scale():
    """Chapter 2: SDPA's reference (math) implementation multiplies q and k each by √scale, not the scores by scale."""
    q = k = v = randn(1, 1, 4, 16)
    with sdpa_kernel(SDPBackend.MATH), OpNames() as ops:
        F.scaled_dot_product_attention(q, k, v)
    scalars = [args[0] for name, args in ops.calls if name == "aten.mul.Scalar"]
    assert scalars == [pytest.approx(16 ** -0.25)] * 2  # q · √(1/√16) and k · √(1/√16)


# ------------------------------------------------------------------ nn.Linear and initialisation


def test_linear_stores_out_by_in_and_computes_x_w_transposed():
    """Chapter 4: nn.Linear(d_in, d_out) keeps a (d_out, d_in) weight and returns x Wᵀ + b."""
    linear = nn.Linear(6, 4)
    x = randn(3, 6)
    assert linear.weight.shape == (4, 6)
    assert torch.allclose(linear(x), x @ linear.weight.T + linear.bias, atol=1e-6)


def test_linear_initialises_uniformly_within_one_over_root_d_in():
    """Chapter 4: nn.Linear draws its weight uniformly from ±1/√d_in (kaiming_uniform_ with a = √5)."""
    torch.manual_seed(0)
    w = nn.Linear(400, 400, bias=False).weight
    bound = 1 / math.sqrt(400)
    assert w.abs().max() <= bound and w.abs().max() > 0.99 * bound


def test_multihead_attention_initialises_in_proj_with_xavier_and_biases_at_zero():
    """Chapters 4 and 6: in_proj_weight is Xavier-uniform over (3d, d), ±√(6/(d + 3d)); out_proj keeps
    nn.Linear's ±1/√d; the biases start at zero."""
    torch.manual_seed(0)
    d = 200
    mha = nn.MultiheadAttention(d, num_heads=1)
    bound = math.sqrt(6 / (d + 3 * d))
    assert mha.in_proj_weight.abs().max() <= bound and mha.in_proj_weight.abs().max() > 0.99 * bound
    out_bound = 1 / math.sqrt(d)
    assert out_bound * 0.99 < mha.out_proj.weight.abs().max() <= out_bound
    assert (mha.in_proj_bias == 0).all() and (mha.out_proj.bias == 0).all()


# ------------------------------------------------------------------ views, strides, reshape


def test_transpose_swaps_strides_and_view_then_refuses():
    """Chapter 5: transpose moves no data (two strides swap), the result is not contiguous, view refuses to fold
    it, contiguous() copies into reading order, and reshape copies only when it must."""
    x = torch.zeros(2, 5, 3, 4)
    t = x.transpose(1, 2)
    assert x.stride() == (60, 12, 4, 1) and t.stride() == (60, 4, 12, 1) and not t.is_contiguous()
    assert t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(2, 3, 20)
    assert t.contiguous().stride() == (60, 20, 4, 1)
    assert x.reshape(2, 5, 12).untyped_storage().data_ptr() == x.untyped_storage().data_ptr()  # a view
    assert t.reshape(2, 3, 20).untyped_storage().data_ptr() != x.untyped_storage().data_ptr()  # a copy


def test_matmul_broadcasts_batch_dimensions_from_the_right():
    """Chapters 1 and 6: @ and SDPA treat leading dimensions as batch dimensions, lined up from the right."""
    Q, K, V = randn(3, 8, 4), randn(3, 3, 8, 4, seed=1), randn(3, 3, 8, 4, seed=2)
    out = F.scaled_dot_product_attention(Q, K, V)
    assert out.shape == (3, 3, 8, 4)
    assert torch.allclose(out[2, 1], F.scaled_dot_product_attention(Q[1], K[2, 1], V[2, 1]), atol=1e-6)


# ------------------------------------------------------------------ nn.MultiheadAttention


def test_multihead_attention_batch_first_defaults_to_false():
    """Chapters 1 and 6: nn.MultiheadAttention expects (t, b, d) unless built with batch_first=True, and a
    (b, t, d) batch given to the default module attends across the batch without an error."""
    mha = nn.MultiheadAttention(8, num_heads=1)
    assert mha.batch_first is False
    x = randn(2, 5, 8)  # (b, t, d) read as (t, b, d)
    _, w = mha(x, x, x)
    assert w.shape == (5, 2, 2)


def test_multihead_attention_call_defaults():
    """Chapter 6: forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False), and the module's own dropout defaults to 0."""
    params = inspect.signature(nn.MultiheadAttention.forward).parameters
    defaults = {name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty}
    assert defaults == {"key_padding_mask": None, "need_weights": True, "attn_mask": None,
                        "average_attn_weights": True, "is_causal": False}
    init = inspect.signature(nn.MultiheadAttention.__init__).parameters
    assert init["dropout"].default == 0.0 and init["bias"].default is True
    assert init["add_bias_kv"].default is False and init["add_zero_attn"].default is False


def test_multihead_attention_stacks_q_k_v_in_in_proj_weight():
    """Chapter 6: without bias the parameters are in_proj_weight (3d, d) and out_proj.weight (d, d); rows 0:d,
    d:2d and 2d:3d are W_q, W_k and W_v, head i uses rows i·d_k:(i+1)·d_k of each; bias=True adds in_proj_bias
    (3d) and out_proj.bias."""
    mha = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
    assert [(n, tuple(p.shape)) for n, p in mha.named_parameters()] == [("in_proj_weight", (24, 8)),
                                                                         ("out_proj.weight", (8, 8))]
    x = randn(1, 3, 8)
    W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)
    q, k, v = (x @ W.T for W in (W_q, W_k, W_v))  # (1, 3, 8)
    heads = [ah.attention(q[..., i * 4:(i + 1) * 4], k[..., i * 4:(i + 1) * 4], v[..., i * 4:(i + 1) * 4])
             for i in range(2)]
    with torch.no_grad():
        out, w = mha(x, x, x, average_attn_weights=False)
    assert torch.allclose(w[:, 0], heads[0][1], atol=1e-6) and torch.allclose(w[:, 1], heads[1][1], atol=1e-6)
    assert torch.allclose(out, torch.cat([o for o, _ in heads], -1) @ mha.out_proj.weight.detach().T, atol=1e-6)
    with_bias = nn.MultiheadAttention(8, 2, bias=True)
    assert with_bias.in_proj_bias.shape == (24,) and with_bias.out_proj.bias.shape == (8,)
    assert mha.in_proj_weight.chunk(3)[1].data_ptr() == mha.in_proj_weight[8].data_ptr()  # views, not copies


def test_multihead_attention_averages_weights_over_heads_by_default():
    """Chapters 5 and 6: average_attn_weights=True (the default) returns the mean of the heads' weights,
    (b, t_q, t_k); False returns one matrix per head, (b, h, t_q, t_k)."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 4, batch_first=True)
    x = randn(2, 5, 8)
    with torch.no_grad():
        _, mean = mha(x, x, x)
        _, per_head = mha(x, x, x, average_attn_weights=False)
    assert mean.shape == (2, 5, 5) and per_head.shape == (2, 4, 5, 5)
    assert torch.allclose(mean, per_head.mean(dim=1), atol=1e-6)


def test_need_weights_false_returns_none_and_hands_the_heads_to_sdpa_on_the_regular_path():
    """Chapters 6 and 7: on the regular path (here training mode), with need_weights=False the module returns None
    for the weights and calls scaled_dot_product_attention; with the default True it computes the softmax itself."""
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    assert mha.training  # a new module trains: the regular path
    x = randn(1, 3, 8)
    with torch.no_grad(), OpNames() as fast:
        _, w = mha(x, x, x, need_weights=False)
    with torch.no_grad(), OpNames() as slow:
        mha(x, x, x)
    assert w is None
    assert any("scaled_dot_product" in name for name in fast.names())
    assert not any("scaled_dot_product" in name for name in slow.names()) and "aten._softmax.default" in slow.names()


def test_multihead_attention_takes_an_unbatched_sequence():
    """Chapter 6: an unbatched (t, d) input is accepted and gives (t, d) outputs and (t, t) weights."""
    mha = identity_mha(4)
    X = randn(3, 4)
    with torch.no_grad():
        out, w = mha(X, X, X)
    assert out.shape == (3, 4) and w.shape == (3, 3)
    assert torch.allclose(w, torch.softmax(X @ X.T / 2, dim=-1), atol=1e-6)


def test_parameters_refuse_in_place_writes_outside_no_grad_and_state_dict_shares_memory():
    """Chapter 6: copy_ into a parameter raises unless inside torch.no_grad(); the tensors of state_dict()
    share memory with the parameters."""
    mha = nn.MultiheadAttention(4, 1, bias=False)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        mha.out_proj.weight.copy_(torch.eye(4))
    mha.state_dict()["out_proj.weight"].copy_(torch.eye(4))
    assert torch.equal(mha.out_proj.weight.detach(), torch.eye(4))


@pytest.mark.parametrize("path", ["regular", "fast"])
def test_multihead_attention_dropout_is_off_in_eval_on_both_paths(path):
    """Chapter 6: nn.MultiheadAttention(dropout=p) drops weights while training and not after eval(), on the
    regular path (autograd on) as on the fast path (under no_grad, which has no dropout at all)."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    x = randn(1, 6, 8)
    with torch.no_grad() if path == "fast" else torch.enable_grad():
        mha.train()
        torch.manual_seed(1)
        trained = [mha(x, x, x)[0] for _ in range(2)]
        mha.eval()
        ran = ah.torch_compat.aten_operators(mha, x, x, x)
        evaluated = [mha(x, x, x)[0] for _ in range(2)]
        mha.dropout = 0.0
        exact = mha(x, x, x)[0]
    assert ("_native_multi_head_attention" in ran) == (path == "fast")
    assert not torch.allclose(trained[0], trained[1])
    assert torch.equal(evaluated[0], evaluated[1]) and torch.allclose(evaluated[0], exact, atol=1e-6)


def test_fast_path_runs_one_fused_operator_whatever_need_weights_says():
    """Chapter 6: in eval() mode under no_grad, a module with biases, an even head count and batch_first=True runs
    self-attention as one operator, torch._native_multi_head_attention, with need_weights True or False; it returns
    the weights (averaged over the heads) only when asked, and computes what the regular path computes."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = randn(2, 5, 8)
    with torch.no_grad():
        regular = mha(x, x, x)
        mha.eval()
        for need_weights in (True, False):
            assert ah.torch_compat.aten_operators(mha, x, x, x, need_weights=need_weights) == [
                "_native_multi_head_attention"]
        out, w = mha(x, x, x)
        out_no_weights, none = mha(x, x, x, need_weights=False)
    assert none is None and w.shape == (2, 5, 5)
    assert torch.allclose(w, regular[1], atol=1e-6) and torch.allclose(out, regular[0], atol=1e-6)
    assert torch.allclose(out_no_weights, out, atol=1e-6)


def test_eval_clears_the_training_flag_of_every_submodule_and_leaves_autograd_on():
    """Chapter 6: a module is built in training mode; eval() sets training to False in it and in the modules inside
    it, train() sets it back, and neither changes whether its parameters require gradients."""
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    assert mha.training and mha.out_proj.training
    assert mha.eval() is mha and not mha.training and not mha.out_proj.training
    assert all(p.requires_grad for p in mha.parameters())
    assert mha.train() is mha and mha.training and mha.out_proj.training


def test_multihead_attention_is_causal_is_a_hint_that_needs_attn_mask():
    """Chapter 6: on nn.MultiheadAttention, is_causal=True builds no mask: without attn_mask it raises."""
    x = randn(2, 5, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x, is_causal=True)


def test_multihead_attention_is_causal_hint_replaces_the_mask_on_the_regular_path_without_weights():
    """Chapter 6: on the regular path with need_weights=False and no key_padding_mask, the module trusts the hint:
    it drops attn_mask and computes causal attention, so a mask that is not causal is silently replaced."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)  # training mode: the regular path
    x = randn(2, 5, 8)
    causal_blocked = ~ah.causal_mask(5)
    last_blocked = torch.zeros(5, 5, dtype=torch.bool)
    last_blocked[:, -1] = True
    with torch.no_grad():
        causal_out = mha(x, x, x, attn_mask=causal_blocked, need_weights=False)[0]
        as_given = mha(x, x, x, attn_mask=last_blocked, need_weights=False)[0]
        wrong_hint = mha(x, x, x, attn_mask=last_blocked, need_weights=False, is_causal=True)[0]
    assert torch.allclose(wrong_hint, causal_out, atol=1e-6) and not torch.allclose(wrong_hint, as_given, atol=1e-6)


def _regular_path_cases():
    x = randn(2, 5, 8)
    default = dict(embed_dim=8, num_heads=2, batch_first=True)
    return {  # what leaves the fast path: (module options, call, autograd on)
        "training mode": ({**default}, "train", lambda m: m(x, x, x), False),
        "autograd on": ({**default}, "eval", lambda m: m(x, x, x), True),
        "keys from another tensor": ({**default}, "eval", lambda m: m(x, x.clone(), x.clone()), False),
        "an odd head count": ({**default, "num_heads": 1}, "eval", lambda m: m(x, x, x), False),
        "bias=False": ({**default, "bias": False}, "eval", lambda m: m(x, x, x), False),
        "batch_first=False": ({**default, "batch_first": False}, "eval", lambda m: m(x, x, x), False),
        "an unbatched input": ({**default}, "eval", lambda m: m(x[0], x[0], x[0]), False),
        "add_zero_attn": ({**default, "add_zero_attn": True}, "eval", lambda m: m(x, x, x), False),
        "add_bias_kv": ({**default, "add_bias_kv": True}, "eval", lambda m: m(x, x, x), False),
        "a float mask": ({**default}, "eval", lambda m: m(x, x, x, attn_mask=torch.zeros(5, 5)), False),
    }


@pytest.mark.parametrize("case", list(_regular_path_cases()))
def test_what_sends_multihead_attention_back_to_its_regular_path(case):
    """Chapter 6: the fast path needs eval() mode, autograd off, self-attention (one tensor as query, key and value),
    an even head count, biases, batch_first=True and a batched input, neither add_zero_attn nor add_bias_kv, and no
    float mask; without any one of them the module runs its regular path."""
    options, mode, call, grad = _regular_path_cases()[case]
    torch.manual_seed(0)
    mha = getattr(nn.MultiheadAttention(**options), mode)()
    with torch.enable_grad() if grad else torch.no_grad():
        ran = ah.torch_compat.aten_operators(call, mha)
    assert "_native_multi_head_attention" not in ran and "_softmax" in ran  # the regular path's own softmax


def test_fast_path_runs_under_inference_mode_and_set_fastpath_enabled_false_switches_it_off():
    """Chapter 6: torch.inference_mode() turns autograd off as no_grad does, so the module in eval() mode takes the fast
    path; torch.backends.mha.set_fastpath_enabled(False) sends it back to the regular path."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = randn(1, 5, 8)
    assert torch.backends.mha.get_fastpath_enabled()
    with torch.inference_mode():
        assert ah.torch_compat.aten_operators(mha, x, x, x) == ["_native_multi_head_attention"]
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            ran = ah.torch_compat.aten_operators(mha, x, x, x)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert "_native_multi_head_attention" not in ran and "_softmax" in ran


def test_multihead_attention_bool_masks_mean_blocked():
    """Chapter 7: nn.MultiheadAttention's bool attn_mask and key_padding_mask mean True = blocked (a float mask is
    added, 0 or -inf), and a mask in the other convention raises no error: it blocks the open keys, and a row with
    nothing open is NaN."""
    mha = identity_mha(8)
    X = randn(4, 8)
    allowed = ah.causal_mask(4)
    with torch.no_grad():
        out, _ = mha(X, X, X, attn_mask=~allowed)
        out_additive, _ = mha(X, X, X, attn_mask=torch.zeros(4, 4).masked_fill(~allowed, -math.inf))
        padded, _ = mha(X[None], X[None], X[None], key_padding_mask=torch.tensor([[False, False, True, True]]))
        _, wrong = mha(X, X, X, attn_mask=allowed)
    assert torch.allclose(out, ah.attention(X, X, X, mask=allowed)[0], atol=1e-6)
    assert torch.allclose(out_additive, out, atol=1e-6)
    assert torch.allclose(padded[0], ah.attention(X, X[:2], X[:2])[0], atol=1e-6)
    assert torch.isnan(wrong[-1]).all() and not torch.isnan(wrong[:-1]).any()


def test_multihead_attention_fully_masked_row_is_nan_with_weights_and_zero_without_on_the_regular_path():
    """Chapter 7: on the regular path (training mode, one head), a query whose keys are all blocked gets NaN weights
    and output with need_weights=True, and a zero output with need_weights=False (torch 2.13, CPU)."""
    mha = identity_mha(4)
    X = randn(3, 4)
    blocked = torch.tensor([[False, False, True], [True, True, True], [False, False, False]])
    with torch.no_grad():
        out, w = mha(X, X, X, attn_mask=blocked)
        fast, _ = mha(X, X, X, attn_mask=blocked, need_weights=False)
    assert torch.isnan(w[1]).all() and torch.isnan(out[1]).all() and not torch.isnan(out[[0, 2]]).any()
    assert (fast[1] == 0).all()


def test_multihead_attention_regular_path_gives_an_empty_row_out_projs_bias_without_weights():
    """Chapter 7: on the regular path with need_weights=False, a query whose keys are all blocked gets zeros from
    scaled_dot_product_attention, so the module returns out_proj's bias for it (zero as PyTorch initialises it)."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    assert mha.training and (mha.out_proj.bias == 0).all()
    X = randn(1, 3, 4)
    blocked = torch.tensor([[False, False, True], [True, True, True], [False, False, False]])
    with torch.no_grad():
        zero_bias, _ = mha(X, X, X, attn_mask=blocked, need_weights=False)
        mha.out_proj.bias.copy_(randn(4, seed=2))
        out, _ = mha(X, X, X, attn_mask=blocked, need_weights=False)
    assert (zero_bias[0, 1] == 0).all()
    assert torch.equal(out[0, 1], mha.out_proj.bias.detach()) and not torch.isnan(out).any()


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("d, h", [(4, 2), (64, 4)])  # heads of width 2, and of 16 (a multiple of 8, as SDPA likes)
def test_multihead_attention_fast_path_gives_nan_to_a_fully_masked_row_and_an_all_padding_sequence(need_weights, d, h):
    """Chapter 7: on the fast path (eval(), no_grad, biases, an even head count, batch_first), a query whose keys are
    all blocked gets NaN whatever need_weights says, the other queries do not, and a sequence whose key_padding_mask
    marks every key is NaN throughout; the same module on its regular path gives zeros with need_weights=False."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(d, h, batch_first=True).eval()
    X = randn(1, 3, d)
    blocked = torch.tensor([[False, False, True], [True, True, True], [False, False, False]])
    X_two = randn(2, 3, d, seed=1)
    all_padding = torch.tensor([[False, False, True], [True, True, True]])
    with torch.no_grad():
        assert "_native_multi_head_attention" in ah.torch_compat.aten_operators(mha, X, X, X, attn_mask=blocked)
        out, _ = mha(X, X, X, attn_mask=blocked, need_weights=need_weights)
        padded, _ = mha(X_two, X_two, X_two, key_padding_mask=all_padding, need_weights=need_weights)
        mha.train()
        regular, _ = mha(X_two, X_two, X_two, key_padding_mask=all_padding, need_weights=False)
    assert torch.isnan(out[0, 1]).all() and not torch.isnan(out[0, [0, 2]]).any()
    assert torch.isnan(padded[1]).all() and not torch.isnan(padded[0]).any()
    assert (regular[1] == 0).all()


def test_add_zero_attn_is_softmax_plus_one():
    """Chapter 9: add_zero_attn=True appends a zero key and a zero value after the projections: softmax + 1,
    with one more column of weights for the extra key."""
    X = randn(5, 8)
    with torch.no_grad():
        out, w = identity_mha(8, add_zero_attn=True)(X, X, X)
    plus_one = ah.null_attention.softmax_plus_one(X @ X.T / math.sqrt(8))
    assert w.shape == (5, 6)
    assert torch.allclose(w[:, :-1], plus_one, atol=1e-6) and torch.allclose(out, plus_one @ X, atol=1e-6)


def test_add_bias_kv_appends_a_learned_key_and_value():
    """Chapter 9: add_bias_kv=True adds parameters bias_k and bias_v of shape (1, 1, d), appended as one more key
    and value after the projections (a learned null key)."""
    mha = identity_mha(8, add_bias_kv=True)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "bias_k", "bias_v", "out_proj.weight"]
    assert mha.bias_k.shape == mha.bias_v.shape == (1, 1, 8)
    X = randn(5, 8)
    with torch.no_grad():
        out, w = mha(X, X, X)
        keys = torch.cat([X, mha.bias_k[0]])  # (t + 1, d)
        values = torch.cat([X, mha.bias_v[0]])
    ref_out, ref_w = ah.attention(X, keys, values)
    assert torch.allclose(w, ref_w, atol=1e-6) and torch.allclose(out, ref_out, atol=1e-6)


# ------------------------------------------------------------------ scaled_dot_product_attention


def test_sdpa_masks_allowed_bool_and_additive_float_with_default_scale():
    """Chapters 6 and 7: SDPA scales by 1/√d_k by default; a bool mask means True = may attend; a float mask is
    added to the scores."""
    q, k, v = randn(2, 3, 5, 8), randn(2, 3, 5, 8, seed=1), randn(2, 3, 5, 8, seed=2)
    allowed = ah.causal_mask(5)
    ours = ah.attention(q, k, v, mask=allowed)[0]
    additive = torch.zeros(5, 5).masked_fill(~allowed, -math.inf)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), ours, atol=1e-6)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=additive), ours, atol=1e-6)
    bias = randn(5, 5, seed=3)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + bias, dim=-1) @ v
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=bias), expected, atol=1e-6)


def test_is_causal_is_top_left_and_causal_lower_right_is_bottom_right():
    """Chapters 6, 7 and 9: is_causal=True aligns the triangle at the top left (causal_upper_left);
    causal_lower_right(t_q, t_k), accepted as attn_mask, aligns it at the bottom right."""
    # imported here, not at collection: the module imports torch._dynamo, which takes a second
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    q, k, v = randn(1, 2, 3, 8), randn(1, 2, 5, 8, seed=1), randn(1, 2, 5, 8, seed=2)
    bottom_right = torch.ones(3, 5, dtype=torch.bool).tril(diagonal=2)
    top_left = torch.ones(3, 5, dtype=torch.bool).tril()
    lower = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(3, 5))
    assert torch.allclose(lower, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right), atol=1e-6)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(causal, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left), atol=1e-6)
    assert torch.allclose(causal, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_upper_left(3, 5)), atol=1e-6)
    assert not torch.allclose(causal, lower, atol=1e-3)


def test_sdpa_dropout_applies_on_every_call_whatever_the_mode():
    """Chapter 6: SDPA is a function: dropout_p=p drops weights on every call (nothing switches it off in eval())."""
    q, k, v = randn(1, 2, 5, 8), randn(1, 2, 5, 8, seed=1), randn(1, 2, 5, 8, seed=2)
    torch.manual_seed(6)
    first = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    second = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.equal(first, second)
    assert not torch.allclose(first, F.scaled_dot_product_attention(q, k, v), atol=1e-3)


def test_sdpa_signature_is_the_one_chapter_6_prints():
    """Chapter 6: scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
    scale=None, enable_gqa=False), as torch documents it and as the chapter's listing prints it; the defaults are
    what a call without them does."""
    documented = " ".join(F.scaled_dot_product_attention.__doc__.split("->")[0].split())
    expected = ("scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, "
                "scale=None, enable_gqa=False)")
    assert documented == expected
    chapter = Path(__file__).resolve().parent.parent / "chapters" / "06_pytorch_attention.ipynb"
    text = "".join("".join(cell["source"]) for cell in json.loads(chapter.read_text())["cells"])
    listing = re.search(r"F\.(scaled_dot_product_attention\([^)]*\))\n```", text)  # the listing in a code block
    assert listing, "chapter 6 no longer lists F.scaled_dot_product_attention's signature"
    printed = " ".join(listing.group(1).split())
    assert printed == expected
    q, k, v = randn(1, 2, 4, 8), randn(1, 2, 4, 8, seed=1), randn(1, 2, 4, 8, seed=2)
    spelled_out = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                                 enable_gqa=False)
    assert torch.equal(spelled_out, F.scaled_dot_product_attention(q, k, v))


def test_sdpa_dropout_scales_the_kept_weights_by_one_over_one_minus_p():
    """Chapter 6: dropout_p=p sets a random share of the weights to zero and scales the rest by 1/(1 - p)."""
    q, k = randn(1, 1, 6, 8), randn(1, 1, 6, 8, seed=1)
    v = torch.eye(6)[None, None]  # one-hot values: the output is the weights themselves
    weights = F.scaled_dot_product_attention(q, k, v)
    torch.manual_seed(3)
    dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25)
    kept = dropped != 0
    assert kept.any() and not kept.all()
    assert torch.allclose(dropped[kept], weights[kept] / (1 - 0.25), atol=1e-6)


def test_sdpa_backends_on_the_cpu():
    """Chapters 6 and 10: on CPU tensors MATH and FLASH_ATTENTION run (and agree with the book); EFFICIENT_ATTENTION and
    CUDNN_ATTENTION have no CPU implementation."""
    q, k, v = randn(1, 2, 16, 8), randn(1, 2, 16, 8, seed=1), randn(1, 2, 16, 8, seed=2)
    reference = ah.attention(q, k, v)[0]
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
        with sdpa_kernel(backend):
            assert torch.allclose(F.scaled_dot_product_attention(q, k, v), reference, atol=1e-6)
    for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        with sdpa_kernel(backend), pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, k, v)


def test_sdpa_default_on_the_cpu_is_the_fused_flash_kernel():
    """Chapters 6 and 10: on the CPU the default call runs the fused flash kernel, one operator, so its memory is
    that of its output."""
    q, k, v = randn(1, 1, 256, 16), randn(1, 1, 256, 16, seed=1), randn(1, 1, 256, 16, seed=2)
    with OpNames() as ops:
        F.scaled_dot_product_attention(q, k, v)
    assert ops.names() == ["aten._scaled_dot_product_flash_attention_for_cpu.default"]
    with sdpa_kernel(SDPBackend.MATH):
        math_peak = ah.cost.peak_tensor_memory(F.scaled_dot_product_attention, q, k, v)
    assert ah.cost.peak_tensor_memory(F.scaled_dot_product_attention, q, k, v) < 256 * 256 * 4 < math_peak


@pytest.mark.parametrize("backend", ["MATH", "FLASH_ATTENTION"])
@pytest.mark.parametrize("kind", ["bool", "-inf added"])
def test_sdpa_fully_masked_row_is_zero_on_the_cpu(backend, kind):
    """Chapters 7 and 9: with torch 2.13 on the CPU, SDPA gives an all-zero output to a query whose keys are all
    blocked, in the math and the fused backend, with a bool or an additive -inf mask. (Earlier versions and some
    GPU kernels returned NaN: pytorch#103749, #103963, #109517.)"""
    X = randn(1, 1, 3, 4)
    allowed = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    mask = allowed if kind == "bool" else torch.zeros(3, 3).masked_fill(~allowed, -math.inf)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        out = F.scaled_dot_product_attention(X, X, X, attn_mask=mask)
    assert (out[0, 0, 1] == 0).all() and not torch.isnan(out).any()


def test_sdpa_restricted_to_flash_raises_when_the_cpu_flash_kernel_cannot_run():
    """Chapter 10: restricted to FLASH_ATTENTION, SDPA raises rather than fall back to another backend when the CPU
    flash kernel cannot run (dropout, or a 3-D input), so a result under the restriction is the flash kernel's."""
    q = randn(1, 2, 8, 16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch warns why, before it raises
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(q[0], q[0], q[0])


def test_sdpa_flash_on_the_cpu_runs_its_forward_and_backward_operators_under_a_causal_mask():
    """Chapter 10: with a causal mask and gradients, the CPU flash backend runs
    _scaled_dot_product_flash_attention_for_cpu forwards and its _backward twin backwards, and its output and
    gradients are the math backend's."""
    q, k, v = (randn(1, 2, 64, 16, seed=s).requires_grad_() for s in range(3))
    dO = randn(1, 2, 64, 16, seed=3)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), OpNames() as ops:
        flash = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        flash_grads = torch.autograd.grad(flash, (q, k, v), dO)
    assert {name for name in ops.names() if "flash" in name} == {
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}
    with sdpa_kernel(SDPBackend.MATH):
        reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        reference_grads = torch.autograd.grad(reference, (q, k, v), dO)
    assert torch.allclose(flash, reference, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(flash_grads, reference_grads, strict=True))


def test_sdpa_flash_cpu_operator_returns_the_output_and_each_querys_logsumexp():
    """Chapter 10: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu returns two tensors, the output
    (b, h, t, d) and the log-sum-exp of each query's scaled (and masked) scores (b, h, t)."""
    q, k, v = randn(1, 2, 32, 16), randn(1, 2, 32, 16, seed=1), randn(1, 2, 32, 16, seed=2)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
    assert out.shape == (1, 2, 32, 16) and lse.shape == (1, 2, 32)
    scores = (q @ k.transpose(-2, -1) / 4).masked_fill(~ah.causal_mask(32), -math.inf)
    assert torch.allclose(lse, torch.logsumexp(scores, dim=-1), atol=1e-5)
    assert torch.allclose(out, ah.attention(q, k, v, mask=ah.causal_mask(32))[0], atol=1e-5)


def test_sdpa_enable_gqa_pairs_query_head_i_with_key_head_i_over_h_by_g():
    """Chapter 9: enable_gqa=True lets h query heads share g key/value heads, query head i using key/value head
    i // (h/g), as repeat_interleave orders them."""
    q, k, v = randn(2, 8, 3, 4), randn(2, 2, 6, 4, seed=1), randn(2, 2, 6, 4, seed=2)
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    copied = F.scaled_dot_product_attention(q, k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1))
    assert torch.allclose(out, copied, atol=1e-6)
    assert not torch.allclose(out, F.scaled_dot_product_attention(q, k.repeat(1, 4, 1, 1), v.repeat(1, 4, 1, 1)))


# ------------------------------------------------------------------ masks, layers and FLOP counting


def test_generate_square_subsequent_mask_is_an_additive_causal_mask():
    """Chapter 7: nn.Transformer.generate_square_subsequent_mask(t) is a ready-made causal mask (which an exercise
    forbids): float, 0 on and below the diagonal, -inf above."""
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == torch.float32
    assert torch.equal(mask == 0, ah.causal_mask(4)) and (mask[~ah.causal_mask(4)] == -math.inf).all()


def test_transformer_encoder_layer_norm_first_is_pre_layernorm_with_relu():
    """Chapter 8: nn.TransformerEncoderLayer(norm_first=True) with dropout 0 computes x + SA(LN1(x)), then
    x + linear2(relu(linear1(LN2(x)))); ReLU is its default activation; src_mask's bools mean True = blocked."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                       norm_first=True).double()
    x = randn(2, 5, 8).double()
    blocked = ~ah.causal_mask(5)
    with torch.no_grad():
        h = x + layer.self_attn(*(layer.norm1(x),) * 3, attn_mask=blocked, need_weights=False)[0]
        expected = h + layer.linear2(torch.relu(layer.linear1(layer.norm2(h))))
        assert torch.allclose(layer(x, src_mask=blocked), expected, atol=1e-12)
    assert inspect.signature(nn.TransformerEncoderLayer.__init__).parameters["activation"].default is F.relu


def test_flop_counter_counts_two_per_multiply_add_only_for_matrix_products_and_credits_modules():
    """Chapters 7 and 9: FlopCounterMode counts 2 FLOPs per multiply-add of every matrix product (mm, bmm), nothing
    for softmax or cat, and credits each count to the module it ran in."""
    from torch.utils.flop_counter import FlopCounterMode

    linear = nn.Linear(4, 5, bias=False)
    x = randn(3, 4)
    with FlopCounterMode(display=False) as counter:
        y = linear(x)
        torch.softmax(torch.cat([y, y]), dim=-1)
        torch.bmm(randn(2, 3, 4), randn(2, 4, 6))
    counts = counter.get_flop_counts()
    assert counter.get_total_flops() == 2 * 3 * 4 * 5 + 2 * 2 * 3 * 4 * 6
    assert {str(op).split(".")[-1] for op in counts["Global"]} == {"mm", "bmm"}
    assert sum(counts["Linear"].values()) == 2 * 3 * 4 * 5
