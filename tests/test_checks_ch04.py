"""Every chapter 4 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import concurrent.futures
import math
import sys

import pytest
import torch
import torch.nn.functional as F

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
    assert capsys.readouterr().out == "✓ S_tied: correct\n"  # no word on symmetry: that is the prediction


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

def head_by_hand(head, x, scale=None, dim=-1, swap=False, average="values"):
    """The reference answer, or (with an argument) one of the usual mistakes."""
    q, k, v = x @ head.W_q.weight.T, x @ head.W_k.weight.T, x @ head.W_v.weight.T
    raw = k @ q.transpose(-2, -1) if swap else q @ k.transpose(-2, -1)
    weights = torch.softmax(raw / (scale or math.sqrt(head.d_k)), dim=dim)
    averaged = {"values": v, "transposed": v, "inputs": x, "queries": q}[average]
    return (weights.transpose(-2, -1) if average == "transposed" else weights) @ averaged, weights


def test_head_function_accepts_solution(capsys):
    check.head_function(head_by_hand)
    assert capsys.readouterr().out == (
        "✓ weights: correct\n✓ out: correct\n"
        "✓ weights on SelfAttentionHead(8, 2, d_v=5): correct\n✓ out on SelfAttentionHead(8, 2, d_v=5): correct\n")


def test_head_function_accepts_other_correct_versions(capsys):
    def with_layers(head, x):  # the head's own nn.Linear layers, and a scale written as a power
        q, k, v = head.W_q(x), head.W_k(x), head.W_v(x)
        weights = (q @ k.mT * head.d_k ** -0.5).softmax(dim=-1)
        return weights @ v, weights

    def einsum(head, x):
        q = torch.einsum("btd,kd->btk", x, head.W_q.weight)
        k = torch.einsum("btd,kd->btk", x, head.W_k.weight)
        v = torch.einsum("btd,vd->btv", x, head.W_v.weight)
        weights = torch.softmax(torch.einsum("bik,bjk->bij", q, k) / math.sqrt(q.shape[-1]), dim=-1)
        return torch.einsum("bij,bjv->biv", weights, v), weights

    for fn in (with_layers, einsum):
        check.head_function(fn)
    assert capsys.readouterr().out.count("correct") == 8


def _hidden_sdpa(head, x):  # with the torch-function record off, SDPA shows only as its math fallback's operators
    with torch._C.DisableTorchFunction():
        out = F.scaled_dot_product_attention(head.W_q(x), head.W_k(x), head.W_v(x))
    return out, head_by_hand(head, x)[1]


def _same_weights(head, x):
    twin = ah.SelfAttentionHead(head.d_model, head.d_k, d_v=head.d_v)
    twin.load_state_dict(head.state_dict())
    return twin(x)


@pytest.mark.parametrize("shortcut", [
    lambda head, x: head(x),  # the shortcut itself
    lambda head, x: head.forward(x),
    lambda head, x: ah.SelfAttentionHead.forward(head, x),
    lambda head, x: tuple(t.clone() for t in torch.no_grad()(head)(x)),  # a copy made without gradients
    _same_weights,  # a fresh head loaded with its weights
], ids=["call", "forward", "class-forward", "no-grad-copy", "same-weights"])
def test_head_function_rejects_calling_the_head(shortcut):
    with pytest.raises(CheckFailed, match="the head's forward"):
        check.head_function(shortcut)


@pytest.mark.parametrize("shortcut, named", [
    (lambda head, x: ah.attention(head.W_q(x), head.W_k(x), head.W_v(x)), "ah.attention"),
    (lambda head, x: [torch.stack(t) for t in zip(*(ah.loop_attention(head.W_q(s), head.W_k(s), head.W_v(s))
                                                     for s in x), strict=True)], "loop_attention"),
    (lambda head, x: (F.scaled_dot_product_attention(head.W_q(x), head.W_k(x), head.W_v(x)), None),
     "fused attention"),
    (lambda head, x: _hidden_sdpa(head, x), "switches off the check's record"),
    (lambda head, x: concurrent.futures.ThreadPoolExecutor().submit(head, x).result(), "starts a thread"),
    (lambda head, x: (sys.setprofile(None), head(x))[1], "switches off the check's profiler"),
])
def test_head_function_rejects_attention_already_written(shortcut, named):
    with pytest.raises(CheckFailed, match=named):
        check.head_function(shortcut)


@pytest.mark.parametrize("mistake, hint", [
    ({"scale": math.sqrt(6)}, "√d_model"),
    ({"scale": math.sqrt(3)}, "√d_v"),
    ({"scale": 1.0}, "forgot the scale"),
    ({"dim": -2}, "wrong dimension"),
    ({"swap": True}, "swapped"),
    ({"average": "transposed"}, "transposed"),
    ({"average": "inputs"}, "inputs X instead of the values"),
    ({"average": "queries"}, "queries instead of the values"),
])
def test_head_function_rejects_mistakes(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.head_function(lambda head, x: head_by_hand(head, x, **mistake))


def test_head_function_accepts_a_list_and_a_head_changed_in_place(capsys):
    def folded(head, x):  # folds the scale into the head's own W_q first
        with torch.no_grad():
            head.W_q.weight.div_(math.sqrt(head.d_k))
        return list(head_by_hand(head, x, scale=1.0))

    check.head_function(folded)
    assert capsys.readouterr().out.count("correct") == 4


@pytest.mark.parametrize("wrong, hint", [
    (lambda head, x: head_by_hand(head, x)[::-1], "you returned \\(weights, out\\)"),
    (lambda head, x: head_by_hand(head, x, scale=4.0), "divided by d_k = 4"),
    (lambda head, x: head_by_hand(head, x, scale=0.5), "multiplied by √d_k"),
])
def test_head_function_names_more_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.head_function(wrong)


def test_head_function_rejects_the_exercises_numbers_written_in():
    with pytest.raises(CheckFailed, match="divide by √2: read d_k from the head you are given"):
        check.head_function(lambda head, x: head_by_hand(head, x, scale=2.0))  # right for d_k = 4 only

    def fixed_shapes(head, x):  # the exercise's batch size written in: fails on the other batch
        q, k, v = (x.reshape(2, 5, -1) @ w.weight.T for w in (head.W_q, head.W_k, head.W_v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head.d_k), dim=-1)
        return weights @ v, weights

    with pytest.raises(CheckFailed, match="raised RuntimeError on SelfAttentionHead\\(8, 2, d_v=5\\).*take every size"):
        check.head_function(fixed_shapes)


def test_head_function_wants_a_pair():
    with pytest.raises(CheckFailed, match="should return a pair"):
        check.head_function(lambda head, x: head_by_hand(head, x)[0])


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
    with pytest.raises(CheckFailed, match="on the next token"):
        check.next_token_head(ah.SelfAttentionHead(18, 8, d_v=10))


def test_next_token_head_rejects_wrong_module():
    with pytest.raises(CheckFailed, match="gives 10 out"):
        check.next_token_head(ah.SelfAttentionHead(18, 8))
    with pytest.raises(CheckFailed, match="self-attention head that takes 10 \\+ 8 features"):
        check.next_token_head(torch.nn.Linear(18, 10))


# ---------------------------------------------------------------- ex-ch04-recall

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


def question_scores(B, x):
    return x[-1] @ B @ x.T


def test_recall_scores_accepts_solution_and_matches_the_head(recall_head, capsys):
    check.recall_scores(question_scores, recall_head)
    assert capsys.readouterr().out == ("✓ question_scores(recall_map, x_new): correct\n"
                                       "✓ question_scores on another map and sequence: correct\n")
    x, _, B = _recall_parts(recall_head)
    with torch.no_grad():
        assert torch.allclose(torch.softmax(question_scores(B, x), -1), recall_head(x)[1][-1], atol=1e-5)


def test_recall_scores_accepts_other_correct_versions(recall_head, capsys):
    check.recall_scores(lambda B, x: torch.einsum("i,ij,tj->t", x[-1], B, x), recall_head)
    check.recall_scores(lambda B, x: (x @ B.T @ x[-1]), recall_head)  # (x_q B x_jᵀ)_j written as a column
    assert capsys.readouterr().out.count("correct") == 4


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
    with pytest.raises(CheckFailed, match=hint):
        check.recall_scores(lambda B, x: wrong(x, B * math.sqrt(recall_head.d_k), B), recall_head)


def test_recall_scores_rejects_the_log_of_the_heads_weights(recall_head):
    def logs(B, x):
        with torch.no_grad():
            return recall_head(x)[1][-1].log()

    with pytest.raises(CheckFailed, match="the head's forward"):  # the head was called
        check.recall_scores(logs, recall_head)


def test_recall_scores_rejects_the_heads_layers_and_a_fixed_sequence(recall_head):
    """Read off the head's layers or x_new, the scores are right for the exercise's map and sequence only."""
    def from_layers(B, x):
        with torch.no_grad():
            return recall_head.W_q(x[-1]) @ recall_head.W_k(x).T / math.sqrt(recall_head.d_k)

    with pytest.raises(CheckFailed, match="recall_head's scores.*use its B argument"):
        check.recall_scores(from_layers, recall_head)
    x_new, _ = check.recall_question()
    with pytest.raises(CheckFailed, match="scores of x_new.*use its x argument"):
        check.recall_scores(lambda B, x: x_new[-1] @ B @ x_new.T, recall_head)


def test_recall_scores_rejects_wrong_or_untrained_head(recall_head):
    with pytest.raises(CheckFailed, match="recall_head"):
        check.recall_scores(question_scores, ah.SelfAttentionHead(18, 8, d_v=10))
    torch.manual_seed(1)
    fresh = ah.SelfAttentionHead(19, 16, d_v=10)
    with pytest.raises(CheckFailed, match="not learned"):
        check.recall_scores(question_scores, fresh)


