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
        (causal[None] & real[:, :, None], "blocks the padded queries"),
        (causal[None] & real[:, :, None] & real[:, None, :], "blocks the padded queries"),  # chapter 7's both_mask
        (combined_reference().float(), "build a bool mask"),
        (causal, "has shape"),
        ([[True]], "should be a torch.Tensor"),
    ]
    for wrong, hint in cases:
        with pytest.raises(CheckFailed, match=hint):
            check.combined_mask(wrong)


# ex-ch07-decode: a function for the bottom-right causal mask


def reference_decoding_mask(t_q, t_k):
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)


def test_decoding_mask_accepts_reference(capsys):
    check.decoding_mask_function(reference_decoding_mask)
    assert capsys.readouterr().out == "✓ decoding_mask: correct\n"


def test_decoding_mask_reference_is_the_books_and_pytorchs_bottom_right_mask():
    from torch.nn.attention.bias import causal_lower_right

    for t_q, t_k in check.DECODE_SIZES:
        assert torch.equal(reference_decoding_mask(t_q, t_k), ah.causal_mask(t_q, t_k))
        assert torch.equal(reference_decoding_mask(t_q, t_k), causal_lower_right(t_q, t_k)._materialize())


def test_decoding_mask_sizes_tell_the_mistakes_apart():
    assert check.DECODE_SIZES[0] == (check.T_Q, check.T_K)
    assert any(t_q < t_k for t_q, t_k in check.DECODE_SIZES[1:])  # a fixed shift of 4 fails somewhere
    assert any(t_k - t_q != check.T_K - check.T_Q for t_q, t_k in check.DECODE_SIZES)


@pytest.mark.parametrize("wrong, hint", [
    (lambda t_q, t_k: torch.ones(t_q, t_k, dtype=torch.bool).tril(), "as PyTorch's causal flag does"),
    (lambda t_q, t_k: torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_q - t_k), "wrong sign"),
    (lambda t_q, t_k: torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=4), "shift is fixed at 4"),
    (lambda t_q, t_k: ~reference_decoding_mask(t_q, t_k), "inverted"),
    (lambda t_q, t_k: torch.ones(t_q, t_k, dtype=torch.bool).triu(diagonal=t_k - t_q), "tril, not triu"),
    (lambda t_q, t_k: torch.ones(t_q, t_k, dtype=torch.bool), "every key is allowed"),
    (lambda t_q, t_k: reference_decoding_mask(t_k, t_q), "has shape"),
    (lambda t_q, t_k: reference_decoding_mask(t_q, t_k).int(), "dtype torch.int32"),
    (lambda t_q, t_k: None, "should be a torch.Tensor"),
])
def test_decoding_mask_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.decoding_mask_function(wrong)


def test_decoding_mask_rejects_a_tensor_instead_of_a_function():
    with pytest.raises(CheckFailed, match="pass the function itself"):
        check.decoding_mask_function(reference_decoding_mask(3, 7))


@pytest.mark.parametrize("shortcut", [
    lambda t_q, t_k: ah.causal_mask(t_q, t_k),
    lambda t_q, t_k: ah.masks.causal_mask(t_q, t_k),
    lambda t_q, t_k: torch.nn.attention.bias.causal_lower_right(t_q, t_k)._materialize(),
    lambda t_q, t_k: torch.nn.attention.bias.CausalBias(
        torch.nn.attention.bias.CausalVariant.LOWER_RIGHT, t_q, t_k)._materialize(),
])
def test_decoding_mask_rejects_the_ready_made_masks(shortcut):
    with pytest.raises(CheckFailed, match="asks you not to use"):
        check.decoding_mask_function(shortcut)


@pytest.mark.parametrize("shortcut", [  # a square causal mask, cut to its last t_q rows: the same mask
    lambda t_q, t_k: torch.nn.Transformer.generate_square_subsequent_mask(t_k)[t_k - t_q:] == 0,
    lambda t_q, t_k: torch.nn.attention.bias.causal_upper_left(t_k, t_k)._materialize()[t_k - t_q:],
    lambda t_q, t_k: ah.causal_mask(t_k)[t_k - t_q:],
    # the function behind nn.Transformer's static method, called directly, and reached through nn.Transformer
    # (whose own method also reaches the forbidden function, so both routes are named)
    lambda t_q, t_k: torch.nn.modules.transformer._generate_square_subsequent_mask(t_k)[t_k - t_q:] == 0,
    lambda t_q, t_k:
        torch.nn.Transformer(8, 2, 1, 1, 16, batch_first=True).generate_square_subsequent_mask(t_k)[t_k - t_q:] == 0,
], ids=["generate_square_subsequent_mask", "causal_upper_left", "ah.causal_mask(t_k)",
        "transformer._generate_square_subsequent_mask", "a Transformer's generate_square_subsequent_mask"])
def test_decoding_mask_rejects_a_square_ready_made_mask_cut_down(shortcut):
    assert torch.equal(shortcut(3, 7), reference_decoding_mask(3, 7))
    with pytest.raises(CheckFailed, match="asks you not to use"):
        check.decoding_mask_function(shortcut)


def notebook_function(source: str, name: str = "decoding_mask"):
    """``name`` defined by ``source`` run as a notebook cell: its own globals, with torch and ah."""
    namespace = {"torch": torch, "ah": ah}
    exec(source, namespace)  # noqa: S102 - the test's own code
    return namespace[name]


SLICE = "    return BIG[t_k - t_q:t_k, :t_k]\n"


@pytest.mark.parametrize("source", [
    "BIG = ah.causal_mask(64)\ndef decoding_mask(t_q, t_k):\n" + SLICE,                    # a global
    "BIG = torch.ones(64, 64, dtype=torch.bool).tril()\ndef decoding_mask(t_q, t_k):\n" + SLICE,  # made by hand
    "def make():\n    BIG = ah.causal_mask(64)\n"
    "    def decoding_mask(t_q, t_k):\n    " + SLICE + "    return decoding_mask\n"
    "decoding_mask = make()",                                                                   # a closure
    "def decoding_mask(t_q, t_k, BIG=ah.causal_mask(64)):\n" + SLICE,                         # a default argument
    "def decoding_mask(t_q, t_k, dtype=torch.bool, *, BIG=ah.causal_mask(64)):\n" + SLICE,    # a later one
    "import functools\ndef cut(big, t_q, t_k):\n    return big[t_k - t_q:t_k, :t_k]\n"
    "sliced = functools.partial(cut, ah.causal_mask(64))\n"
    "def decoding_mask(t_q, t_k):\n    return sliced(t_q, t_k)\n",                            # a partial helper
    "_masks = {}\ndef decoding_mask(t_q, t_k):\n    if (t_q, t_k) not in _masks:\n"
    "        _masks[t_q, t_k] = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)\n"
    "    return _masks[t_q, t_k]\ndecoding_mask(3, 7)\n",                                    # a cache by hand
    "MASKS = {(q, k): ah.causal_mask(q, k) for q in range(1, 20) for k in range(q, 20)}\n"
    "def decoding_mask(t_q, t_k):\n    return MASKS[t_q, t_k]\n",                            # a table of answers
    "BIG = ah.causal_mask(64)\ndecoding_mask = lambda t_q, t_k: [m[:, :t_k] for m in [BIG[t_k - t_q:t_k]]][0]\n",
    "import functools\ndef cut(big, t_q, t_k):\n    return big[t_k - t_q:t_k, :t_k]\n"
    "decoding_mask = functools.partial(cut, ah.causal_mask(64))\n",
    "BIG = ah.causal_mask(64)\ndef big():\n    return BIG\ndef decoding_mask(t_q, t_k):\n"
    "    return big()[t_k - t_q:t_k, :t_k]\n",                                                # through a helper
    "BIG = ah.causal_mask(64).numpy()\ndef decoding_mask(t_q, t_k):\n"
    "    return torch.from_numpy(BIG[t_k - t_q:t_k, :t_k])\n",                                # a NumPy copy
    "import types\nstore = types.SimpleNamespace(big=ah.causal_mask(64))\ndef decoding_mask(t_q, t_k):\n"
    "    return store.big[t_k - t_q:t_k, :t_k]\n",                                            # an object's attribute
    "PAIRS = [(q, k) for q in range(1, 20) for k in range(q, 20)]\n"
    "TABLE = {'m': [ah.causal_mask(q, k) for q, k in PAIRS]}\n"
    "def decoding_mask(t_q, t_k):\n    return TABLE['m'][PAIRS.index((t_q, t_k))]\n",         # nested deeper
])
def test_decoding_mask_rejects_a_mask_made_before_the_call(source):
    fn = notebook_function(source)
    assert torch.equal(fn(3, 7), reference_decoding_mask(3, 7))  # right values, made outside the function
    with pytest.raises(CheckFailed, match="holds tensors made before this call"):
        check.decoding_mask_function(fn)


def test_decoding_mask_runs_a_cached_function_again_rather_than_its_cache(capsys):
    cached = notebook_function("import functools\n@functools.cache\ndef decoding_mask(t_q, t_k):\n"
                               "    return ah.causal_mask(t_q, t_k)\n")
    for t_q, t_k in check.DECODE_SIZES:
        cached(t_q, t_k)  # warmed: the check's sizes would all be cache hits
    with pytest.raises(CheckFailed, match="asks you not to use"):
        check.decoding_mask_function(cached)
    helper = notebook_function("import functools\n@functools.cache\ndef big():\n    return ah.causal_mask(64)\n"
                               "big()\ndef decoding_mask(t_q, t_k):\n    return big()[t_k - t_q:t_k, :t_k]\n")
    with pytest.raises(CheckFailed, match="asks you not to use"):  # a cached helper is run again too
        check.decoding_mask_function(helper)
    by_hand = notebook_function("import functools\n@functools.lru_cache\ndef decoding_mask(t_q, t_k):\n"
                                "    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)\n")
    check.decoding_mask_function(by_hand)
    assert capsys.readouterr().out == "✓ decoding_mask: correct\n"


def test_decoding_mask_accepts_helpers_and_names_that_only_look_like_tensors(capsys):
    # a global tensor called `ones` beside torch.ones, and a helper function: both fine
    fn = notebook_function("import functools\nones = torch.ones(3)\nOFFSET = 0\n"
                           "bools = functools.partial(torch.ones, dtype=torch.bool)  # a library function's partial\n"
                           "def tri(t_q, t_k):\n"
                           "    return bools(t_q, t_k).tril(diagonal=t_k - t_q + OFFSET)\n"
                           "def decoding_mask(t_q, t_k):\n    return tri(t_q, t_k)\n")
    check.decoding_mask_function(fn)
    assert capsys.readouterr().out == "✓ decoding_mask: correct\n"


def test_decoding_mask_shortcut_hint_gives_no_code_of_the_answer():
    """The hint after a forbidden helper asks the question that leads to the mask; it shows none of its code."""
    with pytest.raises(CheckFailed, match="which keys may the first new query") as failure:
        check.decoding_mask_function(lambda t_q, t_k: ah.causal_mask(t_q, t_k))
    assert "torch.ones" not in str(failure.value) and "tril" not in str(failure.value)


def test_decoding_mask_shortcut_hint_names_what_was_called():
    with pytest.raises(CheckFailed, match="causal_mask"):
        check.decoding_mask_function(lambda t_q, t_k: ah.causal_mask(t_q, t_k))
    with pytest.raises(CheckFailed, match="causal_lower_right"):
        check.decoding_mask_function(
            lambda t_q, t_k: torch.nn.attention.bias.causal_lower_right(t_q, t_k)._materialize())
    with pytest.raises(CheckFailed, match=r"decoding_mask\(3, 7\) calls _generate_square_subsequent_mask, which"):
        check.decoding_mask_function(
            lambda t_q, t_k: torch.nn.modules.transformer._generate_square_subsequent_mask(t_k)[t_k - t_q:] == 0)
