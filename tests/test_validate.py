"""attn_helpers.validate and the bad input that used to reach torch or pass silently (issue 14)."""

import math

import numpy as np
import pytest
import torch

import attn_helpers as ah
from attn_helpers import validate


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), torch.tensor(3)])
def test_integer_takes_python_numpy_and_0d_tensor_integers(value):
    assert validate.integer(value, "n", minimum=1) == 3 and type(validate.integer(value, "n", minimum=1)) is int


@pytest.mark.parametrize("value, message", [
    (0, r"n must be a positive integer, got 0\."),
    (True, r"got True \(a bool, not a number\)"),
    (np.bool_(True), r"a bool"),
    (2.0, r"got 2\.0 \(a float\); pass n=2"),
    (2.5, r"got 2\.5\."),
    ("50", r"got n='50' \(a string\); pass n=50"),
    (torch.tensor(2.0), "positive integer"),
    (None, "positive integer, got None"),
])
def test_integer_rejects_with_what_was_passed(value, message):
    with pytest.raises(ValueError, match=message):
        validate.integer(value, "n", minimum=1)


def test_integer_minimum_and_none():
    assert validate.integer(None, "threads", minimum=1, none_ok=True) is None
    assert validate.integer(0, "length", minimum=0) == 0
    with pytest.raises(ValueError, match="length must be an integer of at least 2, got 1"):
        validate.integer(1, "length", minimum=2)


def test_masks_take_numpy_integers():
    assert torch.equal(ah.padding_mask([np.int64(1), np.int64(2)]), ah.padding_mask([1, 2]))
    assert torch.equal(ah.padding_mask(np.array([1, 2]), max_len=np.int64(3)), ah.padding_mask([1, 2], 3))
    assert torch.equal(ah.causal_mask(np.int64(3), np.int32(4)), ah.causal_mask(3, 4))
    with pytest.raises(ValueError, match="1-D integer tensor"):
        ah.padding_mask(np.array([1.0, 2.0]))


def test_attention_rejects_mixed_dtypes_naming_them_and_the_fix():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"queries torch.float32, keys torch.float64.*keys.to\(queries.dtype\)"):
        ah.attention(q, q.double(), q)
    with pytest.raises(TypeError, match=r"values torch.float16.*values.to\(queries.dtype\)"):
        ah.attention(q, q, q.half())


def test_modules_reject_input_of_another_dtype_than_their_weights():
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError,
                       match=r"query has dtype torch.float32 but the module's weights are torch.float64.*"
                             r"query.double\(\)"):
        ah.MultiHeadAttention(8, 2).double()(x)
    with pytest.raises(TypeError,
                       match=r"x has dtype torch.float64 but the module's weights are torch.float32.*x.float\(\)"):
        ah.SelfAttentionHead(8, 4)(x.double())
    out, _ = ah.MultiHeadAttention(8, 2).double()(x.double())  # matching dtypes work
    assert out.dtype == torch.float64


def test_scale_rejects_bools_and_takes_0d_tensors():
    q, k, v = torch.randn(3, 50), torch.randn(4, 50), torch.randn(4, 2)
    with pytest.raises(TypeError, match=r"scale must be a positive finite number, got True \(a bool\)"):
        ah.attention(q, k, v, scale=True)
    with pytest.raises(TypeError, match="scale must be a positive finite number"):
        ah.attention(q, k, v, scale="0.1")
    dk = torch.tensor(50)
    out, w = ah.attention(q, k, v, scale=dk ** -0.5)  # as seed 004 writes it
    ref_out, ref_w = ah.attention(q, k, v)
    assert torch.allclose(w, ref_w) and torch.allclose(out, ref_out)
    assert torch.allclose(ah.attention(q, k, v, scale=np.float32(0.5))[1], ah.attention(q, k, v, scale=0.5)[1])
    with pytest.raises(ValueError, match="scale must be a positive finite number, got -1"):
        ah.attention(q, k, v, scale=-1)
    with pytest.raises(TypeError, match="scale must be a positive finite number"):
        ah.attention(q, k, v, scale=torch.ones(2))


def test_attention_autograd_and_no_grad_agree():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
    keep = torch.rand(5, 5, generator=gen) > 0.3
    keep[1] = False  # a fully masked query
    with torch.no_grad():
        out0, w0 = ah.attention(q, k, v, mask=keep)  # the in-place path
    qg = q.clone().requires_grad_()
    out1, w1 = ah.attention(qg, k, v, mask=keep)  # the path autograd records
    assert torch.equal(out0, out1.detach()) and torch.equal(w0, w1.detach())
    out1.sum().backward()
    assert torch.isfinite(qg.grad).all() and torch.equal(w0[:, 1], torch.zeros(2, 5))
    assert torch.autograd.gradcheck(lambda x: ah.attention(x, k.double(), v.double())[0], q.double().requires_grad_())


def test_softmax_does_not_modify_its_input():
    x = torch.randn(3, 4)
    before = x.clone()
    ah.softmax(x)
    with torch.no_grad():
        ah.softmax(x)
    assert torch.equal(x, before)


def test_a_mask_may_not_add_batch_dimensions_the_inputs_do_not_have():
    """A (3, t, t) mask with one (t, d) sequence used to turn the result into a batch of 3, silently."""
    q = torch.randn(4, 3)  # one sequence, (t, d)
    keep = torch.rand(3, 4, 4) > 0.2
    fix = r"batch of shape \(3, 4, 4\).*may not add batch dimensions.*pass a \(t_q, t_k\) = \(4, 4\) mask"
    with pytest.raises(ValueError, match=fix):
        ah.attention(q, q, q, mask=keep)
    with pytest.raises(ValueError, match="may not add batch dimensions"):
        ah.merge.partial_attention(q, q, q, mask=keep)
    with pytest.raises(ValueError, match="may not add batch dimensions"):  # nor enlarge a batch of 1
        ah.attention(q[None], q[None], q[None], mask=keep)
    out, w = ah.attention(q.expand(3, 4, 3), q, q, mask=keep)  # with a batch of 3 queries it is one mask each
    assert w.shape == (3, 4, 4) and torch.equal(w[keep.logical_not()], torch.zeros(int((~keep).sum())))
    with pytest.raises(ValueError, match="may not add batch dimensions"):  # not even one of size 1
        ah.attention(q, q, q, mask=keep[:1])
    assert ah.attention(q, q, q, mask=keep[0])[1].shape == (4, 4)


def test_float64_masks():
    q = torch.randn(4, 3)
    additive = torch.zeros(4, 4, dtype=torch.float64)
    assert torch.allclose(ah.attention(q, q, q, mask=additive)[1], ah.attention(q, q, q)[1])


def test_integer_bounds_and_reasons_in_the_message():
    assert validate.integer(-3, "offset") == -3 and validate.integer(np.int64(2), "layer", minimum=1, maximum=2) == 2
    with pytest.raises(ValueError,
                       match=r"layer must be an integer between 1 and 2 \(it reads the layer before it\), got 3"):
        validate.integer(3, "layer", minimum=1, maximum=2, why="it reads the layer before it")
    with pytest.raises(ValueError, match=r"offset must be an integer, got True \(a bool, not a number\)"):
        validate.integer(True, "offset")


@pytest.mark.parametrize("value, message", [
    (0, r"must be a positive finite number, got 0\."),
    (True, r"got True \(a bool, not a number\)"),
    ("2", r"got T='2' \(a string\)"),
    (math.inf, "finite"),
    (torch.tensor([1.0, 2.0]), "positive finite number"),
])
def test_real_rejects_with_what_was_passed(value, message):
    with pytest.raises(ValueError, match=message):
        validate.real(value, "T", above=0)


def test_real_takes_numpy_numbers_and_one_number_tensors_and_a_lower_bound():
    assert validate.real(np.float32(0.5), "T", above=0) == 0.5 and validate.real(torch.tensor(2), "T", above=0) == 2.0
    assert validate.real(torch.tensor([0.25]), "T") == 0.25 and type(validate.real(3, "T")) is float
    with pytest.raises(ValueError, match=r"base must be a finite number larger than 1 \(the papers use 10000\), got 1"):
        ah.position.frequencies(4, base=1)


@pytest.mark.parametrize("bounds, good, bad, words", [
    ({"above": 0}, 1e-9, 0, "a positive finite number"),
    ({"above": 2.5}, 2.6, 2.5, "a finite number larger than 2.5"),
    ({"at_least": 1}, 1, 0.99, "a number of at least 1"),
    ({"above": 0, "at_most": 1}, 1, 1.01, r"a number in \(0, 1\]"),
    ({"at_least": 0, "at_most": 1}, 0, -0.01, r"a number in \[0, 1\]"),
    ({}, -1e300, math.nan, "a finite number"),
])
def test_real_words_its_bounds_and_keeps_the_numbers_within(bounds, good, bad, words):
    assert validate.real(good, "x", **bounds) == good
    with pytest.raises(ValueError, match=rf"^x must be {words} \(why\), got {bad!r}\.$"):
        validate.real(bad, "x", **bounds, why="why")


@pytest.mark.parametrize("value", [
    True, np.bool_(False), torch.tensor(True), "1", None, math.inf, torch.ones(2), [1.0],
])
def test_real_number_is_none_for_what_is_not_a_finite_real_number(value):
    assert validate.real_number(value) is None


def test_head_width_is_d_model_over_num_heads_when_it_divides():
    assert validate.head_width(12, 3) == 4 and validate.head_width(16, 4, 2) == 4 and validate.head_width(16, 4, 4) == 4
    with pytest.raises(ValueError, match=r"^num_heads=5 does not divide d_model=12: each head gets d_k = d_model / "
                                         r"num_heads features.*divisors of 12, e\.g\. \[1, 2, 3, 4, 6, 12\]\.$"):
        validate.head_width(12, 5)
    with pytest.raises(ValueError, match=r"^num_kv_heads=3 does not divide num_heads=4: every key/value head serves "
                                         r"the same number of query heads.*e\.g\. \[1, 2, 4\]\.$"):
        validate.head_width(16, 4, 3)


@pytest.mark.parametrize("make", [
    lambda: ah.MultiHeadAttention(12, 5),
    lambda: ah.latent.LatentAttention(12, 5, 4, 2),
    lambda: ah.extrapolation.PositionModel("none", 10, d_model=12, num_heads=5),
    lambda: ah.inference.GroupedQueryAttention(12, 5),
])
def test_every_module_with_heads_refuses_a_split_the_same_way(make):
    with pytest.raises(ValueError, match=r"^num_heads=5 does not divide d_model=12: .*e\.g\. \[1, 2, 3, 4, 6, 12\]\.$"):
        make()


def test_sizes_list_takes_numpy_integers_and_explains_the_rest():
    assert validate.sizes_list(np.array([16, 32])) == [16, 32]
    assert validate.sizes_list([np.int64(8), 16]) == [8, 16]
    for bad in ([], [16, True], [16.0, 32], "16", [0, 1], None):
        with pytest.raises(ValueError, match="sizes must be a non-empty list of positive ints"):
            validate.sizes_list(bad)
    with pytest.raises(ValueError, match="increasing without repeats"):
        validate.sizes_list([32, 16])


@pytest.mark.parametrize("call", [
    lambda n: ah.position.sinusoidal_encoding(n, 4),
    lambda n: ah.position.frequencies(n),
    lambda n: ah.depth.stack_attention(torch.randn(3, 2), n),
    lambda n: ah.heads_task.two_back_batch(2, seq_len=n),
    lambda n: ah.tasks.recall_batch(n),
    lambda n: ah.training.copy_task_batch(n),
    lambda n: ah.circuits.induction_batch(n),
    lambda n: ah.null_attention.retrieval_task(n),
    lambda n: ah.cost.measure_flops([n], d=8, num_heads=2),
    lambda n: ah.blocks.TransformerBlock(4, 2, d_ff=n),
])
def test_every_module_takes_numpy_integers_and_refuses_bools_the_same_way(call):
    """One integer check for the whole package: NumPy's integers pass everywhere, a bool fails everywhere."""
    call(np.int64(4))
    with pytest.raises(ValueError, match=r"True \(a bool, not a number\)"):
        call(True)


def test_chapter_11_checks_accept_good_input_and_name_the_fix():
    assert ah.long_context.yarn_attention_factor(np.int64(1)) == 1.0 and validate.even_int(8, "d") == 8
    assert validate.rope_inputs(torch.zeros(3, 4), [0, 1, 2], torch.ones(2)) == (3, 4)
    assert validate.token_ids(torch.tensor([[0, 4]]), 5) == (1, 2)
    with pytest.raises(ValueError, match="must be even, got 5.*e.g. 6"):
        validate.even_int(5, "d")
    for bad in (0.5, True, float("nan"), "2"):
        with pytest.raises(ValueError, match=r"s must be a number of at least 1 \(the new length over the trained one"):
            ah.long_context.yarn_attention_factor(bad)
    with pytest.raises(ValueError, match="token ids must lie in 0 … 4"):
        validate.token_ids(torch.tensor([[-1, 2]]), 5)
    with pytest.raises(ValueError, match="torch.long"):
        validate.token_ids(torch.tensor([[0.0, 2.0]]), 5)


@pytest.mark.parametrize("model", [
    lambda: ah.inference.TinyDecoder(vocab=5, d_model=8, num_heads=2),
    lambda: ah.circuits.AttentionOnly(5, 8, 8, 1),
    lambda: ah.extrapolation.PositionModel("none", 5, d_model=8, num_heads=2),
])
def test_every_model_refuses_token_ids_the_same_way(model):
    m = model()
    with pytest.raises(ValueError,
                       match=r"^token ids must lie in 0 … 4 \(the model's vocab_size is 5\), got ids 0 … 5\.$"):
        m(torch.tensor([[0, 5]]))
    with pytest.raises(ValueError, match=r"^tokens must be a non-empty \(b, t\) tensor of integer ids \(torch.long\)"):
        m(torch.tensor([0, 1]))


@pytest.mark.parametrize("value", ["no", 0, 1, None, torch.tensor(True)])
def test_flag_needs_a_bool(value):
    with pytest.raises(TypeError, match="must be True or False"):
        validate.flag(value, "absorb")


def test_flag_passes_a_bool():
    assert validate.flag(False, "absorb") is False and validate.flag(True, "absorb") is True
