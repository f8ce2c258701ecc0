"""Every chapter 5 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import concurrent.futures
import math
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch05 as check

# ---------------------------------------------------------------- ex-ch05-strides


def test_transpose_strides_accepts_solution(capsys):
    x = torch.zeros(2, 5, 3, 4)
    check.transpose_strides(x.transpose(1, 2).stride(), x.transpose(1, 2).contiguous().stride())
    assert capsys.readouterr().out.count("correct") == 2


@pytest.mark.parametrize("strides_t, strides_c, hint", [
    ((60, 12, 4, 1), (60, 20, 4, 1), "strides of x itself"),
    ((60, 20, 4, 1), (60, 20, 4, 1), "strides of the copy"),
    ((60, 4, 12, 1), (60, 4, 12, 1), "copies the data"),
    ((60, 4, 12, 1), (60, 12, 4, 1), "original shape"),
])
def test_transpose_strides_rejects_mistakes(strides_t, strides_c, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.transpose_strides(strides_t, strides_c)


def test_transpose_strides_rejects_non_tuple():
    with pytest.raises(CheckFailed, match="tuple of integers"):
        check.transpose_strides("60, 4, 12, 1", (60, 20, 4, 1))
    with pytest.raises(CheckFailed, match="tuple of integers"):
        check.transpose_strides((60, 4, 12, True), (60, 20, 4, 1))   # True is an int to Python, not a stride


@pytest.mark.parametrize("as_integers", [
    lambda strides: tuple(np.int64(s) for s in strides),       # from NumPy arithmetic, or np.array(...).tolist() kept
    lambda strides: tuple(np.int32(s) for s in strides),
    lambda strides: [torch.tensor(s) for s in strides],        # 0-d integer tensors, a list rather than a tuple
    lambda strides: torch.Size(strides),
], ids=["numpy int64", "numpy int32", "integer tensors", "torch.Size"])
def test_transpose_strides_accepts_integers_of_other_types(as_integers, capsys):
    check.transpose_strides(as_integers((60, 4, 12, 1)), as_integers((60, 20, 4, 1)))
    assert capsys.readouterr().out.count("correct") == 2


def test_transpose_strides_names_a_mistake_in_numpy_integers():
    with pytest.raises(CheckFailed, match="strides of x itself"):
        check.transpose_strides(tuple(np.int64(s) for s in (60, 12, 4, 1)), (60, 20, 4, 1))


@pytest.mark.parametrize("entry, hint", [
    (True, "holds the bool True"),
    (np.True_, "holds the bool"),
    (torch.tensor(True), "holds the bool"),
    (1.0, "holds 1.0, a float.*without a decimal point"),
    (np.float64(1.0), "a float64.*without a decimal point"),
    (torch.tensor(1.0), "a Tensor.*without a decimal point"),
    ("1", "holds '1', a str.*whole number"),
])
def test_transpose_strides_rejects_bools_and_floats_with_a_hint(entry, hint):
    with pytest.raises(CheckFailed, match=f"tuple of integers.*{hint}"):
        check.transpose_strides((60, 4, 12, entry), (60, 20, 4, 1))
    with pytest.raises(CheckFailed, match=f"strides_c should be a tuple of integers.*{hint}"):
        check.transpose_strides((60, 4, 12, 1), (60, 20, 4, entry))


def test_parameter_counts_rejects_a_count_that_is_not_whole():
    with pytest.raises(CheckFailed, match="is not right"):
        check.parameter_counts(4 * 64 * 64 + 0.4, 4 * 8 * 64 * 64)


# ---------------------------------------------------------------- ex-ch05-params


def test_parameter_counts_accepts_solution(capsys):
    check.parameter_counts(4 * 64 * 64, 4 * 8 * 64 * 64)
    assert capsys.readouterr().out.count("correct") == 2


def test_parameter_counts_accepts_numpy_and_torch_integers(capsys):
    check.parameter_counts(np.int64(16384), torch.tensor(131072))
    check.parameter_counts(np.float64(16384.0), 131072.0)
    assert capsys.readouterr().out.count("correct") == 4


@pytest.mark.parametrize("n_split, n_full", [(16385, 131072), (16384, 131071)])
def test_parameter_counts_must_be_exact(n_split, n_full):
    with pytest.raises(CheckFailed, match="is not right"):
        check.parameter_counts(n_split, n_full)


@pytest.mark.parametrize("n_split, n_full, hint", [
    (3 * 64 * 64, 4 * 8 * 64 * 64, "output projection W_o"),
    (4 * 64 * 64 // 8, 4 * 8 * 64 * 64, "does not shrink the total"),
    (4 * 8 * 64 * 64, 4 * 8 * 64 * 64, "full-width count"),
    (4 * 64 * 64, 3 * 8 * 64 * 64 + 64 * 64, "h·d_model² weights"),
    (4 * 64 * 64, 3 * 8 * 64 * 64, "left out the output projection"),
    (4 * 64 * 64, 4 * 64 * 64, "split-head count"),
])
def test_parameter_counts_rejects_mistakes(n_split, n_full, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.parameter_counts(n_split, n_full)


# ---------------------------------------------------------------- ex-ch05-split


def split_ok(x, h):
    b, t, hd = x.shape
    return x.view(b, t, h, hd // h).transpose(1, 2)


def merge_ok(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def test_split_and_merge_accepts_solution(capsys):
    check.split_and_merge(split_ok, merge_ok)
    assert capsys.readouterr().out.count("correct") == 5


@pytest.mark.parametrize("split, merge", [  # right for the chapter's (b, t, h·d_k) = (2, 6, 12) only
    (lambda x, h: x.view(2, 6, h, -1).transpose(1, 2), lambda x: x.transpose(1, 2).reshape(2, 6, 12)),
    (split_ok, lambda x: x.transpose(1, 2).reshape(2, 6, -1)),
    (lambda x, h: x.view(2, 6, h, 12 // h).transpose(1, 2), merge_ok),
], ids=["both", "merge", "split"])
def test_split_and_merge_reject_the_exercises_sizes_written_in(split, merge):
    with pytest.raises(CheckFailed, match="It was right on the exercise's inputs|though it worked on the exercise's"):
        check.split_and_merge(split, merge)


@pytest.mark.parametrize("split, hint", [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h), "straight as"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2), "wrong order"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h), "forgot the transpose"),
    (lambda x, h: x.view(2, 6, 3, 4).transpose(1, 2), "does not depend on h"),     # the sizes of the test, hard-coded
])
def test_split_rejects_mistakes(split, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.split_and_merge(split, merge_ok)


@pytest.mark.parametrize("merge, hint", [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "swap the head and token dimensions first"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "wrong order"),
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "contiguous"),  # chapter 5's bug 4
])
def test_merge_rejects_mistakes(merge, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.split_and_merge(split_ok, merge)


# ---------------------------------------------------------------- ex-ch05-forward


def multi_head_by_hand(mha, x, scale=None, dim=-1, transpose_split=True, merge="right", project=True):
    """The reference answer, or (with an argument) one of the usual mistakes."""
    b, t, d = x.shape
    h, dk = mha.num_heads, d // mha.num_heads

    def split(y):
        return y.view(b, t, h, dk).transpose(1, 2) if transpose_split else y.view(b, h, t, dk)

    q, k, v = split(mha.W_q(x)), split(mha.W_k(x)), split(mha.W_v(x))
    w = torch.softmax(q @ k.transpose(-2, -1) / (scale or math.sqrt(dk)), dim=dim)
    heads = w @ v
    if merge == "right":
        merged = heads.transpose(1, 2).reshape(b, t, d)
    elif merge == "interleaved":
        merged = heads.permute(0, 2, 3, 1).reshape(b, t, d)
    else:
        merged = heads.reshape(b, t, d)
    return (mha.W_o(merged) if project else merged), w


def test_multi_head_function_accepts_solution(capsys):
    check.multi_head_function(multi_head_by_hand)
    assert capsys.readouterr().out == (
        "✓ weights: correct\n✓ out: correct\n"
        "✓ weights on MultiHeadAttention(8, 4): correct\n✓ out on MultiHeadAttention(8, 4): correct\n")


def test_multi_head_function_accepts_weight_matrices_and_einsum(capsys):
    def einsum(mha, x):
        b, t, d = x.shape
        h = mha.num_heads
        q, k, v = (torch.einsum("btd,ed->bte", x, lin.weight).unflatten(-1, (h, -1)) for lin in (mha.W_q, mha.W_k,
                                                                                                    mha.W_v))
        w = torch.softmax(torch.einsum("bihk,bjhk->bhij", q, k) / math.sqrt(d // h), dim=-1)
        return torch.einsum("bhij,bjhk->bihk", w, v).flatten(2) @ mha.W_o.weight.T, w

    check.multi_head_function(einsum)
    assert capsys.readouterr().out.count("correct") == 4


def _same_weights(mha, x):
    twin = ah.MultiHeadAttention(mha.d_model, mha.num_heads)
    twin.load_state_dict(mha.state_dict())
    return twin(x)


@pytest.mark.parametrize("shortcut", [
    lambda mha, x: mha(x),  # the shortcut itself: mha_ex(xb)
    lambda mha, x: mha.forward(x, x, x),
    lambda mha, x: ah.MultiHeadAttention.forward(mha, x),
    lambda mha, x: tuple(t.clone() for t in torch.no_grad()(mha)(x)),  # a copy made without gradients
    _same_weights,  # a fresh module loaded with its weights
], ids=["call", "forward", "class-forward", "no-grad-copy", "same-weights"])
def test_multi_head_function_rejects_calling_the_module(shortcut):
    with pytest.raises(CheckFailed, match="the module's forward"):
        check.multi_head_function(shortcut)


def _hidden_sdpa(mha, x):  # (b·h, t, d_k): SDPA's math fallback, with the torch-function record off
    b, t, d = x.shape
    h = mha.num_heads
    q, k, v = (lin(x).view(b, t, h, d // h).transpose(1, 2).reshape(b * h, t, d // h) for lin in (mha.W_q, mha.W_k,
                                                                                                   mha.W_v))
    with torch._C.DisableTorchFunction():
        heads = F.scaled_dot_product_attention(q, k, v)
    out = mha.W_o(heads.view(b, h, t, d // h).transpose(1, 2).reshape(b, t, d))
    return out, multi_head_by_hand(mha, x)[1]


def _hidden_from_torch_functions(mha, x):  # not fused when the weights are asked for: bmm and softmax
    in_proj = torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight])
    with torch._C.DisableTorchFunction():
        out, w = F.multi_head_attention_forward(
            x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), mha.d_model, mha.num_heads, in_proj, None,
            None, None, False, 0.0, mha.W_o.weight, None, need_weights=True, average_attn_weights=False)
    return out.transpose(0, 1), w


def _torch_module(mha, x):
    torch_mha = nn.MultiheadAttention(mha.d_model, mha.num_heads, bias=False, batch_first=True)
    torch_mha.load_state_dict({"in_proj_weight": torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]),
                               "out_proj.weight": mha.W_o.weight})
    return torch_mha(x, x, x, average_attn_weights=False)


@pytest.mark.parametrize("shortcut, named", [
    (lambda mha, x: (None, ah.attention(*(mha._split(lin(x)) for lin in (mha.W_q, mha.W_k, mha.W_v)))[1]),
     "ah.attention and the module's own _split"),
    (_torch_module, "nn.MultiheadAttention"),
    (lambda mha, x: _hidden_from_torch_functions(mha, x), "switches off the check's record"),
    (lambda mha, x: _hidden_sdpa(mha, x), "switches off the check's record"),
    (lambda mha, x: concurrent.futures.ThreadPoolExecutor().submit(mha, x).result(), "starts a thread"),
    (lambda mha, x: (sys.setprofile(None), mha(x))[1], "switches off the check's profiler"),
    (lambda mha, x: (None, F.scaled_dot_product_attention(*(lin(x) for lin in (mha.W_q, mha.W_k, mha.W_v)))),
     "fused attention"),
], ids=["ah.attention", "nn.MultiheadAttention", "hidden-mha", "hidden-sdpa", "thread", "setprofile", "sdpa"])
def test_multi_head_function_rejects_attention_already_written(shortcut, named):
    with pytest.raises(CheckFailed, match=named):
        check.multi_head_function(shortcut)


@pytest.mark.parametrize("mistake, hint", [
    ({"scale": math.sqrt(12)}, "√d_model"),
    ({"dim": -2}, "wrong dimension"),
    ({"transpose_split": False}, "without the transpose"),
    ({"scale": 1.0}, "forgot the scale"),
    ({"merge": "interleaved"}, "wrong order"),
    ({"merge": "no transpose"}, "mixes tokens"),
    ({"project": False}, "output projection W_o"),
])
def test_multi_head_function_rejects_mistakes(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.multi_head_function(lambda mha, x: multi_head_by_hand(mha, x, **mistake))


def test_multi_head_function_accepts_a_list_a_changed_module_and_float64(capsys):
    def double(mha, x):  # converts the module it is given in place
        return list(multi_head_by_hand(mha.double(), x.double()))

    check.multi_head_function(double)
    assert capsys.readouterr().out.count("correct") == 4


@pytest.mark.parametrize("wrong, hint", [
    (lambda mha, x: multi_head_by_hand(mha, x)[::-1], "you returned \\(weights, out\\)"),
    (lambda mha, x: multi_head_by_hand(mha, x, scale=4.0), "divided by d_k = 4"),
    (lambda mha, x: (multi_head_by_hand(mha, x)[0], multi_head_by_hand(mha, x)[1].mean(dim=1)), "averaged over"),
])
def test_multi_head_function_names_more_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.multi_head_function(wrong)


def test_multi_head_function_names_a_split_with_the_heads_last():
    def heads_last(mha, x):
        b, t, d = x.shape
        h, dk = mha.num_heads, d // mha.num_heads
        q, k, v = (lin(x).view(b, t, dk, h).permute(0, 3, 1, 2) for lin in (mha.W_q, mha.W_k, mha.W_v))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dk), dim=-1)
        return mha.W_o((w @ v).transpose(1, 2).reshape(b, t, d)), w

    with pytest.raises(CheckFailed, match="\\(b, t, d_k, h\\)"):
        check.multi_head_function(heads_last)


def test_multi_head_function_rejects_the_exercises_numbers_written_in():
    with pytest.raises(CheckFailed, match="divide by √2: take d_k from the module"):
        check.multi_head_function(lambda mha, x: multi_head_by_hand(mha, x, scale=2.0))  # right for d_k = 4 only

    def three_heads(mha, x):  # the exercise's number of heads written in
        b, t, d = x.shape
        q, k, v = (lin(x).view(b, t, 3, -1).transpose(1, 2) for lin in (mha.W_q, mha.W_k, mha.W_v))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return mha.W_o((w @ v).transpose(1, 2).reshape(b, t, d)), w

    with pytest.raises(CheckFailed, match="raised RuntimeError on MultiHeadAttention\\(8, 4\\).*from mha and x"):
        check.multi_head_function(three_heads)


def test_multi_head_function_wants_a_pair():
    with pytest.raises(CheckFailed, match="should return a pair"):
        check.multi_head_function(lambda mha, x: multi_head_by_hand(mha, x)[0])


# ---------------------------------------------------------------- ex-ch05-lookback


def look_back_ok(weights):
    t = weights.shape[-1]
    i = torch.arange(t)
    distance = (i[:, None] - i[None, :]).float()
    return (weights * distance).sum(-1)[:, :, 2:].mean(dim=(0, 2))


def _distance(t, sign=1):
    i = torch.arange(t).float()
    return sign * (i[:, None] - i[None, :])


def test_look_back_distance_accepts_solution(capsys):
    check.look_back_distance(look_back_ok)
    assert capsys.readouterr().out.count("correct") == 2


def test_look_back_distance_rejects_t_written_in():
    def look_back_t8(w):  # right for the 8 tokens of the chapter's weights only
        i = torch.arange(8)
        return (w * (i[:, None] - i[None, :]).float()).sum(-1)[:, :, 2:].mean(dim=(0, 2))

    with pytest.raises(CheckFailed, match="take t from the weights you are given"):
        check.look_back_distance(look_back_t8)


@pytest.mark.parametrize("look_back, hint", [
    (lambda w: (w * _distance(w.shape[-1], -1)).sum(-1)[:, :, 2:].mean(dim=(0, 2)), "i - j, not j - i"),
    (lambda w: (w * _distance(w.shape[-1])).sum(-2)[:, :, 2:].mean(dim=(0, 2)), "summed over the queries"),
    (lambda w: (w * _distance(w.shape[-1])).sum(-1).mean(dim=(0, 2)), "queries i >= 2"),
    (lambda w: (torch.arange(w.shape[-1]) - w.argmax(-1)).float()[:, :, 2:].mean(dim=(0, 2)), "argmax"),
    (lambda w: (w * _distance(w.shape[-1])).sum(-1)[:, :, 2:].mean(dim=2), "not over the sequences"),
    (lambda w: look_back_ok(w).mean(), "over the heads too"),
])
def test_look_back_distance_rejects_mistakes(look_back, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.look_back_distance(look_back)


def test_look_back_distance_rejects_integer_answer():
    with pytest.raises(CheckFailed, match="dtype"):
        check.look_back_distance(lambda w: look_back_ok(w).round().long())
