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
    lambda X: reference_self_attention(X)[::-1],                                   # (W, Y): right, but swapped
    lambda X: (torch.softmax(X @ X.T, dim=0), torch.softmax(X @ X.T, dim=0) @ X),  # swapped, and wrong too
])
def test_function_names_a_pair_in_the_other_order(fn):
    with pytest.raises(CheckFailed, match=r"returned a \(5, 5\) tensor first.*other order.*\(Y, W\)"):
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
    (lambda X: ah.loop_attention(X, X, X, scale=1.0), "ah.loop_attention"),
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


# ex-ch01-batch: Xs (t, b, d) = (4, 2, 3) -> Wb (2, 4, 4), Ys (4, 2, 3)

def batch_reference():
    Xs = check.sequence_first_batch()
    Xb = Xs.transpose(0, 1)
    Wb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=-1)
    return Xs, Wb, torch.bmm(Wb, Xb).transpose(0, 1)


def test_sequence_first_batch_is_fixed_and_holds_two_sentences():
    Xs = check.sequence_first_batch()
    assert Xs.shape == (4, 2, 3) and torch.equal(Xs, check.sequence_first_batch())
    assert not torch.allclose(Xs[:, 0], Xs[:, 1])


@pytest.mark.parametrize("answer", [
    "Xb = Xs.transpose(0, 1)\nWb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=-1)\n"
    "Ys = torch.bmm(Wb, Xb).transpose(0, 1)",
    "Xb = Xs.permute(1, 0, 2).contiguous()\nWb = (Xb @ Xb.mT).softmax(-1)\nYs = (Wb @ Xb).permute(1, 0, 2)",
    "Wb = torch.softmax(torch.einsum('ibd,jbd->bij', Xs, Xs), dim=-1)\nYs = torch.einsum('bij,jbd->ibd', Wb, Xs)",
    "Xb = torch.stack([Xs[:, 0], Xs[:, 1]])\nWb = torch.softmax(torch.bmm(Xb, Xb.transpose(1, 2)), dim=2)\n"
    "Ys = torch.stack(list(torch.bmm(Wb, Xb)), dim=1)",
    "Wb = torch.stack([torch.softmax(Xs[:, j] @ Xs[:, j].T, dim=-1) for j in range(2)])\n"
    "Ys = torch.stack([Wb[j] @ Xs[:, j] for j in range(2)], dim=1).double()",
    "Xb = Xs.transpose(0, 1)\nY, Wb = ah.attention(Xb, Xb, Xb, scale=1.0)\nYs = Y.transpose(0, 1).contiguous()",
], ids=["transpose", "permute", "einsum", "stack", "loop", "ah.attention"])
def test_batch_accepts_right_answers_however_written(answer, capsys):
    scope = {"torch": torch, "ah": ah, "Xs": check.sequence_first_batch()}
    exec(answer, scope)
    check.sequence_first_attention(scope["Wb"], scope["Ys"])
    assert capsys.readouterr().out.count("correct") == 2


def test_batch_names_answers_on_another_device():  # "meta" stands in for a GPU
    Xs, Wb, Ys = batch_reference()
    with pytest.raises(CheckFailed, match="Wb is on the meta device"):
        check.sequence_first_attention(Wb.to("meta"), Ys)
    with pytest.raises(CheckFailed, match="Ys is on the meta device"):
        check.sequence_first_attention(Wb, Ys.to("meta"))


def test_batch_rejects_attention_across_the_batch():
    Xs, Wb, Ys = batch_reference()
    across = torch.softmax(torch.bmm(Xs, Xs.transpose(1, 2)), dim=-1)  # bmm on (t, b, d): (4, 2, 2)
    with pytest.raises(CheckFailed, match=r"shape \(4, 2, 2\): torch.bmm took the tokens"):
        check.sequence_first_attention(across, torch.bmm(across, Xs))


def test_batch_rejects_a_reshape_for_a_transpose():
    Xs, Wb, Ys = batch_reference()
    regrouped = Xs.reshape(2, 4, 3)
    W = torch.softmax(torch.bmm(regrouped, regrouped.transpose(1, 2)), dim=-1)
    with pytest.raises(CheckFailed, match="keeps the numbers in memory order"):
        check.sequence_first_attention(W, torch.bmm(W, regrouped).reshape(4, 2, 3))
    with pytest.raises(CheckFailed, match="regroups the numbers in memory order"):  # only on the way back
        check.sequence_first_attention(Wb, torch.bmm(Wb, Xs.transpose(0, 1)).reshape(4, 2, 3))


def test_batch_hints_name_the_swap_without_the_code():
    """Each layout mistake gets a hint that says what to swap, never the line that does it."""
    Xs, Wb, Ys = batch_reference()
    Xb = Xs.transpose(0, 1)
    across = torch.softmax(torch.bmm(Xs, Xs.transpose(1, 2)), dim=-1)
    regrouped = Xs.reshape(2, 4, 3)
    W_regrouped = torch.softmax(torch.bmm(regrouped, regrouped.transpose(1, 2)), dim=-1)
    for W, Y, hint in [(across, torch.bmm(across, Xs), "swap the first two dimensions of Xs"),
                       (W_regrouped, torch.bmm(W_regrouped, regrouped).reshape(4, 2, 3), "Swap the two leading"),
                       (Wb, torch.bmm(Wb, Xb), "swap its first two dimensions back"),
                       (Wb, torch.bmm(Wb, Xb).reshape(4, 2, 3), "instead of swapping the two leading dimensions")]:
        with pytest.raises(CheckFailed, match=hint) as failure:
            check.sequence_first_attention(W, Y)
        assert "transpose(0, 1)" not in str(failure.value) and "permute(" not in str(failure.value)


def test_batch_rejects_wrong_weights():
    Xs, Wb, Ys = batch_reference()
    Xb = Xs.transpose(0, 1)
    scores = torch.bmm(Xb, Xb.transpose(1, 2))
    with pytest.raises(CheckFailed, match="softmax over dim=0"):
        check.sequence_first_attention(torch.softmax(scores, dim=0), Ys)
    for transposed in (torch.softmax(scores, dim=1), Wb.mT):  # the same tensor: the scores are symmetric
        with pytest.raises(CheckFailed, match="a softmax over dim=1, or Wb transposed"):
            check.sequence_first_attention(transposed, Ys)
    with pytest.raises(CheckFailed, match="forgot the softmax"):
        check.sequence_first_attention(scores, Ys)
    with pytest.raises(CheckFailed, match="in the other order"):
        check.sequence_first_attention(Wb.flip(0), Ys.flip(1))
    with pytest.raises(CheckFailed, match="raw dot products"):
        check.sequence_first_attention(torch.softmax(scores / 3 ** 0.5, dim=-1), Ys)
    with pytest.raises(CheckFailed, match="wrong values"):
        check.sequence_first_attention(torch.softmax(scores * 0.9, dim=-1), Ys)


def test_batch_rejects_wrong_outputs():
    Xs, Wb, Ys = batch_reference()
    Xb = Xs.transpose(0, 1)
    with pytest.raises(CheckFailed, match=r"laid out batch first, \(2, 4, 3\)"):
        check.sequence_first_attention(Wb, torch.bmm(Wb, Xb))
    with pytest.raises(CheckFailed, match="its row of the weights times the tokens, not its column"):
        check.sequence_first_attention(Wb, torch.bmm(Wb.transpose(1, 2), Xb).transpose(0, 1))
    with pytest.raises(CheckFailed, match="in the other order: Ys"):
        check.sequence_first_attention(Wb, Ys.flip(1))
    with pytest.raises(CheckFailed, match="divided by √d"):  # weights made by hand, outputs by SDPA
        check.sequence_first_attention(Wb, F.scaled_dot_product_attention(Xb, Xb, Xb).transpose(0, 1))
    with pytest.raises(CheckFailed, match="wrong values"):
        check.sequence_first_attention(Wb, Ys + 0.1)
    with pytest.raises(CheckFailed, match="should be a torch.Tensor"):
        check.sequence_first_attention(Wb, Ys.tolist())
    with pytest.raises(CheckFailed, match="pass a dense one"):  # a sparse batch-first Y, named, not a crash
        check.sequence_first_attention(Wb, torch.bmm(Wb, Xb).to_sparse())


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
