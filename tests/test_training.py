"""Tests for attn_helpers.training: the copy task and its training loop (chapter 4)."""

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from messages import INTEGER_AT_LEAST, POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers import training


def test_copy_task_batch_layout_and_targets():
    gen = torch.Generator().manual_seed(0)
    x, tokens, targets = training.copy_task_batch(3, seq_len=5, vocab_size=4, generator=gen)
    assert x.shape == (3, 5, 9) and tokens.shape == targets.shape == (3, 5)
    assert torch.equal(x[..., :4].argmax(-1), tokens)                 # one-hot letter first
    assert torch.equal(x[0, :, 4:], torch.eye(5))                     # then one-hot position
    assert torch.all(targets[:, 0] == training.IGNORE)
    assert torch.equal(targets[:, 1:], tokens[:, :-1])                # previous token
    _, tokens, targets = training.copy_task_batch(2, seq_len=5, vocab_size=4, offset=2)
    assert torch.equal(targets[:, :3], tokens[:, 2:]) and torch.all(targets[:, 3:] == training.IGNORE)


def test_copy_task_batch_is_seeded():
    a = training.copy_task_batch(4, generator=torch.Generator().manual_seed(5))
    b = training.copy_task_batch(4, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))


@pytest.mark.parametrize("kwargs, message", [
    ({"offset": 0}, "non-zero integer"),
    ({"offset": 8}, "|offset| < seq_len=8"),
    ({"seq_len": 1}, "seq_len " + INTEGER_AT_LEAST + " 2"),
    ({"vocab_size": 30}, "26 letters"),
    ({"batch_size": 0}, "batch_size " + POSITIVE_INTEGER),
])
def test_copy_task_batch_bad_input(kwargs, message):
    args = {"batch_size": 2, **kwargs}
    with raises_saying(ValueError, message):
        training.copy_task_batch(**args)


def test_token_labels():
    assert training.token_labels(torch.tensor([2, 0, 9])) == ["0:C", "1:A", "2:J"]
    with pytest.raises(ValueError, match=r"shape \(t,\)"):
        training.token_labels(torch.zeros(2, 3, dtype=torch.long))


def test_copy_task_loss_shapes():
    logits = torch.zeros(2, 4, 10)
    targets = torch.tensor([[training.IGNORE, 1, 2, 3], [training.IGNORE, 4, 5, 6]])
    assert abs(float(training.copy_task_loss(logits, targets)) - 2.302585) < 1e-5  # log 10, ignoring position 0
    with pytest.raises(ValueError, match="d_v differ from vocab_size"):
        training.copy_task_loss(torch.zeros(2, 4, 8)[..., None], targets)


def _train(**kwargs):
    torch.manual_seed(0)
    head = ah.SelfAttentionHead(18, 8, d_v=10)
    return head, training.train_copy_task(head, progress=False, **kwargs)


def test_training_reaches_the_stated_accuracy_and_is_deterministic():
    head, first = _train()
    _, second = _train()
    assert len(first.losses) == 200 and first.losses == second.losses   # bit-identical across runs
    assert first.accuracy == second.accuracy == 1.0
    assert first.losses[-1] < 0.1 < 2.0 < first.losses[0]
    x, _, _ = training.copy_task_batch(50, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        _, w = head(x)
    assert torch.all(w[:, 1:].argmax(-1) == torch.arange(7))            # each position looks one step back
    assert torch.get_num_threads() >= 1                                  # thread count restored


def test_progress_bar_prints(capsys):
    torch.manual_seed(0)
    training.train_copy_task(ah.SelfAttentionHead(18, 8, d_v=10), steps=3, progress=True)
    assert "training" in capsys.readouterr().out


def test_train_copy_task_bad_input():
    with pytest.raises(ValueError, match=r"SelfAttentionHead\(10 \+ 8, 8, d_v=10\); got d_model=18, d_v=8"):
        training.train_copy_task(ah.SelfAttentionHead(18, 8))            # d_v = 8: no vocabulary left
    with pytest.raises(ValueError, match="SelfAttentionHead"):
        training.train_copy_task(torch.nn.Linear(18, 10))
    with raises_saying(ValueError, "steps " + POSITIVE_INTEGER):
        training.train_copy_task(ah.SelfAttentionHead(18, 8, d_v=10), steps=0)


def test_plot_losses():
    ax = training.plot_losses([2.3, 1.0, 0.1], title="t")
    assert ax.get_title() == "t" and ax.get_yscale() == "log" and ax.get_xlabel() == "training step"
    with pytest.raises(ValueError, match="empty"):
        training.plot_losses([])


def test_torch_threads_sets_the_count_and_restores_it():
    before = torch.get_num_threads()
    with training.torch_threads():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with training.torch_threads(2):
        assert torch.get_num_threads() == 2
    with training.torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), training.torch_threads():
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with raises_saying(ValueError, "threads " + POSITIVE_INTEGER + " or None, got 0."):
        with training.torch_threads(0):
            pass


def test_copy_task_head_is_chapter_4s_head_drawn_from_its_seed():
    head = training.copy_task_head(seed=3)
    assert isinstance(head, ah.SelfAttentionHead) and (head.d_model, head.d_k, head.d_v) == (18, 8, 10)
    torch.manual_seed(3)
    by_hand = ah.SelfAttentionHead(d_model=18, d_k=8, d_v=10)
    assert all(torch.equal(a, b) for a, b in zip(head.parameters(), by_hand.parameters(), strict=True))
    assert not torch.equal(training.copy_task_head(seed=4).W_q.weight, head.W_q.weight)
    with pytest.raises(ValueError, match="seed"):
        training.copy_task_head(seed=-1)
