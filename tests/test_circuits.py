"""Tests for attn_helpers.circuits: the repeated-tokens task, the attention-only model, the induction head."""

import pytest
import torch
from messages import INTEGER_AT_LEAST, INTEGER_BETWEEN, POSITIVE_INTEGER, TOKEN_IDS, TOKEN_RANGE, raises_saying

from attn_helpers import circuits


def test_induction_batch_layout():
    tokens, scored = circuits.induction_batch(50, vocab_size=24, seq_len=20, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == scored.shape == (50, 20) and tokens.dtype == torch.long
    for seq, sc in zip(tokens, scored, strict=True):
        n = int(sc.sum()) + 1                                  # the block's length
        assert 4 <= n <= 10
        assert torch.equal(seq[20 - n:], seq[20 - 2 * n: 20 - n])  # the block, repeated
        assert len(set(seq[: 20 - n].tolist())) == 20 - n        # all distinct before the repeat
        assert sc[20 - n: 19].all() and not sc[19] and not sc[: 20 - n].any()
    again = circuits.induction_batch(50, vocab_size=24, seq_len=20, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again[0], tokens)


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 0}, "batch_size " + POSITIVE_INTEGER + ", got 0"),
    ({"vocab_size": 10}, "vocab_size=10 is too small"),
    ({"min_repeat": 11}, "too long"),
    ({"seq_len": 3}, "seq_len " + INTEGER_AT_LEAST + " 4"),
])
def test_induction_batch_bad_input(kwargs, message):
    args = {"batch_size": 2, **kwargs}
    with raises_saying(ValueError, message):
        circuits.induction_batch(**args)


def test_model_shapes_and_causality():
    torch.manual_seed(0)
    model = circuits.AttentionOnly(24, 20, 16, 2)
    tokens, _ = circuits.induction_batch(3, generator=torch.Generator().manual_seed(1))
    logits, weights = model(tokens)
    assert logits.shape == (3, 20, 24) and len(weights) == 2 and weights[0].shape == (3, 1, 20, 20)
    assert torch.all(weights[1].triu(1) == 0)                     # causal: no weight on later tokens
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 24
    with torch.no_grad():
        assert torch.allclose(model(changed)[0][:, :-1], logits[:, :-1].detach())  # the future does not leak


@pytest.mark.parametrize("tokens, message", [
    (torch.zeros(2, 21, dtype=torch.long), "up to seq_len=20 tokens, got 21"),
    (torch.full((2, 5), 24), TOKEN_RANGE + " 0 … 23"),
    (torch.zeros(2, 5), TOKEN_IDS),
    (torch.zeros(5, dtype=torch.long), "(b, t)"),
])
def test_model_bad_input(tokens, message):
    model = circuits.AttentionOnly(24, 20, 16, 2)
    with raises_saying(TypeError if tokens.is_floating_point() else ValueError, message):
        model(tokens)


# That training makes a two-layer model an induction head and leaves a one-layer model far behind, that
# knocking out either layer leaves most of the repeat mispredicted, and that the trained QK circuit is
# diagonal: chapter 8 asserts all of it on its own trained models, executed by nbval in the same
# `make test`. These tests check the machinery on short runs and untrained models.
def test_training_is_repeatable_and_reports_what_it_measured():
    runs, threads = [], torch.get_num_threads()
    torch.set_num_threads(2)  # training runs on one thread, then gives back the caller's count
    try:
        for _ in range(2):
            torch.manual_seed(0)
            model = circuits.AttentionOnly(24, 20, 16, 2)
            runs.append((model, circuits.train_induction(model, steps=30, batch_size=32, seed=3)))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    (model, result), (_, again) = runs
    assert len(result.losses) == 30 and result.losses == again.losses   # same seeds, same numbers
    assert sum(result.losses[-5:]) < sum(result.losses[:5])              # the loss goes down
    assert result.accuracy == circuits.induction_accuracy(model)         # the held-out accuracy it reports


def test_logging_measures_the_heads_without_changing_the_training():
    results = []
    for log_every in (None, 4):
        torch.manual_seed(0)
        model = circuits.AttentionOnly(24, 20, 16, 2)
        results.append(circuits.train_induction(model, steps=8, batch_size=16, seed=3, log_every=log_every))
    plain, logged = results
    assert plain.losses == logged.losses and plain.accuracy == logged.accuracy  # same batches, same steps
    assert plain.measured == {} and list(logged.measured) == [0, 4, 8]          # before training, then every 4 steps
    assert logged.measured[8] == circuits.measure_heads(model)                   # the trained model, measured again
    assert logged.measured[0] != logged.measured[8]


def test_measure_heads_is_the_chapter_s_measurement():
    torch.manual_seed(2)
    model = circuits.AttentionOnly(24, 20, 16, 2)
    tokens, scored = circuits.induction_batch(50, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, (w1, w2) = model(tokens)
    w1, w2 = w1[:, 0], w2[:, 0]
    j = torch.arange(1, 16)                                                        # positions 1 … 15, as chapter 8
    previous = float(w1[:, j, j - 1].mean())
    induction = []
    for b in range(50):
        n = int(scored[b].sum()) + 1
        induction += [float(w2[b, p, p - n + 1]) for p in range(20 - n, 19)]       # the position after the earlier copy
    diagonal = float((circuits.qk_circuit(model).argmax(-1) == torch.arange(24)).float().mean())
    measured = circuits.measure_heads(model, n=50, seed=7)
    assert measured.previous_token == pytest.approx(previous, abs=1e-6)
    assert measured.induction == pytest.approx(sum(induction) / len(induction), abs=1e-6)
    assert measured.diagonal == diagonal


def test_plot_formation():
    import matplotlib

    matplotlib.use("Agg")
    measured = {0: circuits.HeadMeasures(0.1, 0.2, 0.0), 5: circuits.HeadMeasures(0.9, 0.8, 1.0)}
    fig = circuits.plot_formation({"a": [3.0, 2.0, 1.0, 0.5, 0.2]}, measured, title="t")
    top, bottom = fig.axes
    assert top.get_yscale() == "log" and len(top.lines) == 1 and len(bottom.lines) == 3
    assert list(bottom.lines[1].get_ydata()) == [0.2, 0.8]
    with pytest.raises(ValueError, match="log_every"):
        circuits.plot_formation({"a": [1.0]}, {}, title="t")


def test_skip_leaves_a_layer_out_of_the_residual_stream():
    torch.manual_seed(0)
    model = circuits.AttentionOnly(24, 20, 16, 2)
    tokens, scored = circuits.induction_batch(40, generator=torch.Generator().manual_seed(2))
    silenced = circuits.AttentionOnly(24, 20, 16, 2)
    silenced.load_state_dict(model.state_dict())
    with torch.no_grad():
        silenced.layers[0].W_o.weight.zero_()                            # layer 1 adds nothing: what skip={0} means
        if silenced.layers[0].W_o.bias is not None:
            silenced.layers[0].W_o.bias.zero_()
        logits, weights = model(tokens, skip={0})
        expected, _ = silenced(tokens)
        assert torch.allclose(logits, expected, atol=1e-6) and len(weights) == 2
        bare, _ = model(tokens, skip={0, 1})                             # embeddings straight to the unembedding
        x = model.embed(tokens) + model.pos.weight[:20]
        assert torch.allclose(bare, model.unembed(x), atol=1e-6)
        right = logits[:, :-1].argmax(-1) == tokens[:, 1:]
    assert circuits.induction_accuracy(model, n=40, seed=2, skip={0}) == float(right[scored[:, :-1]].float().mean())


def test_qk_circuit_is_the_formula_in_the_weights():
    torch.manual_seed(1)
    model = circuits.AttentionOnly(24, 20, 32, 2)
    E, first, second = model.embed.weight, model.layers[0], model.layers[1]
    with torch.no_grad():
        by_hand = (E @ second.W_q.weight.T) @ (E @ first.W_v.weight.T @ first.W_o.weight.T @ second.W_k.weight.T).T
    C = circuits.qk_circuit(model)
    assert C.shape == (24, 24) and not C.requires_grad
    assert torch.allclose(C, by_hand / second.d_k ** 0.5, atol=1e-6)
    assert (C.argmax(-1) == torch.arange(24)).float().mean() < 0.5     # untrained: no diagonal yet


def test_training_and_circuit_bad_input():
    model = circuits.AttentionOnly(24, 20, 16, 2)
    with pytest.raises(TypeError, match="AttentionOnly"):
        circuits.train_induction(torch.nn.Linear(2, 2))
    with raises_saying(ValueError, "steps " + POSITIVE_INTEGER + ", got 0"):
        circuits.train_induction(model, steps=0)
    with raises_saying(ValueError, "log_every " + POSITIVE_INTEGER + " or None"):
        circuits.train_induction(model, steps=2, log_every=0)
    with pytest.raises(ValueError, match="at least two layers"):
        circuits.measure_heads(circuits.AttentionOnly(24, 20, 16, 1))
    with raises_saying(ValueError, "layer " + INTEGER_BETWEEN + " 1 and 1 (it reads the layer before it), got 0"):
        circuits.qk_circuit(model, layer=0)
    with pytest.raises(ValueError, match="needs two layers or more; this one has 1"):
        circuits.qk_circuit(circuits.AttentionOnly(24, 20, 16, 1))
