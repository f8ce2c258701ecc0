"""attn_helpers.induction: chapter 8's experiment, each measure checked against a plain loop over the sequences."""

import math

import pytest
import torch

from attn_helpers import circuits, induction
from attn_helpers.circuits import HeadMeasures, InductionResult


def test_train_pair_trains_both_models_as_the_chapter_describes_and_keeps_the_global_random_state():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    pair = induction.train_pair(seed=3, steps=6, d_model=16, log_every=5)
    assert torch.equal(torch.get_rng_state(), state)
    for model, n_layers, result, log_every in ((pair.two_layer, 2, pair.two, 5), (pair.one_layer, 1, pair.one, None)):
        torch.manual_seed(3)
        again = circuits.AttentionOnly(24, 20, 16, n_layers)
        expected = circuits.train_induction(again, steps=6, seed=3, log_every=log_every)
        assert result.losses == expected.losses and result.accuracy == expected.accuracy
        assert result.measured == expected.measured
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(),
                                                     strict=True))
    assert sorted(pair.two.measured) == [0, 5] and not pair.one.measured


def test_knockouts_leave_out_each_layer_in_turn():
    model = circuits.AttentionOnly(24, 20, 16, 2)
    assert induction.knockouts(model) == {"layer 1": circuits.induction_accuracy(model, skip={0}),
                                          "layer 2": circuits.induction_accuracy(model, skip={1})}


@torch.no_grad()
def test_circuit_alone_is_attention_with_the_circuits_entries_as_scores():
    torch.manual_seed(4)
    model = circuits.AttentionOnly(24, 20, 16, 2)
    C = circuits.qk_circuit(model)
    tokens, scored = circuits.induction_batch(30, generator=torch.Generator().manual_seed(9))
    weights = []
    for seq, marks in zip(tokens.tolist(), scored, strict=True):
        n = int(marks.sum()) + 1  # the block's length
        for i in range(20):
            if marks[i]:
                scores = torch.stack([C[seq[i], seq[j - 1]] for j in range(1, i + 1)])  # keys 1 … i
                weights.append(float(scores.softmax(dim=0)[i - n]))  # key i - n + 1 is at index i - n
    assert induction.circuit_alone(model, n=30, seed=9) == pytest.approx(sum(weights) / len(weights), abs=1e-6)


def _pair_with(two_losses, one_losses, measured):
    model = circuits.AttentionOnly(24, 20, 16, 2)
    return induction.Pair(model, circuits.AttentionOnly(24, 20, 16, 1), InductionResult(two_losses, 0.0, measured),
                          InductionResult(one_losses, 0.0))


def test_formation_finds_each_event_and_the_falls_at_the_last_step_before_a_weight_reaches_a_quarter():
    # steps 5 … 30, five losses a step; the weights pass 0.25 at step 20 (and dip below again at 25)
    two = [3.5] * 5 + [3.3] * 5 + [3.0] * 5 + [2.0] * 5 + [1.0] * 5 + [0.5] * 5
    one = [3.55] * 5 + [3.35] * 5 + [3.2] * 5 + [3.1] * 5 + [3.0] * 5 + [2.9] * 5
    weights = {0: (0.1, 0.1, 0.0), 5: (0.1, 0.1, 0.1), 10: (0.2, 0.1, 0.3), 15: (0.2, 0.24, 0.5),
               20: (0.3, 0.2, 1.0), 25: (0.2, 0.9, 1.0), 30: (0.85, 0.9, 1.0)}
    form = induction.formation(_pair_with(two, one, {s: HeadMeasures(*w) for s, w in weights.items()}))
    assert form.steps == {"start": 5, "curves part": 15, "weights at most 0.25": 15, "QK circuit complete": 20,
                          "either weight above 0.8": 25, "both weights above 0.8": 30}
    assert form.start_loss == pytest.approx(3.5) and form.fall == pytest.approx(0.5)
    assert form.one_fall == pytest.approx(0.35) and form.uniform == pytest.approx(math.log(24))
    assert form.below_uniform == pytest.approx(math.log(24) - 3.0)
    assert form.one_below_uniform == pytest.approx(math.log(24) - 3.2)
    assert (form.diagonal_start, form.diagonal_before) == (0.1, 0.5)
    assert list(form.table.index) == ["start", "curves part", "weights at most 0.25", "QK circuit complete",
                                      "both weights above 0.8"]
    assert form.table.loc["QK circuit complete", "one layer's loss"] == 3.1


def test_formation_leaves_out_what_never_happens_and_refuses_a_run_without_step_five():
    losses = [3.0] * 10
    late = {0: HeadMeasures(0.1, 0.1, 0.0), 5: HeadMeasures(0.1, 0.1, 0.5), 10: HeadMeasures(0.5, 0.3, 0.5)}
    form = induction.formation(_pair_with(losses, losses, late))
    assert form.steps["curves part"] is None and form.steps["QK circuit complete"] is None
    assert list(form.table.index) == ["start", "weights at most 0.25"]
    with pytest.raises(ValueError, match="log_every=5"):
        induction.formation(_pair_with(losses, losses, {0: late[0], 10: late[10]}))
    with pytest.raises(ValueError, match="part_gap"):
        induction.formation(_pair_with(losses, losses, late), part_gap=0)


@torch.no_grad()
def test_one_layer_positions_against_a_loop_over_the_sequences():
    torch.manual_seed(6)
    model = circuits.AttentionOnly(24, 20, 16, 1)
    table, summary = induction.one_layer_positions(model, n=40, seed=2)
    tokens, scored = circuits.induction_batch(40, generator=torch.Generator().manual_seed(2))
    predicted = model(tokens)[0].argmax(-1).tolist()  # (40, 20)
    right, rule, seen = {p: [] for p in range(10, 19)}, [], []
    for seq, marks, guess in zip(tokens.tolist(), scored.tolist(), predicted, strict=True):
        for p in range(19):
            if marks[p]:
                shortest = max(20 - p, 4)
                right[p].append(guess[p] == seq[p + 1])
                rule.append(seq[p + 1 - shortest] == seq[p + 1])
                seen.append(guess[p] in seq[:p + 1])
    assert summary["accuracy"] == circuits.induction_accuracy(model, n=40, seed=2)
    assert summary["rule"] == pytest.approx(sum(rule) / len(rule)) and summary["seen"] == pytest.approx(
        sum(seen) / len(seen))
    assert list(table.index) == list(range(10, 19))
    assert table["block lengths that fit"].tolist() == [1, 2, 3, 4, 5, 6, 7, 7, 7]
    assert table["model right"].tolist() == pytest.approx([sum(v) / len(v) for v in right.values()])


def test_bad_input_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="seed"):
        induction.train_pair(seed=-1)
    linear = torch.nn.Linear(2, 2)
    for measure in (induction.knockouts, induction.circuit_alone, induction.one_layer_positions):
        with pytest.raises(TypeError, match="AttentionOnly"):
            measure(linear)
    with pytest.raises(ValueError, match="two layers"):
        induction.circuit_alone(circuits.AttentionOnly(24, 20, 16, 1))
