"""Chapter 7's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch07 as check

# ex-ch07-predict: a row blocked with -1e9


def test_minus_1e9_accepts_reference(capsys):
    check.minus_1e9_row(torch.softmax(check.PREDICT_SCORES + torch.full((4,), -1e9), dim=-1))
    assert "✓ w_row: correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (torch.zeros(4), "all zeros is what the book's attention gives"),
    (torch.softmax(check.PREDICT_SCORES, dim=0), "these scores are float32"),
    (check.PREDICT_SCORES - 1e9, "masked scores"),
    (torch.full((4,), float("nan")), "NaN is what a row of -inf gives"),
    (torch.full((3,), 1 / 3), "has shape"),
])
def test_minus_1e9_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.minus_1e9_row(wrong)


# ex-ch07-bytes


def test_weights_gib_accepts_reference(capsys):
    check.weights_gib(8 * 12 * 4096 ** 2 * 4 / 2 ** 30)
    assert "✓ weights_gib: correct" in capsys.readouterr().out


@pytest.mark.parametrize("answer", [
    6, 6.0, np.float32(6.0), np.float64(6.0), np.int64(6), np.array(6.0), torch.tensor(6.0),
    np.prod([8, 12, 4096, 4096, 4]) / 2 ** 30,  # computed with NumPy
])
def test_weights_gib_accepts_any_real_number(answer, capsys):
    check.weights_gib(answer)
    assert capsys.readouterr().out == "✓ weights_gib: correct\n"


@pytest.mark.parametrize("wrong, hint", [
    (8 * 4096 ** 2 * 4 / 2 ** 30, "left out the heads"),
    (12 * 4096 ** 2 * 4 / 2 ** 30, "left out the batch"),
    (8 * 12 * 4096 ** 2 / 2 ** 30, "4 bytes"),
    (8 * 12 * 4096 * 4 / 2 ** 30, "t × t weights"),
    (8 * 12 * 4096 ** 2 * 4 / 1e9, "GiB is 2\\*\\*30"),
    ("6", "should be a number"),
    (True, "got the bool"),
    (np.array([6.0, 6.0]), "single number"),
])
def test_weights_gib_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.weights_gib(wrong)


# ex-ch07-combined: causal + padding


def combined_reference():
    real = ah.padding_mask(check.LENGTHS, max_len=check.T)
    return ah.causal_mask(check.T)[None] & real[:, None, :]


def test_combined_mask_accepts_reference(capsys):
    check.combined_mask(combined_reference())
    assert "✓ mask: correct" in capsys.readouterr().out


def test_combined_mask_reference_blocks_what_it_should():
    torch.manual_seed(0)
    X = torch.randn(2, check.T, 4)
    out, _ = ah.attention(X, X, X, mask=combined_reference())
    assert torch.allclose(out, F.scaled_dot_product_attention(X, X, X, attn_mask=combined_reference()), atol=1e-6)


def test_combined_mask_rejects_mistakes():
    real = ah.padding_mask(check.LENGTHS, max_len=check.T)
    causal = ah.causal_mask(check.T)
    cases = [
        (~combined_reference(), "inverted"),
        (causal.expand(2, check.T, check.T), "padding is missing"),
        (real[:, None, :].expand(2, check.T, check.T), "causal part is missing"),
        (causal.T[None] & real[:, None, :], "wrong way round"),
        (causal[None] & real[:, :, None], "applied to the queries"),
        (combined_reference().float(), "build a bool mask"),
        (causal, "has shape"),
        ([[True]], "should be a torch.Tensor"),
    ]
    for wrong, hint in cases:
        with pytest.raises(CheckFailed, match=hint):
            check.combined_mask(wrong)


# ex-ch07-decode: bottom-right causal mask


def test_decoding_mask_accepts_reference(capsys):
    check.decoding_mask(ah.causal_mask(check.T_Q, check.T_K))
    check.decoding_mask(torch.ones(check.T_Q, check.T_K, dtype=torch.bool).tril(diagonal=check.T_K - check.T_Q))
    assert capsys.readouterr().out.count("✓ decode_mask: correct") == 2


@pytest.mark.parametrize("wrong, hint", [
    (torch.ones(3, 7, dtype=torch.bool).tril(), "is_causal=True"),
    (~ah.causal_mask(3, 7), "inverted"),
    (torch.ones(3, 7, dtype=torch.bool).triu(diagonal=4), "tril, not triu"),
    (torch.ones(3, 7, dtype=torch.bool), "every key is allowed"),
    (ah.causal_mask(7), "has shape"),
    (ah.causal_mask(3, 7).int(), "dtype torch.int32"),
])
def test_decoding_mask_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.decoding_mask(wrong)
