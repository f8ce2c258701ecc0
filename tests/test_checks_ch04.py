"""Every chapter 4 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers import training
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch04 as check

# ---------------------------------------------------------------- ex-ch04-tied

def _tied_raw():
    X, W = check.exercise_sequence(), check.tied_weight()
    Q = X @ W.T
    return X, Q @ Q.T


def test_tied_scores_accepts_solution(capsys):
    _, raw = _tied_raw()
    check.tied_scores(raw / 2.0)
    assert capsys.readouterr().out == "✓ S: correct\n"  # no word on symmetry: that is the prediction


@pytest.mark.parametrize("wrong, hint", [
    (lambda X, raw: raw, "forgot the scale"),
    (lambda X, raw: raw / math.sqrt(6), "√d_model"),
    (lambda X, raw: torch.softmax(raw / 2.0, dim=-1), "after the softmax"),
    (lambda X, raw: X @ X.T / math.sqrt(6), "project them with W"),
])
def test_tied_scores_rejects_mistakes(wrong, hint):
    X, raw = _tied_raw()
    with pytest.raises(CheckFailed, match=hint):
        check.tied_scores(wrong(X, raw))


def test_tied_scores_rejects_wrong_shape():
    with pytest.raises(CheckFailed, match="shape"):
        check.tied_scores(torch.zeros(4, 4))


# ---------------------------------------------------------------- ex-ch04-manual

def _manual_parts():
    head, x = check.exercise_head(), check.exercise_batch()
    with torch.no_grad():
        q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T
    return x, q, k, v


def test_manual_head_accepts_solution(capsys):
    x, q, k, v = _manual_parts()
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    check.manual_head(weights @ v, weights)
    assert capsys.readouterr().out == "✓ weights: correct\n✓ out: correct\n"


def test_manual_head_accepts_solution_compared_with_the_head_afterwards(capsys):
    head, x = check.exercise_head(), check.exercise_batch()
    q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T  # with gradients on
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    out = weights @ v
    assert torch.allclose(out, head(x)[0], atol=1e-6)  # the comparison the exercise suggests
    check.manual_head(out, weights)
    assert capsys.readouterr().out.count("correct") == 2


@pytest.mark.parametrize("take", [
    lambda head, x: head(x),  # the shortcut itself
    lambda head, x: head.forward(x),
    lambda head, x: tuple(t.detach() for t in head(x)),
    lambda head, x: tuple(t.clone() for t in head(x)),  # a copy, made with gradients on
    lambda head, x: tuple(t * 1.0 for t in head(x)),
    lambda head, x: (head(x)[0], head(x)[1][...]),
])
def test_manual_head_rejects_calling_the_head(take):
    head, x = check.exercise_head(), check.exercise_batch()
    out, weights = take(head, x)
    with pytest.raises(CheckFailed, match="comes from calling the head"):
        check.manual_head(out, weights)


def test_manual_head_rejects_calling_the_head_under_no_grad():
    head, x = check.exercise_head(), check.exercise_batch()
    with torch.no_grad():
        out, weights = head(x)
    with pytest.raises(CheckFailed, match="weights comes from calling the head"):
        check.manual_head(out, weights)


@pytest.mark.parametrize("scale, dim, hint", [
    (math.sqrt(6), -1, "√d_model"),
    (math.sqrt(3), -1, "√d_v"),
    (1.0, -1, "forgot the scale"),
    (2.0, -2, "wrong dimension"),
])
def test_manual_head_rejects_wrong_weights(scale, dim, hint):
    x, q, k, v = _manual_parts()
    w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=dim)
    with pytest.raises(CheckFailed, match=hint):
        check.manual_head(w @ v, w)


def test_manual_head_rejects_swapped_queries_and_keys():
    x, q, k, v = _manual_parts()
    w = torch.softmax(k @ q.transpose(-2, -1) / 2.0, dim=-1)
    with pytest.raises(CheckFailed, match="swapped"):
        check.manual_head(w @ v, w)


@pytest.mark.parametrize("make_out, hint", [
    (lambda w, x, q, v: w.transpose(-2, -1) @ v, "transposed"),
    (lambda w, x, q, v: w @ x, "inputs X instead of the values"),
    (lambda w, x, q, v: w @ q, "queries instead of the values"),
])
def test_manual_head_rejects_wrong_outputs(make_out, hint):
    x, q, k, v = _manual_parts()
    w = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    with pytest.raises(CheckFailed, match=hint):
        check.manual_head(make_out(w, x, q, v), w)


# ---------------------------------------------------------------- ex-ch04-next

def _trained(offset):
    torch.manual_seed(0)
    head = ah.SelfAttentionHead(18, 8, d_v=10)
    training.train_copy_task(head, offset=offset, progress=False)
    return head


def test_next_token_head_accepts_solution(capsys):
    check.next_token_head(_trained(1))
    # nothing about where the stripe lies: that is what the exercise asks to predict
    assert capsys.readouterr().out == "✓ accuracy: correct\n✓ attention map: correct\n"


def test_next_token_head_rejects_previous_token_head():
    with pytest.raises(CheckFailed, match="offset=1"):
        check.next_token_head(_trained(-1))


def test_next_token_head_rejects_untrained_head():
    torch.manual_seed(0)
    with pytest.raises(CheckFailed, match="train_copy_task"):
        check.next_token_head(ah.SelfAttentionHead(18, 8, d_v=10))


def test_next_token_head_rejects_wrong_module():
    with pytest.raises(CheckFailed, match="d_v=10"):
        check.next_token_head(ah.SelfAttentionHead(18, 8))
    with pytest.raises(CheckFailed, match="SelfAttentionHead"):
        check.next_token_head(torch.nn.Linear(18, 10))


# ---------------------------------------------------------------- ex-ch04-recall

@pytest.fixture(scope="module")
def recall_head():
    from attn_helpers import tasks

    torch.manual_seed(0)
    head = ah.SelfAttentionHead(19, 16, d_v=10)
    tasks.train_recall(head, steps=200, lr=0.05, seed=0)
    return head


def _recall_parts(head):
    x, labels = check.recall_question()
    with torch.no_grad():
        raw = head.W_q.weight.T @ head.W_k.weight
    return x, raw, raw / math.sqrt(head.d_k)


def test_recall_question_is_fixed_and_well_formed():
    x, labels = check.recall_question()
    assert x.shape == (7, 19) and len(labels) == 7 and labels[-1].endswith("?")
    assert torch.equal(x, check.recall_question()[0])
    assert x[-1, 18] == 1 and x[:-1, 18].sum() == 0


def test_recall_scores_accepts_solution_and_matches_the_head(recall_head, capsys):
    x, _, B = _recall_parts(recall_head)
    scores_q = x[-1] @ B @ x.T
    check.recall_scores(scores_q, recall_head)
    assert "✓ scores_q: correct" in capsys.readouterr().out
    with torch.no_grad():
        assert torch.allclose(torch.softmax(scores_q, -1), recall_head(x)[1][-1], atol=1e-5)


@pytest.mark.parametrize("wrong, hint", [
    (lambda x, raw, B: x[-1] @ raw @ x.T, "forgot the scale"),
    (lambda x, raw, B: x @ B @ x[-1], "question on the left"),
    (lambda x, raw, B: torch.softmax(x[-1] @ B @ x.T, -1), "after the softmax"),
    (lambda x, raw, B: x[0] @ B @ x.T, "first pair's row"),
    (lambda x, raw, B: x @ B @ x.T, "whole"),
    (lambda x, raw, B: x[-1] @ x.T, "left out B"),
    (lambda x, raw, B: torch.log_softmax(x[-1] @ B @ x.T, -1), "without calling the head"),
])
def test_recall_scores_rejects_mistakes(recall_head, wrong, hint):
    x, raw, B = _recall_parts(recall_head)
    with pytest.raises(CheckFailed, match=hint):
        check.recall_scores(wrong(x, raw, B), recall_head)


def test_recall_scores_rejects_the_log_of_the_heads_weights(recall_head):
    x, _, _ = _recall_parts(recall_head)
    with torch.no_grad():
        weights = recall_head(x)[1][-1]
    with pytest.raises(CheckFailed, match="logarithms of the head's weights"):
        check.recall_scores(weights.log(), recall_head)


def test_recall_scores_rejects_wrong_or_untrained_head(recall_head):
    x, _, B = _recall_parts(recall_head)
    with pytest.raises(CheckFailed, match="recall_head"):
        check.recall_scores(x[-1] @ B @ x.T, ah.SelfAttentionHead(18, 8, d_v=10))
    torch.manual_seed(1)
    fresh = ah.SelfAttentionHead(19, 16, d_v=10)
    with pytest.raises(CheckFailed, match="not learned"):
        check.recall_scores(x[-1] @ B @ x.T, fresh)
