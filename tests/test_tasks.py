"""Tests for attn_helpers.tasks: associative recall, the task that needs attention by content (chapter 4)."""

import pytest
import torch
from messages import INTEGER_AT_LEAST, POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers import tasks


def test_recall_batch_layout_and_answer():
    x, keys, values, query, target = tasks.recall_batch(50, generator=torch.Generator().manual_seed(0))
    assert x.shape == (50, 7, 19) and keys.shape == values.shape == (50, 6) and query.shape == target.shape == (50,)
    assert all(len(set(row.tolist())) == 6 for row in keys)                  # keys differ within a sequence
    assert torch.equal(x[:, :6, :8].argmax(-1), keys)                         # one-hot key first
    assert torch.equal(x[:, :6, 8:18].argmax(-1), values)                     # then one-hot value
    assert torch.all(x[:, :6, 18] == 0) and torch.all(x[:, 6, 18] == 1)       # query flag on the question only
    assert torch.equal(x[:, 6, :8].argmax(-1), query) and torch.all(x[:, 6, 8:18] == 0)
    assert torch.all(x.sum(-1)[:, :6] == 2) and torch.all(x.sum(-1)[:, 6] == 2)
    match = keys == query[:, None]
    assert torch.all(match.sum(-1) == 1)                                      # the question names one pair
    assert torch.equal(values[match], target)                                 # whose value is the answer


def test_recall_batch_is_seeded():
    a = tasks.recall_batch(4, generator=torch.Generator().manual_seed(5))
    b = tasks.recall_batch(4, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"n_pairs": 9}, ValueError, "n_pairs <= n_keys"),
    ({"n_pairs": 0}, ValueError, "n_pairs " + POSITIVE_INTEGER + ", got 0"),
    ({"n_keys": 27, "n_pairs": 3}, ValueError, "26 letters"),
    ({"n_values": 11}, ValueError, "10 digits"),
    ({"n_values": 1}, ValueError, "n_values " + INTEGER_AT_LEAST + " 2"),
    ({"batch_size": 0}, ValueError, "batch_size " + POSITIVE_INTEGER),
    ({"batch_size": True}, TypeError, "batch_size " + POSITIVE_INTEGER),
])
def test_recall_batch_bad_input(kwargs, error, message):
    with raises_saying(error, message):
        tasks.recall_batch(**{"batch_size": 2, **kwargs})


def test_encode_recall_bad_input():
    keys, values, query = torch.tensor([[0, 1]]), torch.tensor([[3, 4]]), torch.tensor([1])
    assert tasks.encode_recall(keys, values, query).shape == (1, 3, 19)
    with pytest.raises(ValueError, match=r"\(b, n_pairs\)"):
        tasks.encode_recall(keys[0], values[0], query)
    with pytest.raises(ValueError, match="key ids"):
        tasks.encode_recall(keys, values, torch.tensor([8]))
    with pytest.raises(ValueError, match="value ids"):
        tasks.encode_recall(keys, torch.tensor([[3, 10]]), query)


def test_labels_and_features():
    assert tasks.recall_labels(torch.tensor([2, 0]), torch.tensor([7, 1]), 2) == ["C=7", "A=1", "C?"]
    with pytest.raises(ValueError, match="one sequence"):
        tasks.recall_labels(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long), 0)
    names = tasks.recall_features()
    assert len(names) == 19 and names[0] == "key A" and names[8] == "value 0" and names[-1] == "query"


def test_train_recall_learns_by_content_and_is_reproducible():
    def run():
        torch.manual_seed(0)
        head = ah.SelfAttentionHead(19, 16, d_v=10)
        return head, tasks.train_recall(head, steps=200, seed=0)

    head, result = run()
    assert len(result.losses) == 200 and result.losses[-1] < 0.1 * result.losses[0]
    assert result.accuracy > 0.95                                             # chance is 10%
    x, keys, _, query, _ = tasks.recall_batch(200, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        _, weights = tasks.recall_logits(head, x)                            # (b, t, t)
    assert torch.equal(weights[:, -1].argmax(-1), (keys == query[:, None]).int().argmax(-1))
    assert run()[1].losses == result.losses                                   # same seed, same numbers


def test_recall_accuracy_of_an_untrained_head_is_near_chance():
    torch.manual_seed(0)
    assert tasks.recall_accuracy(ah.SelfAttentionHead(19, 16, d_v=10)) < 0.3


def test_train_recall_rejects_wrong_model_and_steps():
    with pytest.raises(ValueError, match=r"SelfAttentionHead\(19, 8, d_v=10\)"):
        tasks.train_recall(ah.SelfAttentionHead(18, 8, d_v=10))
    with pytest.raises(ValueError, match="steps must be"):
        tasks.train_recall(ah.SelfAttentionHead(19, 8, d_v=10), steps=0)



def test_compare_recall_trains_each_head_for_each_number_of_keys_reproducibly():
    torch.manual_seed(3)
    before = torch.rand(1)
    small = {"keys": (2, 4), "d_k": 4, "linear_d_k": (8,), "steps": 20, "n_values": 4}
    first, again = tasks.compare_recall(seed=1, **small), tasks.compare_recall(seed=1, **small)
    torch.manual_seed(3)
    assert torch.equal(torch.rand(1), before)                                   # the global generator untouched
    columns = ["softmax, d_k = 4", "linear, d_k = 8"]
    assert list(first.accuracy.columns) == columns and list(first.accuracy.index) == [2, 4]
    assert first.accuracy.equals(again.accuracy) and first.share == again.share
    assert first.accuracy.to_numpy().min() > 0.4                                # chance is 1 / 4: they learned
    assert list(first.heads) == list(first.share) == columns and all(0 < s < 1 for s in first.share.values())
    assert isinstance(first.heads["linear, d_k = 8"], ah.linear_attention.LinearAttentionHead)
    assert first.heads["softmax, d_k = 4"].d_model == 4 + 4 + 1                 # the heads kept: the most keys
    assert not tasks.compare_recall(seed=2, **small).accuracy.equals(first.accuracy)  # the seed matters


@pytest.mark.parametrize("kwargs, error, message", [
    ({"keys": (8, 4)}, ValueError, "keys must be increasing"),
    ({"keys": ()}, ValueError, "keys must be a non-empty list"),
    ({"linear_d_k": (0,)}, ValueError, "linear_d_k must be a non-empty list of positive ints"),
    ({"seed": 0.5}, TypeError, "seed must be an integer"),
])
def test_compare_recall_bad_input(kwargs, error, message):
    with raises_saying(error, message):
        tasks.compare_recall(**kwargs)
