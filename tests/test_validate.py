"""attn_helpers.validate and the bad input that used to reach torch or pass silently (issue 14)."""

import math

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch
from messages import (
    DOES_NOT_DIVIDE,
    INTEGER_AT_LEAST,
    INTEGER_BETWEEN,
    MUST_BE_EVEN,
    ONE_VALUE_PER_KEY,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    TOKEN_IDS,
    TOKEN_RANGE,
    TRUE_OR_FALSE,
    raises_saying,
)

import attn_helpers as ah
from attn_helpers import validate
from attn_helpers.attention import loop_attention


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), torch.tensor(3)])
def test_integer_takes_python_numpy_and_0d_tensor_integers(value):
    assert validate.integer(value, "n", minimum=1) == 3 and type(validate.integer(value, "n", minimum=1)) is int


@pytest.mark.parametrize("value, error, said", [
    (0, ValueError, "got 0."),
    (True, TypeError, "got True (a bool, not a number)."),
    (np.bool_(True), TypeError, "(a bool, not a number)"),
    (2.0, TypeError, "got 2.0 (a float); pass n=2."),
    (2.5, TypeError, "got 2.5."),
    ("50", TypeError, "got n='50' (a string); pass n=50."),
    (torch.tensor(2.0), TypeError, "got tensor(2.)"),
    (None, TypeError, "got None."),
])
def test_integer_rejects_a_wrong_kind_with_a_type_error_and_a_wrong_value_with_a_value_error(value, error, said):
    with raises_saying(error, "n " + POSITIVE_INTEGER, said):
        validate.integer(value, "n", minimum=1)


def test_integer_minimum_and_none():
    assert validate.integer(None, "threads", minimum=1, none_ok=True) is None
    assert validate.integer(0, "length", minimum=0) == 0
    with raises_saying(ValueError, "length " + INTEGER_AT_LEAST + " 2, got 1"):
        validate.integer(1, "length", minimum=2)


def test_masks_take_numpy_integers():
    assert torch.equal(ah.padding_mask([np.int64(1), np.int64(2)]), ah.padding_mask([1, 2]))
    assert torch.equal(ah.padding_mask(np.array([1, 2]), max_len=np.int64(3)), ah.padding_mask([1, 2], 3))
    assert torch.equal(ah.causal_mask(np.int64(3), np.int32(4)), ah.causal_mask(3, 4))
    with raises_saying(TypeError, "lengths must be whole numbers", "float64", "lengths.long()"):
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
    with raises_saying(TypeError, "scale " + POSITIVE_NUMBER, "got True (a bool, not a number)"):
        ah.attention(q, k, v, scale=True)
    with raises_saying(TypeError, "scale " + POSITIVE_NUMBER, "(a string)", "leave it out for 1/sqrt(d_k)"):
        ah.attention(q, k, v, scale="0.1")
    dk = torch.tensor(50)
    out, w = ah.attention(q, k, v, scale=dk ** -0.5)  # as seed 004 writes it
    ref_out, ref_w = ah.attention(q, k, v)
    assert torch.allclose(w, ref_w) and torch.allclose(out, ref_out)
    assert torch.allclose(ah.attention(q, k, v, scale=np.float32(0.5))[1], ah.attention(q, k, v, scale=0.5)[1])
    for bad in (-1, 0.0, math.inf, math.nan):  # a number, but not a scale: the same rule as validate.real's
        with raises_saying(ValueError, "scale " + POSITIVE_NUMBER, f"got {bad!r}"):
            ah.attention(q, k, v, scale=bad)
    with raises_saying(TypeError, "scale " + POSITIVE_NUMBER):
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
    with raises_saying(ValueError, "layer " + INTEGER_BETWEEN + " 1 and 2 (it reads the layer before it), got 3"):
        validate.integer(3, "layer", minimum=1, maximum=2, why="it reads the layer before it")
    with raises_saying(TypeError, "offset must be an integer, got True (a bool, not a number)"):
        validate.integer(True, "offset")


@pytest.mark.parametrize("value, error, said", [
    (0, ValueError, "got 0."),
    (math.inf, ValueError, "got inf."),
    (True, TypeError, "got True (a bool, not a number)."),
    ("2", TypeError, "got T='2' (a string); pass T=2."),
    (torch.tensor([1.0, 2.0]), TypeError, "got tensor([1., 2.])."),
    (None, TypeError, "got None."),
])
def test_real_rejects_a_wrong_kind_with_a_type_error_and_a_wrong_value_with_a_value_error(value, error, said):
    with raises_saying(error, "T " + POSITIVE_NUMBER, said):
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


def test_head_width_is_d_model_over_num_heads_when_it_divides():
    assert validate.head_width(12, 3) == 4 and validate.head_width(16, 4, 2) == 4 and validate.head_width(16, 4, 4) == 4
    with raises_saying(ValueError, "num_heads=5 " + DOES_NOT_DIVIDE + " d_model=12", "d_k = d_model / num_heads",
                       "divisors of 12, e.g. [1, 2, 3, 4, 6, 12]."):
        validate.head_width(12, 5)
    with raises_saying(ValueError, "num_kv_heads=3 " + DOES_NOT_DIVIDE + " num_heads=4",
                       "every key/value head serves the same number of query heads", "e.g. [1, 2, 4]."):
        validate.head_width(16, 4, 3)


def test_query_groups_is_the_divisibility_rule_of_grouped_query_attention_wherever_it_is_checked():
    assert validate.query_groups(8, 2) == 4 and validate.query_groups(8, 8) == 1
    with pytest.raises(ValueError) as by_rule:
        validate.query_groups(4, 3)
    q, kv = torch.randn(1, 4, 2, 8), torch.randn(1, 3, 2, 8)
    for call in (lambda: ah.inference.grouped_query_attention(q, kv, kv),
                 lambda: ah.inference.GroupedQueryAttention(16, 4, 3, rope=False),
                 lambda: validate.head_width(16, 4, 3)):
        with pytest.raises(ValueError) as by_caller:
            call()
        assert str(by_caller.value) == str(by_rule.value)


def test_torch_compat_refuses_a_split_with_the_divisibility_rule():
    mha = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    mha.num_heads = 5  # torch's constructor asserts the split; a module changed after it is checked here
    with raises_saying(ValueError, "num_heads=5 " + DOES_NOT_DIVIDE + " d_model=12"):
        ah.torch_compat.from_torch_mha(mha)


@pytest.mark.parametrize("make", [
    lambda: ah.MultiHeadAttention(12, 5),
    lambda: ah.latent.LatentAttention(12, 5, 4, 2),
    lambda: ah.extrapolation.PositionModel("none", 10, d_model=12, num_heads=5),
    lambda: ah.inference.GroupedQueryAttention(12, 5),
])
def test_every_module_with_heads_refuses_a_split_the_same_way(make):
    with raises_saying(ValueError, "num_heads=5 " + DOES_NOT_DIVIDE + " d_model=12", "e.g. [1, 2, 3, 4, 6, 12]."):
        make()


def test_sizes_list_takes_numpy_integers_and_explains_the_rest():
    assert validate.sizes_list(np.array([16, 32])) == [16, 32]
    assert validate.sizes_list([np.int64(8), 16]) == [8, 16]
    for bad, error in (([], ValueError), ([0, 1], ValueError), ([16, True], TypeError), ([16.0, 32], TypeError),
                       ("16", TypeError), (None, TypeError)):
        with raises_saying(error, "sizes must be a non-empty list of positive ints"):
            validate.sizes_list(bad)
    with raises_saying(TypeError, "True (a bool, not a number) is not one"):
        validate.sizes_list([16, True])
    with raises_saying(ValueError, "increasing without repeats"):
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
    with raises_saying(TypeError, "True (a bool, not a number)"):
        call(True)


def test_chapter_11_checks_accept_good_input_and_name_the_fix():
    assert ah.long_context.yarn_attention_factor(np.int64(1)) == 1.0 and validate.even_int(8, "d") == 8
    x = torch.zeros(3, 4)
    assert torch.equal(ah.long_context.rope_with_frequencies(x, torch.ones(2), [0, 1, 2]), x)
    assert validate.token_ids(torch.tensor([[0, 4]]), 5) == (1, 2)
    with raises_saying(ValueError, "d " + MUST_BE_EVEN + ", got 5", "e.g. 6"):
        validate.even_int(5, "d")
    for bad, error in ((0.5, ValueError), (float("nan"), ValueError), (True, TypeError), ("2", TypeError)):
        with raises_saying(error, "s must be a number of at least 1 (the new length over the trained one"):
            ah.long_context.yarn_attention_factor(bad)
    with raises_saying(ValueError, TOKEN_RANGE + " 0 … 4"):
        validate.token_ids(torch.tensor([[-1, 2]]), 5)
    with raises_saying(TypeError, "tokens must be a (b, t) " + TOKEN_IDS, "torch.float32", "tokens.long()"):
        validate.token_ids(torch.tensor([[0.0, 2.0]]), 5)


@pytest.mark.parametrize("model", [
    lambda: ah.inference.TinyDecoder(vocab=5, d_model=8, num_heads=2),
    lambda: ah.circuits.AttentionOnly(5, 8, 8, 1),
    lambda: ah.extrapolation.PositionModel("none", 5, d_model=8, num_heads=2),
])
def test_every_model_refuses_token_ids_the_same_way(model):
    m = model()
    with raises_saying(ValueError, TOKEN_RANGE + " 0 … 4 (the model's vocab_size is 5), got ids 0 … 5."):
        m(torch.tensor([[0, 5]]))
    with raises_saying(ValueError, "tokens must be a non-empty (b, t) " + TOKEN_IDS, "tokens[None]"):
        m(torch.tensor([0, 1]))
    with raises_saying(TypeError, "tokens must be a (b, t) " + TOKEN_IDS, "got torch.float32"):
        m(torch.tensor([[0.0, 1.0]]))


@pytest.mark.parametrize("value, kind", [
    ("no", "str"), (0, "int"), (1, "int"), (None, "NoneType"), (torch.tensor(True), "torch.Tensor"),
    (np.int64(1), "numpy.int64"), (np.array([True, False]), "numpy.ndarray"),
])
def test_flag_needs_a_bool_and_names_the_type_it_got(value, kind):
    with raises_saying(TypeError, "absorb " + TRUE_OR_FALSE, f"({kind}): pass a bool, e.g. absorb=False."):
        validate.flag(value, "absorb")


def test_flag_passes_a_bool_and_a_numpy_bool_as_a_python_bool():
    """A NumPy bool (``array.max() > 0``) is one truth value, as a bool is; it comes back as Python's own."""
    assert validate.flag(False, "absorb") is False and validate.flag(True, "absorb") is True
    assert validate.flag(np.bool_(True), "absorb") is True and validate.flag(np.array([1, 2]).max() > 5, "x") is False
    assert validate.flag(np.array(True), "absorb") is True  # a 0-d array of NumPy's bool


def test_key_value_tokens_is_one_rule_wherever_keys_meet_values():
    """The same rule, and the same words, in every function that takes keys and values."""
    q, k, v = torch.randn(2, 4), torch.randn(5, 4), torch.randn(3, 4)
    assert validate.key_value_tokens(k, k) == 5
    for call in (lambda: ah.attention(q, k, v), lambda: loop_attention(q, k, v),
                 lambda: ah.MultiHeadAttention(4, 2)(q, k, v), lambda: ah.merge.partial_attention(q, k, v)):
        with raises_saying(ValueError, "describe 5 tokens but", "describe 3", ONE_VALUE_PER_KEY):
            call()


@pytest.mark.parametrize("wrong_kind, wrong_value, words", [
    (lambda: ah.cost.plot_flops([1, 2], d=8), lambda: ah.cost.plot_flops(pd.DataFrame({"x": [1]}), d=8),
     "plot_flops needs the DataFrame of measure_flops"),
    (lambda: ah.cost.plot_loglog([1, 2], "y", "t"), lambda: ah.cost.plot_loglog(pd.DataFrame(), "y", "t"),
     "plot_loglog needs a"),
    (lambda: ah.layout.plot_memory_layout([torch.zeros(2)]), lambda: ah.layout.plot_memory_layout({}),
     "plot_memory_layout takes a"),
    (lambda: ah.layout.plot_memory_layout({"x": [1.0, 2.0]}),
     lambda: ah.layout.plot_memory_layout({"x": torch.tensor(1.0)}), "'x' must be a tensor"),
    (lambda: ah.merge.merge_partials([[1, 2, 3]]), lambda: ah.merge.merge_partials([]),
     "merge_partials takes a"),
    (lambda: ah.plotting.plot_heads([[0.5, 0.5]], ["a", "b"]), lambda: ah.plotting.plot_heads(torch.ones(2, 2), ["a"]),
     "plot_heads takes weights"),
    (lambda: ah.training.token_labels([2, 0]), lambda: ah.training.token_labels(torch.zeros(2, 3, dtype=torch.long)),
     "token_labels takes one sequence of ids"),
    (lambda: ah.tables.table(pd.DataFrame({"x": [1]}).rename_axis(0)),
     lambda: ah.tables.table(pd.DataFrame({"x": [1]})), "the index column"),
    (lambda: ah.inference.grouped_query_attention(*(torch.ones(1, 2, 3, 4),) * 3, mask=[[True]]),
     lambda: ah.inference.grouped_query_attention(*(torch.ones(1, 2, 3, 4),) * 3, mask=torch.ones(1, 1, 3, 3)),
     "mask must be a"),
    (lambda: ah.explorers.Explorer(alt.Chart(), 3, "move it"), lambda: ah.explorers.Explorer(alt.Chart(), " ", "move"),
     "description must"),
])
def test_the_modules_raise_a_type_error_for_the_wrong_kind_and_a_value_error_for_a_wrong_value(
        wrong_kind, wrong_value, words):
    """The exception policy of attn_helpers.validate, followed where a module checks an input of its own."""
    with raises_saying(TypeError, words):
        wrong_kind()
    with raises_saying(ValueError, words):
        wrong_value()


def test_glove_nearest_takes_a_word_or_a_vector(glove):
    with raises_saying(TypeError, "query must be a word or a vector of shape (50,), got list"):
        glove.nearest([0.0] * 50)
    with raises_saying(ValueError, "query must be a word or a vector of shape (50,)"):
        glove.nearest(torch.zeros(3))


@pytest.mark.parametrize("value, number", [
    (3, 3), (np.int64(-2), -2), (torch.tensor(4), 4), (2.0, None), (True, None), ("3", None), (None, None),
])
def test_whole_number_is_the_test_behind_integer(value, number):
    assert validate.whole_number(value) == number


def test_module_input_and_module_mask_check_what_a_module_is_given():
    validate.module_input(torch.ones(2, 4), "x", 4, torch.float32)
    validate.module_mask(None, (2, 2))
    validate.module_mask(torch.ones(2, 2, dtype=torch.bool), (3, 2, 2))
    with raises_saying(ValueError, "x has 3 features", "d_model=4"):
        validate.module_input(torch.ones(2, 3), "x", 4, torch.float32)
    with raises_saying(TypeError, "x has dtype torch.float64 but the module's weights are torch.float32"):
        validate.module_input(torch.ones(2, 4).double(), "x", 4, torch.float32)
    with raises_saying(TypeError, "mask must be a torch.Tensor, got list"):
        validate.module_mask([[True]], (2, 2))
    with raises_saying(ValueError, "does not broadcast to the attention weights' shape (2, 2)"):
        validate.module_mask(torch.ones(3, 3, dtype=torch.bool), (2, 2))


def test_probabilities_are_exact_fractions_that_sum_to_one():
    from fractions import Fraction

    assert validate.probabilities([Fraction(1, 4), 0.75], "p") == [Fraction(1, 4), Fraction(3, 4)]
    with raises_saying(TypeError, "p must be a list of probabilities, one per token, got 'ab' (str)"):
        validate.probabilities("ab", "p")
    with raises_saying(ValueError, "p must sum to exactly 1, got 0.75"):
        validate.probabilities([0.5, 0.25], "p")


def test_the_attention_rules_return_what_their_callers_use():
    q, k, v = torch.ones(2, 4), torch.ones(3, 4), torch.ones(3, 5)
    assert validate.as_float_tensor(q, "q") is q
    assert validate.one_sequence_args(q, k, v, None, "f") == validate.attention_args(q, k, v, None, None) == 0.5
    scale, mask = validate.tiled_attention_args(q, k, v, torch.ones(2, 3, dtype=torch.bool), False, 2, 2, 2.0)
    assert scale == 2.0 and mask.shape == (2, 3)
    validate.head_inputs(ah.SelfAttentionHead(4, 2), torch.ones(3, 4), torch.ones(3, 3, dtype=torch.bool))
    with raises_saying(ValueError, "f takes one sequence: q must be 2-D"):
        validate.one_sequence_args(q[None], k, v, None, "f")
    with raises_saying(TypeError, "the tiled passes take a bool mask"):
        validate.tiled_attention_args(q, k, v, torch.zeros(2, 3), False, 2, 2, None)
    with raises_saying(ValueError, "x has 5 features"):
        validate.head_inputs(ah.SelfAttentionHead(4, 2), torch.ones(3, 5), None)
