"""Every chapter 5 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import math

import numpy as np
import pytest
import torch

from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch05 as check

# ---------------------------------------------------------------- ex-ch05-strides


def test_transpose_strides_accepts_solution(capsys):
    x = torch.zeros(2, 5, 3, 4)
    check.transpose_strides(x.transpose(1, 2).stride(), x.transpose(1, 2).contiguous().stride())
    assert capsys.readouterr().out.count("correct") == 2


@pytest.mark.parametrize("strides_t, strides_c, hint", [
    ((60, 12, 4, 1), (60, 20, 4, 1), "strides of x itself"),
    ((60, 20, 4, 1), (60, 20, 4, 1), "after .contiguous()"),
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
    assert capsys.readouterr().out.count("correct") == 3


@pytest.mark.parametrize("split, hint", [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h), "straight as"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2), "wrong order"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h), "forgot the transpose"),
    (lambda x, h: x.view(2, 5, 3, 4).transpose(1, 2), "does not depend on h"),     # the sizes of the test, hard-coded
])
def test_split_rejects_mistakes(split, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.split_and_merge(split, merge_ok)


@pytest.mark.parametrize("merge, hint", [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "transpose\\(1, 2\\) first"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "wrong order"),
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "contiguous"),  # chapter 5's bug 4
])
def test_merge_rejects_mistakes(merge, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.split_and_merge(split_ok, merge)


# ---------------------------------------------------------------- ex-ch05-forward


def _forward(scale=None, dim=-1, transpose_split=True, merge="right", project=True):
    mha, x = check.exercise_mha(), check.exercise_batch()
    b, t, d = x.shape
    h, dk = 3, 4
    with torch.no_grad():
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


def test_manual_multi_head_accepts_solution(capsys):
    check.manual_multi_head(*_forward())
    assert capsys.readouterr().out == "✓ weights: correct\n✓ out: correct\n"


def test_manual_multi_head_accepts_solution_with_gradients_on(capsys):
    mha, x = check.exercise_mha(), check.exercise_batch()
    q, k, v = (lin(x).view(2, 5, 3, 4).transpose(1, 2) for lin in (mha.W_q, mha.W_k, mha.W_v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    out = mha.W_o((weights @ v).transpose(1, 2).reshape(2, 5, 12))
    assert torch.allclose(out, mha(x)[0], atol=1e-5)  # comparing with the module is fine
    check.manual_multi_head(out, weights)
    assert capsys.readouterr().out.count("correct") == 2


@pytest.mark.parametrize("take", [
    lambda mha, x: mha(x),  # the shortcut itself: mha_ex(xb)
    lambda mha, x: mha.forward(x),
    lambda mha, x: mha(x, x, x),
    lambda mha, x: tuple(t.clone() for t in mha(x)),
    lambda mha, x: tuple(t.detach().contiguous() for t in mha(x)),
])
def test_manual_multi_head_rejects_calling_the_module(take):
    mha, x = check.exercise_mha(), check.exercise_batch()
    with pytest.raises(CheckFailed, match="comes from calling the module"):
        check.manual_multi_head(*take(mha, x))


def test_manual_multi_head_rejects_mixing_module_and_hand_results():
    mha, x = check.exercise_mha(), check.exercise_batch()
    _, weights_hand = _forward()
    with torch.no_grad():
        out_module, _ = mha(x)
    with pytest.raises(CheckFailed, match="out comes from calling the module"):
        check.manual_multi_head(out_module, weights_hand)


@pytest.mark.parametrize("kwargs, hint", [
    ({"scale": math.sqrt(12)}, "√d_model"),
    ({"dim": -2}, "wrong dimension"),
    ({"transpose_split": False}, "without the transpose"),
    ({"scale": 1.0}, "forgot the scale"),
])
def test_manual_multi_head_rejects_wrong_weights(kwargs, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.manual_multi_head(*_forward(**kwargs))


@pytest.mark.parametrize("kwargs, hint", [
    ({"merge": "interleaved"}, "wrong order"),
    ({"merge": "no transpose"}, "mixes tokens"),
    ({"project": False}, "output projection W_o"),
])
def test_manual_multi_head_rejects_wrong_outputs(kwargs, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.manual_multi_head(*_forward(**kwargs))


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
    assert capsys.readouterr().out.count("correct") == 1


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
