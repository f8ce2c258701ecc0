"""Tests for chapter 11's train-short-test-long model."""

import pytest
import torch
from messages import MUST_BE_EVEN, POSITIVE_INTEGER, TOKEN_IDS, TOKEN_RANGE, raises_saying

from attn_helpers import extrapolation, long_context, position, sliding_window


@pytest.mark.parametrize("scheme", extrapolation.SCHEMES)
def test_every_scheme_runs_and_is_causal(scheme):
    torch.manual_seed(0)
    model = extrapolation.PositionModel(scheme, vocab_size=20, max_len=8)
    tokens = torch.randint(20, (2, 8))
    logits, weights = model(tokens)
    assert logits.shape == (2, 8, 20) and [w.shape for w in weights] == [(2, 4, 8, 8)] * 2
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20
    assert torch.allclose(model(changed)[0][:, :-1], logits[:, :-1], atol=1e-6)  # the last token changes no earlier one


def test_learned_positions_stop_at_their_table_and_the_others_run_longer():
    models = {s: extrapolation.PositionModel(s, vocab_size=40, max_len=8) for s in extrapolation.SCHEMES}
    with pytest.raises(ValueError, match="cannot read 16 tokens"):
        models["learned"](torch.zeros(1, 16, dtype=torch.long))
    for scheme in ("sinusoidal", "rope", "alibi", "none"):
        assert models[scheme](torch.zeros(1, 16, dtype=torch.long))[0].shape == (1, 16, 40)


def test_rope_model_with_its_own_frequencies_is_unchanged_and_a_window_narrows_it():
    torch.manual_seed(0)
    model = extrapolation.PositionModel("rope", vocab_size=20)
    tokens = torch.randint(20, (1, 12))
    base = model(tokens)[0]
    assert torch.allclose(model(tokens, theta=position.frequencies(8))[0], base, atol=1e-6)
    assert not torch.allclose(model(tokens, theta=long_context.interpolation(position.frequencies(8), 2))[0], base)
    assert not torch.allclose(model(tokens, factor=1.2)[0], base)
    _, weights = model(tokens, allowed=sliding_window.window_mask(12, window=3))
    assert (weights[0][..., 5, :3] == 0).all()


@pytest.mark.parametrize("window, sinks", [(3, 0), (3, 2), (5, 1), (20, 0)])
def test_decoding_through_a_ring_with_text_positions_is_the_masked_forward(window, sinks):
    torch.manual_seed(0)
    model = extrapolation.PositionModel("rope", vocab_size=20)
    tokens = torch.randint(20, (3, 14))
    one_pass = model(tokens, allowed=sliding_window.window_mask(14, window=window, sinks=sinks))[0]
    assert torch.allclose(extrapolation.decode(model, tokens, window, sinks), one_pass, atol=1e-5)


def test_cache_positions_change_only_what_the_sinks_see_once_the_window_moves():
    torch.manual_seed(0)
    model = extrapolation.PositionModel("rope", vocab_size=20)
    tokens = torch.randint(20, (3, 14))
    text = extrapolation.decode(model, tokens, window=4, sinks=2)
    cache = extrapolation.decode(model, tokens, window=4, sinks=2, numbering="cache")
    assert torch.allclose(cache[:, :6], text[:, :6], atol=1e-6)  # tokens 0-5: every one in the cache, in order
    assert not torch.allclose(cache[:, 6:], text[:, 6:], atol=1e-3)  # then the sinks sit at offsets 5 and 4
    no_sinks = [extrapolation.decode(model, tokens, window=4, numbering=how) for how in ("text", "cache")]
    assert torch.allclose(*no_sinks, atol=1e-5)  # a pure window: offsets are the same either way
    plain = extrapolation.PositionModel("none", vocab_size=20)
    assert torch.allclose(extrapolation.decode(plain, tokens, 4, 2, "cache"),
                          plain(tokens, allowed=sliding_window.window_mask(14, window=4, sinks=2))[0], atol=1e-5)


def test_accuracy_through_a_ring():
    torch.manual_seed(0)
    model = extrapolation.PositionModel("rope", vocab_size=20)
    ring = extrapolation.accuracy(model, 12, n=10, ring={"window": 4, "sinks": 1})
    assert ring == extrapolation.accuracy(model, 12, n=10, allowed=sliding_window.window_mask(12, window=4, sinks=1))


def test_training_is_seeded_and_learns():
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = extrapolation.PositionModel("learned", vocab_size=24, max_len=12)
        runs.append(extrapolation.train(model, seq_len=12, steps=30, batch_size=16))
    assert runs[0] == runs[1] and runs[0][-1] < runs[0][0]
    assert 0 <= extrapolation.accuracy(model, 12, n=20) <= 1


def test_bad_input_says_what_to_do():
    with pytest.raises(ValueError, match="scheme must be one of"):
        extrapolation.PositionModel("t5", vocab_size=10)
    with raises_saying(ValueError, MUST_BE_EVEN):
        extrapolation.PositionModel("rope", vocab_size=10, d_model=12, num_heads=4)
    with raises_saying(ValueError, TOKEN_RANGE + " 0 … 9"):
        extrapolation.PositionModel("none", vocab_size=10)(torch.tensor([[3, 10]]))
    with raises_saying(ValueError, "tokens must be a non-empty (b, t) " + TOKEN_IDS):
        extrapolation.PositionModel("none", vocab_size=10)(torch.tensor([3, 4]))
    for scheme in ("learned", "sinusoidal", "alibi", "none"):
        for wrong in ({"theta": position.frequencies(8)}, {"factor": 1.2}):
            with pytest.raises(ValueError, match=f"theta and factor change RoPE's rotation.*'{scheme}'"):
                extrapolation.PositionModel(scheme, vocab_size=10, max_len=4)(torch.tensor([[3, 4]]), **wrong)
    with pytest.raises(ValueError, match="decode runs a 'rope' or a 'none' model"):
        extrapolation.decode(extrapolation.PositionModel("alibi", vocab_size=10), torch.tensor([[3, 4]]), 2)
    with pytest.raises(ValueError, match="numbering must be 'text'"):
        extrapolation.decode(extrapolation.PositionModel("rope", vocab_size=10), torch.tensor([[3, 4]]), 2,
                             numbering="slot")
    with raises_saying(ValueError, "steps " + POSITIVE_INTEGER):
        extrapolation.train(extrapolation.PositionModel("none", vocab_size=10), steps=0)


@pytest.fixture(scope="module")
def barely_trained():
    return extrapolation.train_schemes(seed=3, trained_len=8, vocab_size=32, steps=3)


def test_train_schemes_trains_one_model_per_scheme_and_leaves_the_callers_random_stream(barely_trained):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    again = extrapolation.train_schemes(seed=3, trained_len=8, vocab_size=32, steps=3)
    assert torch.equal(torch.rand(3), expected)  # the caller's stream is where it was
    assert list(again.models) == list(extrapolation.SCHEMES) and again.trained_len == 8 and again.steps == 3
    for scheme, model in again.models.items():  # the same seed, the same models
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), barely_trained.models[scheme].parameters(),
                                                     strict=True))


def test_length_table_reads_each_scheme_at_each_length_and_the_learned_one_only_where_it_can(barely_trained):
    table = extrapolation.length_table(barely_trained)
    assert list(table.index) == list(extrapolation.SCHEMES) and list(table.columns) == [8, 16, 32]
    assert table.loc["learned", [16, 32]].isna().all() and table.drop(columns=[16, 32]).notna().all().all()
    assert table.loc["alibi", 16] == extrapolation.accuracy(barely_trained.models["alibi"], 16)


def test_stretch_and_window_tables_are_the_rope_models_readings(barely_trained):
    rope = barely_trained.models["rope"]
    stretched = extrapolation.stretch_table(barely_trained)
    assert list(stretched.columns) == [16, 32]
    assert stretched.loc["RoPE as trained", 32] == extrapolation.accuracy(rope, 32)
    coded = long_context.yarn(rope.d_k, 4, 8, rounded=True)
    assert stretched.loc["YaRN as coded", 32] == extrapolation.accuracy(
        rope, 32, theta=coded, factor=long_context.yarn_attention_factor(4))
    reading = extrapolation.window_table(barely_trained)
    assert list(reading.index) == ["full causal attention", "window of 8", "+ 4 sinks, text positions",
                                   "+ 4 sinks, cache positions"]
    assert reading.loc["+ 4 sinks, text positions", 16] == extrapolation.accuracy(
        rope, 16, ring={"window": 8, "sinks": 4, "numbering": "text"})  # the one pass under the mask, decoded


def test_first_token_weight_is_the_average_weight_on_position_0(barely_trained):
    first, even = extrapolation.first_token_weight(barely_trained, after=2, n=5)
    assert first.shape == (2, 4) and ((first > 0) & (first < 1)).all()
    assert even == pytest.approx(sum(1 / p for p in range(3, 9)) / 6)
