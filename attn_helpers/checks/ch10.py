"""Self-checks for the exercises of chapter 10 (chapter 10; see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import attention
from ..flash import FlashAttention, flash_attention, flash_backward, flash_forward, tile_counts, tiles
from ..masks import causal_mask
from . import CheckFailed, Watch, call, check_tensor, check_value, listed, on_cpu, on_other_sizes, tensors_from_outside

__all__ = [
    "BLOCK", "BLOCK_K", "BLOCK_Q", "T", "block_backward_function", "block_inputs", "causal_tiles", "delta_both_ways",
    "delta_inputs",
]

# Exercise ex-ch10-predict: t queries and keys under a causal mask, in blocks of BLOCK_Q queries and BLOCK_K keys.
T, BLOCK_Q, BLOCK_K = 10, 4, 3


def _count(t: int, block_q: int, block_k: int, first_query: bool = False, floor: bool = False) -> int:
    """Tiles a causal pass computes, counted as a usual mistake counts them: from each block's first query, or with
    the shorter last blocks dropped by floor division."""
    stop_q, stop_k = (t // block_q * block_q, t // block_k * block_k) if floor else (t, t)
    return sum(c <= (r if first_query else min(r + block_q, t) - 1)
               for r in range(0, stop_q, block_q) for c in range(0, stop_k, block_k))


def causal_tiles(answer: object) -> None:
    """Exercise ex-ch10-predict: the number of tiles a causal pass computes for T, BLOCK_Q and BLOCK_K."""
    counts = tile_counts(T, T, BLOCK_Q, BLOCK_K, causal=True)
    last_key_block = counts["computed"] - 1  # key 9 is a block of its own, seen by the last block of queries only
    check_value(answer, counts["computed"], "n_tiles", {
        "under a causal mask the tiles entirely above the diagonal are skipped: not every tile is computed.":
            counts["all"],
        "a tile that the diagonal crosses is computed too (and masked inside); only tiles with no allowed key "
        "are skipped.": counts["computed"] - counts["masked"],
        "a block of queries needs every block of keys that its last query sees, not only those its first query "
        "sees: the tiles the diagonal crosses are computed too.": _count(T, BLOCK_Q, BLOCK_K, first_query=True),
        "either you counted only the tiles the diagonal crosses (those below it are computed too), or you dropped "
        "the shorter last blocks, as floor division of T by a block size does: round the number of blocks up.":
            _count(T, BLOCK_Q, BLOCK_K, floor=True),
        "the grid is not square (blocks of queries and of keys differ in size), so T(T + 1)/2 for the number of "
        "key blocks does not count it: go block of queries by block of queries.":
            math.ceil(T / BLOCK_K) * (math.ceil(T / BLOCK_K) + 1) / 2,
        "the last block of keys is shorter (it holds only the last key), and the last block of queries sees it "
        "too: count it.": last_key_block,
        "that is the number of tiles skipped; the question asks for the tiles computed.": counts["skipped"],
        "that counts the allowed scores, one per query and key; the question asks for tiles.": T * (T + 1) / 2,
    }, atol=0, rtol=0)


def delta_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch10-delta: q (6, 4), k (6, 4), v (6, 5) and the gradient dO (6, 5) of the output."""
    gen = torch.Generator().manual_seed(1010)
    return (torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen), torch.randn(6, 5, generator=gen),
            torch.randn(6, 5, generator=gen))


def _delta_problem(seed: int) -> tuple[torch.Tensor, ...]:
    """Other inputs for the two D functions: (2, 3) heads of 5 queries under a causal mask, d_v = 7."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(2, 3, 5, n, generator=gen) for n in (4, 4, 7, 7))
    o, p = attention(q, k, v, causal_mask(5))  # (2, 3, 5, 7), (2, 3, 5, 5)
    return p, do @ v.transpose(-2, -1), do, o


_SUM_HINTS = {
    "queries": "D has one number per query: sum over the last dimension (the features of a row, or its keys), "
               "not over the queries.",
    "matrix": "D_i pairs row i with row i only: multiply element by element and sum each row; a matrix product "
              "pairs every row with every other.",
    "all": "sum each row on its own, keeping one number per query; a sum over everything gives one number.",
}


def _check_d_function(fn: object, name: str, args: tuple[torch.Tensor, torch.Tensor], expected: torch.Tensor,
                      label: str) -> None:
    """Run ``fn(*args)`` and compare with ``expected`` (..., t, 1), naming the usual ways a row sum goes wrong."""
    if not callable(fn):
        raise CheckFailed(f"{name} should be a function of two tensors, got {type(fn).__name__}.")
    if outside := tensors_from_outside(fn):
        raise CheckFailed(f"{name} reads {listed(outside)} from the notebook: compute D inside the function from "
                          "its two arguments alone, so that each way is computed on its own.")
    a, b = args
    answer = call(fn, a.clone(), b.clone(), name=name, hint="the arguments have any leading dimensions, "
                  "(..., t_q, ·): work along the last dimension.")
    product = a * b if a.shape == b.shape else None
    mistakes = {} if product is None else {
        _SUM_HINTS["queries"]: product.sum(dim=-2)[..., None],
        "keep the summed dimension, one column per query, so that D broadcasts against the rows of a tile.":
            product.sum(dim=-1)}
    if isinstance(answer, torch.Tensor) and answer.shape == (*a.shape[:-2], a.shape[-2], a.shape[-2]):
        raise CheckFailed(f"{name}{label} has shape {tuple(answer.shape)}, a number for every pair of rows. "
                          f"Hint: {_SUM_HINTS['matrix']}")
    if isinstance(answer, torch.Tensor) and answer.numel() == 1 and expected.numel() > 1:
        raise CheckFailed(f"{name}{label} is a single number. Hint: {_SUM_HINTS['all']}")
    if product is not None and isinstance(answer, torch.Tensor) and answer.shape == product.shape[:-1]:
        raise CheckFailed(f"{name}{label} has shape {tuple(answer.shape)}, without the summed dimension. Hint: keep "
                          "it, one column per query, so that D broadcasts against the rows of a tile.")
    check_tensor(answer, expected, f"{name}{label}", mistakes)


def delta_both_ways(P: object, dP: object, D_from_output: object, D_from_weights: object) -> None:
    """Exercise ex-ch10-delta: the weights P, dP = dO Vᵀ, and two functions computing D, one as rowsum(dO ∘ O) from
    dO and O, the other as rowsum(P ∘ dP) from P and dP, for any leading dimensions."""
    q, k, v, do = delta_inputs()
    o, p = attention(q, k, v)  # (6, 5), (6, 6)
    unscaled = attention(q, k, v, scale=1.0)
    check_tensor(P, p, "P", {
        "the weights are the softmax of the scaled scores q kᵀ / √d_k.": unscaled[1],
        "the softmax runs over the keys of each query (along each row, dim=-1).": torch.softmax(q @ k.T / 2, dim=0),
        "P is transposed: row i holds query i's weights over the keys (and sums to 1).": p.T,
        "P is the normalised weights, not exp of the scores.": torch.exp(q @ k.T / 2),
    })
    dp = do @ v.T  # (6, 6)
    check_tensor(dP, dp, "dP", {
        "dP[i, j] is dO[i] · V[j]: the product dO Vᵀ, in that order (V dOᵀ is its transpose).": dp.T,
        "dP takes the values V, whose rows the weights average, not the output O.": do @ o.T,
    })
    D = (do * o).sum(dim=-1, keepdim=True)  # (6, 1)
    others = _delta_problem(1013)
    D_other = (others[2] * others[3]).sum(dim=-1, keepdim=True)  # (2, 3, 5, 1)
    sizes = "other inputs: (2, 3) heads of 5 queries under a causal mask, d_v = 7"
    for name, fn, args, other_args in (("D_from_output", D_from_output, (do, o), others[2:]),
                                       ("D_from_weights", D_from_weights, (p, dp), others[:2])):
        _check_d_function(fn, name, args, D, "")
        with on_other_sizes(name, sizes, "take every size from the arguments, and sum over the last dimension."):
            _check_d_function(fn, name, other_args, D_other, " on other inputs")


# Exercise ex-ch10-block: one block of queries against t keys in blocks of BLOCK (4 on the other sizes).
BLOCK = 5
_SIZES = {"exercise": (4, 12, 8, 6, BLOCK), "other": (3, 7, 5, 2, 4)}  # (B_r, t, d_k, d_v, block)


def _block_problem(sizes: tuple[int, ...], seed: int) -> tuple[torch.Tensor, ...]:
    """q_i (B_r, d_k), k (t, d_k), v (t, d_v), dO_i (B_r, d_v), L_i and D_i (B_r, 1) of one block of queries."""
    b_r, t, d_k, d_v, _ = sizes
    gen = torch.Generator().manual_seed(seed)
    q_i, k, v = (torch.randn(n, d, generator=gen) for n, d in ((b_r, d_k), (t, d_k), (t, d_v)))
    do_i = torch.randn(b_r, d_v, generator=gen)
    o_i, L_i = flash_forward(q_i, k, v, block_q=b_r, block_k=BLOCK)
    return q_i, k, v, do_i, L_i, (do_i * o_i).sum(dim=-1, keepdim=True)


def block_inputs() -> tuple[torch.Tensor, ...]:
    """Exercise ex-ch10-block: q_i (4, 8), k (12, 8), v (12, 6), dO_i (4, 6), L_i (4, 1), D_i (4, 1)."""
    return _block_problem(_SIZES["exercise"], 1011)


def _tiled(q_i: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do_i: torch.Tensor, L_i: torch.Tensor,
           D_i: torch.Tensor, block: int, mistake: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The block's gradients as a usual mistake computes them (the names of ``_MISTAKES``); dK and dV at full
    length, zero where no tile reached."""
    scale = 1 / math.sqrt(q_i.shape[-1])
    t = k.shape[0]
    dq, dk, dv = torch.zeros_like(q_i), torch.zeros_like(k), torch.zeros_like(v)
    for c in range(0, t // block * block if mistake == "floor" else t, block):
        k_j, v_j = k[c:c + block], v[c:c + block]
        s = q_i @ k_j.T * (1.0 if mistake == "scores_no_scale" else scale)
        p = (torch.softmax(s, dim=-1) if mistake == "tile_softmax" else torch.exp(s) if mistake == "no_L"
             else torch.exp(s - L_i))
        dp = do_i @ v_j.T
        d = {"no_D": 0, "plus_D": -D_i, "tile_D": (p * dp).sum(dim=-1, keepdim=True)}.get(mistake, D_i)
        ds = p * (dp - d)
        dq_tile = ds @ k_j * (1.0 if mistake == "no_scale" else scale)
        dq = dq_tile if mistake == "dq_last" else dq + dq_tile
        dk[c:c + block] = ds.T @ q_i * (1.0 if mistake == "no_scale" else scale)
        dv[c:c + block] = (ds if mistake == "dv_ds" else p).T @ do_i * (scale if mistake == "dv_scale" else 1.0)
    return dq, dk, dv


_MISTAKES = {
    "no_scale": "S = scale · Q Kᵀ, so the chain rule multiplies dQ and dK by the scale 1/√d_k.",
    "scores_no_scale": "the recomputed scores need the scale 1/√d_k, as in the forward pass: without it the "
                       "weights are not the ones L_i normalises.",
    "no_D": "the softmax's Jacobian subtracts D_i = rowsum(dO_i ∘ O_i): dS = P ∘ (dP - D).",
    "plus_D": "check the sign of D_i: the softmax's Jacobian P_j(δ_jk - P_k) subtracts it from dP.",
    "tile_D": "D_i sums over every key of the row, not over one tile's keys: use the D_i you are given, which the "
              "output already holds, and do not recompute it tile by tile.",
    "tile_softmax": "a softmax over one tile normalises each block of keys on its own; the weights of the "
                    "whole row are exp(S - L), with the L that the forward pass saved.",
    "no_L": "exp of the scores is not yet the weights: subtract each query's log-sum-exp L_i, which normalises "
            "the row.",
    "dq_last": "dQ_i gets a part from every tile of the row: add each tile's part to what the earlier tiles gave, "
               "rather than replacing it (only the last tile's part is left).",
    "dv_ds": "dV comes from the weights P, not from dS: O = P V, so dV_j = P_ijᵀ dO_i.",
    "dv_scale": "the scale 1/√d_k sits in S only; O = P V has no scale, so dV takes none.",
    "floor": "the last block of keys is shorter than block, and it was dropped (floor division of t by block "
             "rounds it away, or the loop stops a block early): step through the keys until the last one.",
}
_TRANSPOSE = ("a tile of weights is (B_r, block), one row per query: dV_j and dK_j sum over the block's queries, "
              "so they take the transposes Pᵀ and dSᵀ, and dQ_i and dP keep them as they are.")


def _expected(q_i: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do_i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Autograd's gradients of the plain formula: what this block of queries adds to dQ, dK and dV."""
    q_i, k, v = (x.detach().double().requires_grad_() for x in (q_i, k, v))
    o_i, _ = attention(q_i, k, v)
    return tuple(g.float() for g in torch.autograd.grad(o_i, (q_i, k, v), do_i.double()))


_AUTOGRAD = {torch.autograd.grad: "torch.autograd.grad", torch.autograd.backward: "autograd (.backward())",
             torch.autograd.graph._engine_run_backward: "autograd's backward pass",
             flash_backward: "ah.flash.flash_backward", flash_attention: "ah.flash.flash_attention",
             FlashAttention.forward: "ah.flash.FlashAttention", attention: "ah.attention",
             flash_forward: "ah.flash.flash_forward", tiles: "ah.flash.tiles", tile_counts: "ah.flash.tile_counts"}
_HINT = ("loop over the blocks of keys, recompute each tile of weights from its scores and L_i, and apply the "
         "chapter's equations for the backward pass to that tile, adding what it gives to dQ_i, dK and dV.")
_FORBIDDEN = ("the exercise asks for the tiled backward by hand, from the L_i and D_i it is given, with loops of "
              "your own")


def _run_block(fn: Callable, inputs: tuple[torch.Tensor, ...], block: int) -> tuple[torch.Tensor, ...]:
    """``fn(*inputs, block)`` under :class:`Watch`; refused if it reaches autograd or the book's attention and tiles,
    holds scores of a query against every key, or never makes a tile of ``block`` keys."""
    b_r, t, d_k, d_v = inputs[0].shape[0], inputs[1].shape[0], inputs[0].shape[1], inputs[2].shape[1]
    with Watch(_AUTOGRAD) as watch:
        answer = call(fn, *(x.clone() for x in inputs), block, name="block_backward",
                      hint=lambda e: _TRANSPOSE if "multiplied" in str(e) or "must match" in str(e) else None)
    if watch.called or watch.used_fused_attention():
        called = listed(sorted(watch.called)) or "PyTorch's fused attention"
        raise CheckFailed(f"block_backward calls {called}, which computes the gradients, the weights or the tiles "
                          f"for you: {_FORBIDDEN}. Hint: {_HINT}")
    shapes = {tuple(n for n in shape if n != 1) for op in watch.ops for shape in op.outputs}
    rows = {n for n in range(1, b_r + 1) if n not in (d_k, d_v)}  # queries at a time, told apart from widths
    if {(t, t), *((n, t) for n in rows), *((t, n) for n in rows), (t,)} & shapes:
        raise CheckFailed(f"block_backward builds scores of a query against all {t} keys at once (a row, or the "
                          "block's rows), which the tiled pass never holds, even if it cuts them into tiles "
                          f"afterwards. Hint: go through the keys a block at a time and compute only tiles of "
                          f"queries by `block` keys; {_HINT}")
    if not {*((n, block) for n in range(2, b_r + 1)), *((block, n) for n in range(2, b_r + 1)), (block,)} & shapes:
        raise CheckFailed(f"block_backward never makes a tile of queries against {block} keys, although it was "
                          f"called with block={block}: go through the keys `block` at a time, with the block size "
                          "the argument gives, not a number of your own.")
    if not (isinstance(answer, (tuple, list)) and len(answer) == 3):
        raise CheckFailed("block_backward should return three tensors, (dq_i, dk, dv).")
    for name, x in zip(("dq_i", "dk", "dv"), answer, strict=True):
        on_cpu(x, name)
    return tuple(answer)


def _check_block(fn: Callable, sizes: str, seed: int, label: str) -> None:
    inputs, block = _block_problem(_SIZES[sizes], seed), _SIZES[sizes][-1]
    answer = _run_block(fn, inputs, block)
    t = inputs[1].shape[0]
    for name, x in zip(("dk", "dv"), answer[1:], strict=True):
        if isinstance(x, torch.Tensor) and x.ndim == 2 and t // block * block <= x.shape[0] < t:
            raise CheckFailed(f"{name}{label} has {x.shape[0]} rows, not one for each of the {t} keys. "
                              f"Hint: {_MISTAKES['floor']}")
    expected = _expected(*inputs[:4])
    wrong = {m: _tiled(*inputs, block, m) for m in _MISTAKES}
    for n, name in enumerate(("dq_i", "dk", "dv")):
        check_tensor(answer[n], expected[n], f"{name}{label}", {_MISTAKES[m]: w[n] for m, w in wrong.items()})


def block_backward_function(fn: Callable) -> None:
    """Exercise ex-ch10-block: ``fn(q_i, k, v, do_i, L_i, D_i, block)`` returns one block of queries' dQ_i and its
    contributions to dK and dV, tile by tile, without autograd and without a row of scores against every key."""
    _check_block(fn, "exercise", 1011, "")
    with on_other_sizes("block_backward", "a block of other sizes (B_r = 3, t = 7, d_k = 5, d_v = 2, block = 4)",
                        "take every size from the tensors, and the block size from the argument block."):
        _check_block(fn, "other", 1012, " on other sizes")
