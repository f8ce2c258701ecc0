"""Tests for attn_helpers.circuits: the repeated-tokens task, the attention-only model, the induction head."""

import pytest
import torch

from attn_helpers import circuits

pytestmark = pytest.mark.heavy  # trains the two-layer model of chapter 8's circuit: scheduled first (conftest.py)


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
    ({"batch_size": 0}, "batch_size must be an integer of at least 1"),
    ({"vocab_size": 10}, "vocab_size=10 is too small"),
    ({"min_repeat": 11}, "too long"),
    ({"seq_len": 3}, "seq_len must be an integer of at least 4"),
])
def test_induction_batch_bad_input(kwargs, message):
    args = {"batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
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
    (torch.zeros(2, 21, dtype=torch.long), "up to seq_len=20"),
    (torch.full((2, 5), 24), "ids 0 … 23"),
    (torch.zeros(2, 5), "integer ids"),
    (torch.zeros(5, dtype=torch.long), r"\(b, t\)"),
])
def test_model_bad_input(tokens, message):
    model = circuits.AttentionOnly(24, 20, 16, 2)
    with pytest.raises(ValueError, match=message):
        model(tokens)


def test_two_layers_learn_an_induction_head_and_one_layer_cannot():
    torch.manual_seed(0)
    two = circuits.AttentionOnly(24, 20, 32, 2)
    result = circuits.train_induction(two, steps=300, seed=0)
    torch.manual_seed(0)
    one = circuits.AttentionOnly(24, 20, 32, 1)
    result_one = circuits.train_induction(one, steps=300, seed=0)
    assert len(result.losses) == 300 and result.accuracy > 0.95 and result_one.accuracy < 0.5
    assert circuits.induction_accuracy(two, skip={0}) < 0.5      # without the previous-token head it fails
    C = circuits.qk_circuit(two)
    assert C.shape == (24, 24) and (C.argmax(-1) == torch.arange(24)).float().mean() > 0.9
    torch.manual_seed(0)
    again = circuits.AttentionOnly(24, 20, 32, 2)
    assert circuits.train_induction(again, steps=20, seed=0).losses == result.losses[:20]  # repeatable


def test_training_and_circuit_bad_input():
    model = circuits.AttentionOnly(24, 20, 16, 2)
    with pytest.raises(TypeError, match="AttentionOnly"):
        circuits.train_induction(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="steps must be an integer of at least 1"):
        circuits.train_induction(model, steps=0)
    with pytest.raises(ValueError, match="layer must be between 1 and 1"):
        circuits.qk_circuit(model, layer=0)
    with pytest.raises(ValueError, match="layer must be between 1 and 0"):
        circuits.qk_circuit(circuits.AttentionOnly(24, 20, 16, 1))
