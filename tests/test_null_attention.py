"""Tests for chapter 9's attention when nothing is relevant: softmax + 1, the null key, the retrieval task."""

import math

import pytest
import torch

from attn_helpers.null_attention import (
    NORMALISERS,
    RetrievalAttention,
    null_key_experiment,
    plot_null_weights,
    retrieval_errors,
    retrieval_task,
    softmax_plus_one,
    train_retrieval,
)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_softmax_plus_one_is_a_null_key_with_score_zero():
    s = randn(3, 5) * 4
    with_null = torch.softmax(torch.cat([s, torch.zeros(3, 1)], dim=-1), dim=-1)[:, :-1]
    assert torch.allclose(softmax_plus_one(s), with_null, atol=1e-7)
    assert (softmax_plus_one(s).sum(-1) < 1).all()
    big = softmax_plus_one(torch.tensor([1000.0, 1000.0]))
    assert torch.allclose(big, torch.tensor([0.5, 0.5]))
    assert torch.equal(softmax_plus_one(torch.full((3,), -math.inf)), torch.zeros(3))
    with pytest.raises(TypeError):
        softmax_plus_one(torch.ones(3, dtype=torch.long))


def test_retrieval_task_targets():
    task = retrieval_task(200, t=5, n_symbols=12, d_v=3, seed=4)
    assert task.keys.shape == (200, 5) and task.values.shape == (200, 5, 3) and task.target.shape == (200, 3)
    for i in range(200):
        keys = task.keys[i].tolist()
        assert len(set(keys)) == 5
        if task.present[i]:
            assert torch.equal(task.target[i], task.values[i, keys.index(int(task.query[i]))])
        else:
            assert int(task.query[i]) not in keys and (task.target[i] == 0).all()
    assert 0.3 < task.present.float().mean() < 0.7
    assert torch.equal(retrieval_task(10, seed=4).values, retrieval_task(10, seed=4).values)


@pytest.mark.parametrize("kwargs, match", [({"n": 0}, "positive"), ({"n": 5, "t": 16}, "must exceed"),
                                           ({"n": 5, "p_absent": 1.5}, "probability")])
def test_retrieval_task_rejects_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        retrieval_task(**kwargs)


def test_null_key_lets_absent_queries_attend_nothing():
    train, test = retrieval_task(512, seed=0), retrieval_task(256, seed=1)
    results = {}
    for name in ("softmax", "null_key", "softmax_plus_one"):
        model = RetrievalAttention(name, seed=0)
        losses = train_retrieval(model, train, steps=150)
        assert losses[-1] < losses[0]
        results[name] = retrieval_errors(model, test)
    assert results["softmax"]["null_weight_absent"] == 0.0
    assert results["null_key"]["length_present"] == pytest.approx(1.0, abs=0.1)
    assert results["softmax"]["length_present"] < results["null_key"]["length_present"]
    assert results["null_key"]["absent"] < results["softmax"]["absent"]
    assert results["null_key"]["null_weight_absent"] > results["null_key"]["null_weight_present"]
    with pytest.raises(ValueError, match="normaliser"):
        RetrievalAttention("sparsemax")
    with pytest.raises(ValueError, match="steps"):
        train_retrieval(RetrievalAttention(), train, steps=0)


def test_null_key_experiment_trains_the_three_normalisers_from_one_start_and_tabulates_them():
    experiment = null_key_experiment(seed=3, n=64, steps=5)
    table = experiment.table
    assert list(table.index) == list(NORMALISERS) and list(experiment.models) == list(NORMALISERS)
    assert list(table.columns) == ["key present", "key absent", "nothing (absent)", "nothing (present)",
                                   "length (present)", "largest weight (absent)"]
    assert len(experiment.test.present) == 64 and table.loc["softmax", "nothing (absent)"] == 0.0
    assert 1 / 6 - 1e-6 <= table.loc["softmax", "largest weight (absent)"] <= 1  # six weights that sum to one
    assert (table["largest weight (absent)"] <= 1).all()
    # each row is what the chapter's pieces give by hand: the same start, the same training, the same test
    model = RetrievalAttention("null_key", seed=3)
    train_retrieval(model, retrieval_task(64, seed=0), steps=5)
    by_hand = retrieval_errors(model, retrieval_task(64, seed=1))
    assert table.loc["null_key", "key absent"] == by_hand["absent"]
    assert table.loc["null_key", "largest weight (absent)"] == by_hand["top_absent"]
    start = {name: RetrievalAttention(name, seed=3).embed.weight for name in NORMALISERS}
    assert all(torch.equal(w, start["softmax"]) for w in start.values())


def test_plot_null_weights():
    fig = plot_null_weights({"a": torch.rand(3, 4), "b": torch.rand(3, 4)})
    assert len(fig.axes) >= 2
    with pytest.raises(ValueError, match="empty"):
        plot_null_weights({})
