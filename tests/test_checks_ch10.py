"""Chapter 10's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch10 as check

# ex-ch10-predict: tiles computed under a causal mask


def test_causal_tiles_accepts_reference(capsys):
    check.causal_tiles(9)
    assert "✓ n_tiles: correct" in capsys.readouterr().out


def test_causal_tiles_reference_is_the_helpers_count():
    assert ah.flash.tile_counts(check.T, check.T, check.BLOCK_Q, check.BLOCK_K, causal=True)["computed"] == 9


@pytest.mark.parametrize("wrong, hint", [
    (12, "not every tile is computed"),
    (4, "diagonal crosses is computed too"),
    (6, "different sizes"),
    (10, "grid is not square"),
    (3, "number of tiles skipped"),
    (8, "is not right"),
    ("9", "should be a number"),
])
def test_causal_tiles_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.causal_tiles(wrong)


# ex-ch10-delta: D both ways


def reference_delta():
    q, k, v, do = check.delta_inputs()
    o, P = ah.attention(q, k, v)
    dP = do @ v.T
    return P, dP, (do * o).sum(dim=-1, keepdim=True), (P * dP).sum(dim=-1, keepdim=True)


def test_delta_accepts_reference(capsys):
    check.delta_both_ways(*reference_delta())
    out = capsys.readouterr().out
    assert all(f"✓ {name}: correct" in out for name in ("P", "dP", "D_out", "D_p"))


def test_delta_rejects_mistakes():
    q, k, v, do = check.delta_inputs()
    P, dP, D_out, D_p = reference_delta()
    unscaled_o, unscaled_p = ah.attention(q, k, v, scale=1.0)
    cases = [
        ((unscaled_p, dP, D_out, D_p), "scaled scores"),
        ((torch.softmax(q @ k.T / 2, dim=0), dP, D_out, D_p), "along each row"),
        ((P, dP.T, D_out, D_p), "dO Vᵀ, in that order"),
        ((P, dP, D_out[:, 0], D_p), "keepdim=True"),
        ((P, dP, (do * unscaled_o).sum(-1, keepdim=True), D_p), "with the scale"),
        ((P, dP, (do * v).sum(-1, keepdim=True), D_p), "not by the values V"),
        ((P, dP, D_out, (P * dP).sum(dim=0)[:, None]), "not over the queries"),
        ((P, dP, D_out, (P * dP.T).sum(-1, keepdim=True)), "in that order"),
        ((P, dP, D_out, (torch.exp(q @ k.T / 2) * dP).sum(-1, keepdim=True)), "normalised weights"),
        ((P, dP, D_out, D_p + 0.1), "wrong values"),
    ]
    for args, hint in cases:
        with pytest.raises(CheckFailed, match=hint):
            check.delta_both_ways(*args)


# ex-ch10-block: the tiled backward of one block of queries


def reference_block(q_i, k, v, do_i, L_i, D_i, block):
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dks, dvs = torch.zeros_like(q_i), [], []
    for c in range(0, k.shape[0], block):
        k_j, v_j = k[c:c + block], v[c:c + block]
        p = torch.exp(q_i @ k_j.T * scale - L_i)  # (B_r, B_c)
        ds = p * (do_i @ v_j.T - D_i)
        dq = dq + ds @ k_j * scale
        dks.append(ds.T @ q_i * scale)
        dvs.append(p.T @ do_i)
    return dq, torch.cat(dks), torch.cat(dvs)


def test_block_accepts_reference(capsys):
    check.block_backward_function(reference_block)
    out = capsys.readouterr().out
    assert "✓ dq_i: correct" in out and "✓ dv on other sizes: correct" in out


def no_scale(q_i, k, v, do_i, L_i, D_i, block):
    dq, dk, dv = reference_block(q_i, k, v, do_i, L_i, D_i, block)
    return dq * math.sqrt(q_i.shape[-1]), dk * math.sqrt(q_i.shape[-1]), dv


def no_D(q_i, k, v, do_i, L_i, D_i, block):
    return reference_block(q_i, k, v, do_i, L_i, torch.zeros_like(D_i), block)


def plus_D(q_i, k, v, do_i, L_i, D_i, block):
    return reference_block(q_i, k, v, do_i, L_i, -D_i, block)


def tile_softmax(q_i, k, v, do_i, L_i, D_i, block):
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dks, dvs = torch.zeros_like(q_i), [], []
    for c in range(0, k.shape[0], block):
        k_j, v_j = k[c:c + block], v[c:c + block]
        p = torch.softmax(q_i @ k_j.T * scale, dim=-1)
        ds = p * (do_i @ v_j.T - D_i)
        dq = dq + ds @ k_j * scale
        dks.append(ds.T @ q_i * scale)
        dvs.append(p.T @ do_i)
    return dq, torch.cat(dks), torch.cat(dvs)


def by_autograd(q_i, k, v, do_i, L_i, D_i, block):
    q_i, k, v = (x.clone().requires_grad_() for x in (q_i, k, v))
    out, _ = ah.attention(q_i, k, v)
    out.backward(do_i)
    return q_i.grad, k.grad, v.grad


def by_autograd_grad(q_i, k, v, do_i, L_i, D_i, block):  # by hand, but differentiated by torch.autograd.grad
    q_i, k, v = (x.clone().requires_grad_() for x in (q_i, k, v))
    w = torch.exp(q_i @ k.T / math.sqrt(q_i.shape[-1]) - L_i)
    return torch.autograd.grad(w @ v, (q_i, k, v), do_i)


def by_flash(q_i, k, v, do_i, L_i, D_i, block):
    o, L = ah.flash.flash_forward(q_i, k, v)
    return ah.flash.flash_backward(q_i, k, v, o, L, do_i, block_k=block)


def whole_row(q_i, k, v, do_i, L_i, D_i, block):  # right numbers, but all keys at once: a (B_r, t) tile
    scale = 1 / math.sqrt(q_i.shape[-1])
    p = torch.exp(q_i @ k.T * scale - L_i)
    ds = p * (do_i @ v.T - D_i)
    return ds @ k * scale, ds.T @ q_i * scale, p.T @ do_i


def fixed_sizes(q_i, k, v, do_i, L_i, D_i, block):  # the exercise's sizes written in
    dq, dk, dv = reference_block(q_i, k, v, do_i, L_i, D_i, block)
    return dq, dk[:12], dv.reshape(12, 6)


def returns_pair(q_i, k, v, do_i, L_i, D_i, block):
    return reference_block(q_i, k, v, do_i, L_i, D_i, block)[:2]


@pytest.mark.parametrize("fn, hint", [
    (no_scale, "multiplies dQ and dK by the scale"),
    (no_D, "subtracts D_i"),
    (plus_D, "sign of D_i"),
    (tile_softmax, "softmax over one tile"),
    (by_autograd, "calls ah.attention"),
    (by_autograd_grad, "torch.autograd.grad"),
    (by_flash, "ah.flash.flash_backward"),
    (whole_row, "against all 12 keys"),
    (fixed_sizes, "other sizes"),
    (returns_pair, "three tensors"),
])
def test_block_rejects_mistakes_and_shortcuts(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.block_backward_function(fn)


def test_block_rejects_backward_without_the_books_functions():
    def backward_call(q_i, k, v, do_i, L_i, D_i, block):
        q_i, k, v = (x.clone().requires_grad_() for x in (q_i, k, v))
        w = torch.exp(q_i @ k.T / math.sqrt(q_i.shape[-1]) - L_i)
        (w @ v).backward(do_i)
        return q_i.grad, k.grad, v.grad

    with pytest.raises(CheckFailed, match="autograd"):
        check.block_backward_function(backward_call)


def test_block_rejects_torch_func():
    def via_func(q_i, k, v, do_i, L_i, D_i, block):  # autograd reached through torch.func's vjp
        _, vjp = torch.func.vjp(lambda a, b, c: torch.exp(a @ b.T / math.sqrt(a.shape[-1]) - L_i) @ c, q_i, k, v)
        return vjp(do_i)

    with pytest.raises(CheckFailed, match="autograd"):
        check.block_backward_function(via_func)


def test_delta_rejects_the_same_tensor_twice():
    P, dP, D_out, _ = reference_delta()
    for copy in (D_out, D_out[:, :]):  # the tensor itself, or a view of it
        with pytest.raises(CheckFailed, match="a second way"):
            check.delta_both_ways(P, dP, D_out, copy)


def transposed_tiles(q_i, k, v, do_i, L_i, D_i, block):  # right, in another style: (B_c, B_r) tiles, in place
    scale = q_i.shape[-1] ** -0.5
    dq, dk, dv = torch.zeros_like(q_i), torch.zeros_like(k), torch.zeros_like(v)
    for k_j, v_j, c in zip(k.split(block), v.split(block), range(0, k.shape[0], block), strict=True):
        p_t = torch.exp(torch.einsum("jd,id->ji", k_j, q_i) * scale - L_i.T)  # (B_c, B_r)
        ds_t = p_t * (v_j @ do_i.T - D_i.T)
        dq += scale * ds_t.T @ k_j
        dk[c:c + block] += scale * ds_t @ q_i
        dv[c:c + block] += p_t @ do_i
    return dq, dk, dv


def test_block_accepts_another_style(capsys):
    check.block_backward_function(transposed_tiles)
    assert "✓ dv on other sizes: correct" in capsys.readouterr().out


def test_block_rejects_a_block_size_of_its_own():
    def fixed_block(q_i, k, v, do_i, L_i, D_i, block):  # right numbers, but the exercise's block written in
        return reference_block(q_i, k, v, do_i, L_i, D_i, 5)

    with pytest.raises(CheckFailed, match="called with block=3.*right on the exercise"):
        check.block_backward_function(fixed_block)
