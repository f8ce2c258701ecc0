"""Chapter 10's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

import ast
import inspect
import json
import math
import re
from pathlib import Path

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch10 as check

ROOT = Path(__file__).resolve().parent.parent

# ex-ch10-predict: tiles computed under a causal mask


def test_causal_tiles_accepts_reference(capsys):
    check.causal_tiles(9)
    assert "✓ n_tiles: correct" in capsys.readouterr().out


def test_causal_tiles_reference_is_the_helpers_count():
    assert ah.flash.tile_counts(check.T, check.T, check.BLOCK_Q, check.BLOCK_K, causal=True)["computed"] == 9


@pytest.mark.parametrize("wrong, hint", [
    (12, "not every tile is computed"),
    (4, "diagonal crosses is computed too"),
    (6, "its last query sees, not only those its first"),  # each block of queries counted from its first query
    (5, "floor division"),  # 10 // 4 and 10 // 3 blocks, or only the masked tiles
    (10, "grid is not square"),
    (8, "last block of keys is shorter"),  # key 9, a block of its own, left out
    (3, "number of tiles skipped"),
    (55, "allowed scores"),
    (7, "is not right"),
    ("9", "should be a number"),
])
def test_causal_tiles_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.causal_tiles(wrong)


# ex-ch10-delta: D both ways, rowsum(dO ∘ O) and rowsum(P ∘ dP) tile by tile


def d_from_output(dO, o):
    return (dO * o).sum(dim=-1, keepdim=True)


def d_from_weights(q, k, v, dO, L, block):
    scale = 1 / math.sqrt(q.shape[-1])
    D = torch.zeros_like(L)
    for c in range(0, k.shape[-2], block):
        k_j, v_j = k[..., c:c + block, :], v[..., c:c + block, :]
        p = torch.exp(q @ k_j.transpose(-2, -1) * scale - L)
        D = D + (p * (dO @ v_j.transpose(-2, -1))).sum(dim=-1, keepdim=True)
    return D


def test_delta_accepts_reference(capsys):
    check.delta_both_ways(d_from_output, d_from_weights)
    out = capsys.readouterr().out
    assert all(f"✓ {name}: correct" in out for name in
               ("D_from_output", "D_from_weights", "D_from_output on other inputs", "D_from_weights on other inputs"))


def test_delta_inputs_are_the_exercises():
    q, k, v, do = check.delta_inputs()
    assert [tuple(x.shape) for x in (q, k, v, do)] == [(6, 4), (8, 4), (8, 5), (6, 5)] and 8 % check.BLOCK_D


def tiled(step=None, floor=False, replace=False, weights_only=False):
    """d_from_weights with one step done as a usual mistake does it."""
    def D_from_weights(q, k, v, dO, L, block):
        scale = 1 / math.sqrt(q.shape[-1])
        D = torch.zeros_like(L)
        for c in range(0, k.shape[-2] // block * block if floor else k.shape[-2], block):
            k_j, v_j = k[..., c:c + block, :], v[..., c:c + block, :]
            s = q @ k_j.transpose(-2, -1)
            p = step(s, scale, L) if step else torch.exp(s * scale - L)
            dp = dO @ v_j.transpose(-2, -1)
            part = p.sum(dim=-1, keepdim=True) if weights_only else (p * dp).sum(dim=-1, keepdim=True)
            D = part if replace else D + part
        return D
    return D_from_weights


def whole_rows(q, k, v, dO, L, block):  # right, but P and dP of every key at once
    P = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - L)
    return (P * (dO @ v.transpose(-2, -1))).sum(dim=-1, keepdim=True)


def rows_cut_afterwards(q, k, v, dO, L, block):  # the whole rows made first, then summed a block at a time
    P = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - L)
    dP = dO @ v.transpose(-2, -1)
    return sum((P[..., c:c + block] * dP[..., c:c + block]).sum(dim=-1, keepdim=True)
               for c in range(0, k.shape[-2], block))


def by_identity(q, k, v, dO, L, block):  # the other way, through the book's forward pass
    return d_from_output(dO, ah.flash.flash_forward(q, k, v)[0])


def by_autograd(q, k, v, dO, L, block):  # dP as autograd's gradient of the loss with respect to P
    P = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - L).requires_grad_()
    (dP,) = torch.autograd.grad(((P @ v) * dO).sum(), P)
    return (P * dP).sum(dim=-1, keepdim=True).detach()


def fixed_block(q, k, v, dO, L, block):  # right numbers, but a block size of its own
    return d_from_weights(q, k, v, dO, L, 2)


def one_query_rows(q, k, v, dO, L, block):  # a row of one query against all keys at a time
    scale = 1 / math.sqrt(q.shape[-1])
    rows = [(torch.exp(q[..., i:i + 1, :] @ k.transpose(-2, -1) * scale - L[..., i:i + 1, :])
             * (dO[..., i:i + 1, :] @ v.transpose(-2, -1))).sum(dim=-1, keepdim=True) for i in range(q.shape[-2])]
    return torch.cat(rows, dim=-2)


def d_one_query_tiles(q, k, v, dO, L, block):  # right: tiles of one query by `block` keys
    scale = 1 / math.sqrt(q.shape[-1])
    rows = []
    for i in range(q.shape[-2]):
        q_i, do_i, L_i = q[..., i:i + 1, :], dO[..., i:i + 1, :], L[..., i:i + 1, :]
        rows.append(sum((torch.exp(q_i @ k[..., c:c + block, :].transpose(-2, -1) * scale - L_i)
                         * (do_i @ v[..., c:c + block, :].transpose(-2, -1))).sum(dim=-1, keepdim=True)
                        for c in range(0, k.shape[-2], block)))
    return torch.cat(rows, dim=-2)


def test_delta_from_weights_accepts_tiles_of_one_query(capsys):
    check.delta_both_ways(d_from_output, d_one_query_tiles)
    assert "✓ D_from_weights on other inputs: correct" in capsys.readouterr().out


D_out = d_from_output(check.delta_inputs()[3], ah.flash.flash_forward(*check.delta_inputs()[:3])[0])  # a global


@pytest.mark.parametrize("fn, hint", [
    (tiled(lambda s, scale, L: torch.exp(s - L)), "need the scale"),
    (tiled(lambda s, scale, L: torch.exp((s - L) * scale)), "subtract it after scaling"),
    (tiled(lambda s, scale, L: torch.exp(s * scale)), "subtract each query's log-sum-exp"),
    (tiled(lambda s, scale, L: torch.softmax(s * scale, dim=-1)), "softmax over one tile"),
    (tiled(weights_only=True), "sums the weights alone"),
    (tiled(replace=True), "rather than replacing it"),
    (tiled(floor=True), "floor division"),
    (whole_rows, "against all 8 keys at once"),
    (rows_cut_afterwards, "against all 8 keys at once"),
    (one_query_rows, "against all 8 keys at once"),
    (by_identity, "calls ah.flash.flash_forward"),
    (by_autograd, "torch.autograd.grad"),
    (fixed_block, "never makes a tile"),
    (lambda q, k, v, dO, L, block: D_out.clone(), "reads D_out from the notebook"),  # the first way, copied
    ("not a function", "should be a function"),
])
def test_delta_from_weights_rejects_mistakes_and_shortcuts(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.delta_both_ways(d_from_output, fn)


@pytest.mark.parametrize("fn, hint", [
    (lambda dO, o: (dO * o).sum(dim=-2, keepdim=True).transpose(-2, -1), "not over the queries"),
    (lambda dO, o: (dO * o).sum(dim=-1), "without the summed dimension"),
    (lambda dO, o: dO @ o.transpose(-2, -1), "element by element"),
    (lambda dO, o: (dO * o).sum(), "a single number"),
    (lambda dO, o: (dO * o).sum(dim=1, keepdim=True), "last dimension"),  # right on 2-d inputs only
    ("not a function", "should be a function"),
])
def test_delta_from_output_rejects_mistakes(fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.delta_both_ways(fn, d_from_weights)


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


def variant(mistake):
    """The reference answer with one usual mistake, written as a learner would write it."""
    def block_backward(q_i, k, v, do_i, L_i, D_i, block):
        scale = 1 / math.sqrt(q_i.shape[-1])
        t = k.shape[0]
        dq, dks, dvs = torch.zeros_like(q_i), [], []
        stop = t // block * block if mistake == "floor" else t - block if mistake == "last_block" else t
        for c in range(0, stop, block):
            k_j, v_j = k[c:c + block], v[c:c + block]
            s = q_i @ k_j.T * (1.0 if mistake == "scores_no_scale" else scale)
            p = torch.exp(s) if mistake == "no_L" else torch.exp(s - L_i)
            dp = do_i @ v_j.T
            d = (p * dp).sum(dim=-1, keepdim=True) if mistake == "tile_D" else D_i
            ds = p * (dp - d)
            dq = ds @ k_j * scale if mistake == "dq_last" else dq + ds @ k_j * scale
            dks.append(ds.T @ q_i * scale)
            dvs.append(ds.T @ do_i if mistake == "dv_ds" else p.T @ do_i * (scale if mistake == "dv_scale" else 1))
        return dq, torch.cat(dks), torch.cat(dvs)
    return block_backward


def p_transposed(q_i, k, v, do_i, L_i, D_i, block):  # dV as P dO: the tile's rows and columns mixed up
    dq, dk, _ = reference_block(q_i, k, v, do_i, L_i, D_i, block)
    scale = 1 / math.sqrt(q_i.shape[-1])
    dvs = [torch.exp(q_i @ k[c:c + block].T * scale - L_i) @ do_i for c in range(0, k.shape[0], block)]
    return dq, dk, torch.cat(dvs)


def preallocated_floor(q_i, k, v, do_i, L_i, D_i, block):  # dK and dV filled in place; the short block dropped
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dk, dv = torch.zeros_like(q_i), torch.zeros_like(k), torch.zeros_like(v)
    for j in range(k.shape[0] // block):
        k_j, v_j = k[j * block:(j + 1) * block], v[j * block:(j + 1) * block]
        p = torch.exp(q_i @ k_j.T * scale - L_i)
        ds = p * (do_i @ v_j.T - D_i)
        dq = dq + ds @ k_j * scale
        dk[j * block:(j + 1) * block] = ds.T @ q_i * scale
        dv[j * block:(j + 1) * block] = p.T @ do_i
    return dq, dk, dv


def one_query_tiles(q_i, k, v, do_i, L_i, D_i, block):  # right: tiles of one query by `block` keys
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dk, dv = torch.zeros_like(q_i), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(q_i.shape[0]):
        for c in range(0, k.shape[0], block):
            k_j, v_j = k[c:c + block], v[c:c + block]
            p = torch.exp(k_j @ q_i[i] * scale - L_i[i])  # (B_c,)
            ds = p * (v_j @ do_i[i] - D_i[i])
            dq[i] += ds @ k_j * scale
            dk[c:c + block] += torch.outer(ds, q_i[i]) * scale
            dv[c:c + block] += torch.outer(p, do_i[i])
    return dq, dk, dv


def rows_cut_afterwards(q_i, k, v, do_i, L_i, D_i, block):  # one query against all t keys, then cut into tiles
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dk, dv = torch.zeros_like(q_i), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(q_i.shape[0]):
        row = torch.exp(k @ q_i[i] * scale - L_i[i])  # (t,): every key at once
        for c in range(0, k.shape[0], block):
            p = row[c:c + block]
            ds = p * (v[c:c + block] @ do_i[i] - D_i[i])
            dq[i] += ds @ k[c:c + block] * scale
            dk[c:c + block] += torch.outer(ds, q_i[i]) * scale
            dv[c:c + block] += torch.outer(p, do_i[i])
    return dq, dk, dv


def lse_recomputed(q_i, k, v, do_i, L_i, D_i, block):  # L_i recomputed with the book's forward pass
    _, L = ah.flash.flash_forward(q_i, k, v, block_q=q_i.shape[0], block_k=block)
    return reference_block(q_i, k, v, do_i, L, D_i, block)


def with_book_tiles(q_i, k, v, do_i, L_i, D_i, block):  # the loop taken from ah.flash.tiles
    scale = 1 / math.sqrt(q_i.shape[-1])
    dq, dks, dvs = torch.zeros_like(q_i), [], []
    for tile in ah.flash.tiles(q_i.shape[0], k.shape[0], q_i.shape[0], block):
        k_j, v_j = k[tile.cols], v[tile.cols]
        p = torch.exp(q_i @ k_j.T * scale - L_i)
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
    (variant("floor"), "floor division"),
    (variant("last_block"), "the last block of keys is shorter"),
    (preallocated_floor, "floor division"),
    (variant("scores_no_scale"), "recomputed scores need the scale"),
    (variant("tile_D"), "not over one tile's keys"),
    (variant("no_L"), "log-sum-exp L_i"),
    (variant("dq_last"), "add each tile's part"),
    (variant("dv_ds"), "dV comes from the weights P, not from dS"),
    (variant("dv_scale"), "dV takes none"),
    (p_transposed, "transposes Pᵀ and dSᵀ"),
    (rows_cut_afterwards, "cuts them into tiles afterwards"),
    (lse_recomputed, "ah.flash.flash_forward"),
    (with_book_tiles, "ah.flash.tiles"),
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


@pytest.mark.parametrize("fn", [transposed_tiles, one_query_tiles])
def test_block_accepts_another_style(fn, capsys):
    check.block_backward_function(fn)
    assert "✓ dv on other sizes: correct" in capsys.readouterr().out


def test_block_rejects_a_block_size_of_its_own():
    def fixed_block(q_i, k, v, do_i, L_i, D_i, block):  # right numbers, but the exercise's block written in
        return reference_block(q_i, k, v, do_i, L_i, D_i, 5)

    with pytest.raises(CheckFailed, match="called with block=4.*right on the exercise"):
        check.block_backward_function(fixed_block)


# no hint quotes the solution: no run of five code tokens of a solution cell appears in any text of the checks


def _tokens(text):
    return re.findall(r"\w+|[^\w\s]", text)


def _cells():
    return json.loads((ROOT / "chapters" / "10_flash_attention.ipynb").read_text())["cells"]


def _solution_code():
    code = ["".join(c["source"]) for c in _cells() if "solution" in c["metadata"].get("tags", [])]
    return "\n".join(line.split("#")[0] for cell in code for line in cell.splitlines())


def _runs(tokens):
    return {tuple(tokens[i:i + 5]) for i in range(len(tokens) - 4)}


def _check_texts():  # every string of the checks but the docstrings: the hints and messages a learner reads
    tree = ast.parse(inspect.getsource(check))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef)) and isinstance(node.body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_hint_quotes_the_solution():
    solution = _tokens(_solution_code())
    stated = _runs(_tokens("".join("".join(c["source"]) for c in _cells() if "{exercise}" in "".join(c["source"]))))
    runs = {run for run in _runs(solution) - stated  # what the exercise itself states may be repeated
            if not all(re.fullmatch(r"\w+|\.", token) for token in run)}  # an expression, not a name
    assert len(runs) > 100  # the solutions were found
    for text in _check_texts():
        words = _tokens(text)
        quoted = [" ".join(words[i:i + 5]) for i in range(len(words) - 4) if tuple(words[i:i + 5]) in runs]
        assert not quoted, (text, quoted)
    assert not any("c + block" in text or "k[c" in text for text in _check_texts())
