"""Chapter 1's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import pytest
import torch
import torch.nn.functional as F

import attn_helpers as ah
from attn_helpers.attention import attention as imported_attention
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch01 as check

K1, K2 = check.TOY_K


# ex-ch01-predict: the weights for the query (2, 2)

def doubled_reference() -> torch.Tensor:
    q = torch.tensor([2.0, 2.0])
    return torch.softmax(torch.stack([q @ K1, q @ K2]), dim=0)


def test_doubled_query_accepts_reference(capsys):
    check.doubled_query_weights(doubled_reference())
    assert "✓ w_doubled: correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (torch.tensor([8.0, 4.0]), "raw scores"),
    (torch.tensor([8.0, 4.0]) / 12.0, "softmax exponentiates first"),
    (torch.softmax(torch.tensor([4.0, 2.0]), dim=0), "original query"),
    (doubled_reference() @ check.TOY_V, "output vector"),
])
def test_doubled_query_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.doubled_query_weights(wrong)


def test_doubled_query_rejects_wrong_type_and_shape():
    with pytest.raises(CheckFailed, match="should be a torch.Tensor, got list"):
        check.doubled_query_weights([0.982, 0.018])
    with pytest.raises(CheckFailed, match=r"has shape \(1, 2\), expected \(2,\)"):
        check.doubled_query_weights(doubled_reference().unsqueeze(0))
    with pytest.raises(CheckFailed, match="dtype torch.int64"):
        check.doubled_query_weights(torch.tensor([1, 0]))


# ex-ch01-function: self_attention(X) -> (Y, W)

def reference_self_attention(X):
    W = torch.softmax(X @ X.T, dim=-1)
    return W @ X, W


def test_function_accepts_reference(capsys):
    check.self_attention_function(reference_self_attention)
    out = capsys.readouterr().out
    assert "✓ W: correct" in out and "✓ Y: correct" in out


@pytest.mark.parametrize("fn, hint", [
    (lambda X: (torch.softmax(X @ X.T, 0) @ X, torch.softmax(X @ X.T, 0)), "softmax over the wrong dimension"),
    (lambda X: (X @ X.T @ X, X @ X.T), "forgot the softmax"),
    (lambda X: reference_self_attention(X / X.shape[-1] ** 0.25), "comes in chapter 2"),
    (lambda X: (reference_self_attention(X)[1].T @ X, reference_self_attention(X)[1]), "weights are transposed"),
    (lambda X: (X, reference_self_attention(X)[1]), "input unchanged"),
    (lambda X: reference_self_attention(X)[1], "return a pair"),
])
def test_function_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.self_attention_function(fn)


@pytest.mark.parametrize("fn", [
    lambda X: ah.attention(X, X, X, scale=1.0),  # the exact answer, through the forbidden helper
    lambda X: imported_attention(X, X, X, scale=1.0),  # imported under its own name
    lambda X: ah.attention(X, X, X),  # the scaled version
    lambda X: (ah.attention(X, X, X, scale=1.0)[0], torch.softmax(X @ X.T, dim=-1)),  # only Y from the helper
])
def test_function_rejects_calling_ah_attention(fn):
    with pytest.raises(CheckFailed, match="calls ah.attention"):
        check.self_attention_function(fn)


@pytest.mark.parametrize("fn, name", [
    (lambda X: ah.cost.loop_attention(X, X, X, scale=1.0), "ah.cost.loop_attention"),
    (lambda X: (ah.merge.finish_partial(ah.merge.partial_attention(X, X, X, scale=1.0)),
                torch.softmax(X @ X.T, dim=-1)), "ah.merge"),
])
def test_function_rejects_the_books_other_attention_functions(fn, name):
    with pytest.raises(CheckFailed, match=f"calls {name}"):
        check.self_attention_function(fn)


def test_function_rejects_fused_attention():
    def fused(X):
        W = torch.softmax(X @ X.T, dim=-1)
        return F.scaled_dot_product_attention(X[None], X[None], X[None], scale=1.0)[0], W

    with pytest.raises(CheckFailed, match="scaled_dot_product_attention"):
        check.self_attention_function(fused)


def test_function_may_use_torch_softmax_and_ah_softmax(capsys):
    def with_ah_softmax(X):
        W = ah.softmax(X @ X.T, dim=-1)
        return W @ X, W

    check.self_attention_function(with_ah_softmax)
    assert capsys.readouterr().out.count("correct") == 2


def test_function_that_changes_its_input_in_place_is_rejected():
    # the check passes a copy, so zeroing it cannot corrupt the expected answer
    def in_place(X):
        X.mul_(0)
        return reference_self_attention(X)

    with pytest.raises(CheckFailed):
        check.self_attention_function(in_place)


# ex-ch01-batch: Xb (2, 4, 3), Wb (2, 4, 4), Yb (2, 4, 3)

def batch_reference():
    a, b = check.batch_sentences()
    Xb = torch.stack([a, b])
    Wb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=-1)
    return Xb, Wb, torch.bmm(Wb, Xb)


def test_batch_sentences_are_fixed():
    a, b = check.batch_sentences()
    assert a.shape == b.shape == (4, 3)
    assert torch.equal(a, check.batch_sentences()[0]) and not torch.equal(a, b)


def test_batch_accepts_reference(capsys):
    check.batched_attention(*batch_reference())
    out = capsys.readouterr().out
    assert all(f"✓ {name}: correct" in out for name in ("X", "W", "Y"))


def test_batch_rejects_wrong_batches():
    a, b = check.batch_sentences()
    _, Wb, Yb = batch_reference()
    with pytest.raises(CheckFailed, match="torch.cat joined the sentences"):
        check.batched_attention(torch.cat([a, b]), Wb, Yb)
    with pytest.raises(CheckFailed, match="stacked along the wrong dimension"):
        check.batched_attention(torch.stack([a, b], dim=1), Wb, Yb)
    with pytest.raises(CheckFailed, match="in the other order: a first"):  # the text says which comes first
        check.batched_attention(torch.stack([b, a]), Wb[[1, 0]], Yb[[1, 0]])


def test_batch_rejects_wrong_weights():
    Xb, Wb, Yb = batch_reference()
    scores = torch.bmm(Xb, Xb.transpose(1, 2))
    with pytest.raises(CheckFailed, match="softmax over dim=1"):
        check.batched_attention(Xb, torch.softmax(scores, dim=1), Yb)
    with pytest.raises(CheckFailed, match=r"X Xᵀ"):
        check.batched_attention(Xb, torch.softmax(torch.bmm(Xb.transpose(1, 2), Xb), dim=-1), Yb)
    with pytest.raises(CheckFailed, match="forgot the softmax"):
        check.batched_attention(Xb, scores, Yb)


def test_batch_rejects_wrong_outputs():
    Xb, Wb, Yb = batch_reference()
    with pytest.raises(CheckFailed, match=r"torch.bmm\(W, X\)"):
        check.batched_attention(Xb, Wb, torch.bmm(Wb.transpose(1, 2), Xb))
    with pytest.raises(CheckFailed, match="wrong values"):
        check.batched_attention(Xb, Wb, Yb + 0.1)


def _hidden_sdpa(X):  # with the torch-function record off, SDPA shows only as its math fallback's operators
    W = torch.softmax(X @ X.T, dim=-1)
    with torch._C.DisableTorchFunction():
        return F.scaled_dot_product_attention(X, X, X, scale=1.0), W


def _torch_module(X):  # nn.MultiheadAttention with identity projections, queries pre-multiplied to undo its scale
    d = X.shape[-1]
    mha = torch.nn.MultiheadAttention(d, 1, bias=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(d) * d ** 0.5, torch.eye(d), torch.eye(d)]))
        mha.out_proj.weight.copy_(torch.eye(d))
    return mha(X, X, X)


@pytest.mark.parametrize("fn, named", [(_hidden_sdpa, "switches off the check's record"),
                                       (_torch_module, "nn.MultiheadAttention")])
def test_function_rejects_pytorch_attention_however_hidden(fn, named):
    with pytest.raises(CheckFailed, match=named):
        check.self_attention_function(fn)


def test_function_may_return_a_list(capsys):
    check.self_attention_function(lambda X: list(reference_self_attention(X)))
    assert capsys.readouterr().out.count("correct") == 2
