"""Self-checks for the exercises of chapter 10 (chapter 10; see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import attention
from ..flash import FlashAttention, flash_attention, flash_backward, flash_forward, tile_counts, tiles
from . import CheckFailed, Watch, call, check_tensor, check_value, listed, on_cpu, on_other_sizes, tensors_from_outside

__all__ = [
    "BLOCK", "BLOCK_D", "BLOCK_K", "BLOCK_Q", "T", "block_backward_function", "block_inputs", "causal_tiles",
    "delta_both_ways", "delta_inputs",
]

_AUTOGRAD = {torch.autograd.grad: "torch.autograd.grad", torch.autograd.backward: "autograd (.backward())",
             torch.autograd.graph._engine_run_backward: "autograd's backward pass",
             flash_backward: "ah.flash.flash_backward", flash_attention: "ah.flash.flash_attention",
             FlashAttention.forward: "ah.flash.FlashAttention", attention: "ah.attention",
             flash_forward: "ah.flash.flash_forward", tiles: "ah.flash.tiles", tile_counts: "ah.flash.tile_counts"}
_HINT = ("loop over the blocks of keys, recompute each tile of weights from its scores and L_i, and apply the "
         "chapter's equations for the backward pass to that tile, adding what it gives to dQ_i, dK and dV.")
_FORBIDDEN = ("the exercise asks for the tiled backward by hand, from the L_i and D_i it is given, with loops of "
              "your own")


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


# Exercise ex-ch10-delta: 6 queries against 8 keys, D from the weights in blocks of BLOCK_D keys.
BLOCK_D = 3
_DELTA_SIZES = {"exercise": ((), 6, 8, 4, 5, BLOCK_D), "other": ((2, 3), 5, 7, 4, 3, 2)}  # lead, t_q, t_k, d_k, d_v


def delta_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch10-delta: q (6, 4), k (8, 4), v (8, 5) and the gradient dO (6, 5) of the output."""
    return _delta_problem("exercise", 1010)


def _delta_problem(sizes: str, seed: int) -> tuple[torch.Tensor, ...]:
    """q (..., t_q, d_k), k (..., t_k, d_k), v (..., t_k, d_v) and dO (..., t_q, d_v) of the given sizes."""
    lead, t_q, t_k, d_k, d_v, _ = _DELTA_SIZES[sizes]
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*lead, n, d, generator=gen) for n, d in ((t_q, d_k), (t_k, d_k), (t_k, d_v), (t_q, d_v)))


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


def _d_tiled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, L: torch.Tensor, block: int,
             mistake: str) -> torch.Tensor:
    """rowsum(P ∘ dP) tile by tile, as a usual mistake computes it (the names of ``_D_MISTAKES``)."""
    scale = 1 / math.sqrt(q.shape[-1])
    t_k = k.shape[-2]
    D = torch.zeros_like(L)  # (..., t_q, 1)
    for c in range(0, t_k // block * block if mistake == "floor" else t_k, block):
        k_j, v_j = k[..., c:c + block, :], v[..., c:c + block, :]
        s = q @ k_j.transpose(-2, -1)  # (..., t_q, B_c), unscaled
        p = {"no_scale": torch.exp(s - L), "scale_outside": torch.exp((s - L) * scale),
             "no_L": torch.exp(s * scale), "tile_softmax": torch.softmax(s * scale, dim=-1)}.get(
            mistake, torch.exp(s * scale - L))
        dp = do @ v_j.transpose(-2, -1)  # (..., t_q, B_c)
        part = p.sum(dim=-1, keepdim=True) if mistake == "no_dP" else (p * dp).sum(dim=-1, keepdim=True)
        D = part if mistake == "last_tile" else D + part
    return D


_D_MISTAKES = {
    "no_scale": "the recomputed scores need the scale 1/√d_k, as in the forward pass: without it the weights are "
                "not the ones L normalises.",
    "scale_outside": "the scale multiplies the scores only; L is already the log-sum-exp of the scaled scores, so "
                     "subtract it after scaling.",
    "no_L": "exp of the scores is not yet the weights: subtract each query's log-sum-exp L, which normalises the "
            "whole row.",
    "tile_softmax": "a softmax over one tile normalises each block of keys on its own; the weights of the whole row "
                    "are exp(S - L), with the L of the forward pass.",
    "no_dP": "that sums the weights alone (each row to 1): multiply each tile of P by the same tile of dP = dO Vᵀ "
             "before summing.",
    "last_tile": "every tile adds its part of each row's sum: add each tile's row sums to what the earlier tiles "
                 "gave, rather than replacing it (only the last tile's part is left).",
    "floor": "the last block of keys is shorter than block, and it was dropped (floor division of t by block rounds "
             "it away, or the loop stops a block early): step through the keys until the last one.",
}
_VIEWS = {"alias", "as_strided", "chunk", "detach", "diagonal", "expand", "narrow", "permute", "select", "slice",
          "split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold", "unsqueeze", "view",
          "_unsafe_view", "_reshape_alias", "lift_fresh"}  # operators that only describe memory already there


def _run_d_from_weights(fn: Callable, inputs: tuple[torch.Tensor, ...], block: int, label: str) -> torch.Tensor:
    """``fn(q, k, v, dO, L, block)`` under :class:`Watch`: refused if it reaches autograd, the book's attention or
    tiles, makes a tensor against every key, or never a tile of ``block`` keys."""
    q, k, v = inputs[:3]
    t_k, widths = k.shape[-2], {q.shape[-1], v.shape[-1]}
    with Watch(_AUTOGRAD) as watch:
        answer = call(fn, *(x.clone() for x in inputs), block, name="D_from_weights",
                      hint="the arguments have any leading dimensions, (..., t, ·): slice the keys along dimension "
                           "-2 and transpose the last two dimensions.")
    if watch.called or watch.used_fused_attention():
        called = ", ".join(sorted(watch.called)) or "PyTorch's fused attention"
        raise CheckFailed(f"D_from_weights calls {called}, which computes the weights, their gradient or the tiles "
                          "for you: the exercise asks for the tiles by hand, from the L it is given. Hint: go through "
                          "the keys a block at a time, recompute each tile of weights from its scores and L, and sum "
                          "P ∘ dP over the tile's keys.")
    made = [shape for op in watch.ops if op.name not in _VIEWS for shape in op.outputs]
    if any(shape[-1] == t_k and (len(shape) < 2 or shape[-2] not in widths) for shape in made if shape):
        raise CheckFailed(f"D_from_weights{label} makes a tensor against all {t_k} keys at once (scores, weights or "
                          "dP of a whole row), which a tiled pass never holds, even if it cuts it into tiles "
                          "afterwards. Hint: slice a block of keys and values first, and compute only tiles of the "
                          "queries against `block` keys.")
    if not any(shape[-1] == block or (len(shape) >= 2 and shape[-2] == block) for shape in made if shape):
        raise CheckFailed(f"D_from_weights{label} never makes a tile of queries against {block} keys, although "
                          f"it was called with block={block}: go through the keys `block` at a time, with the block "
                          "size the argument gives, not a number of your own.")
    return answer


def _delta_case(sizes: str, seed: int) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO, the output O, L and the expected D = rowsum(dO ∘ O) (..., t_q, 1) of one problem."""
    q, k, v, do = _delta_problem(sizes, seed)
    o, L = flash_forward(q, k, v)  # (..., t_q, d_v), (..., t_q, 1)
    return q, k, v, do, o, L, (do * o).sum(dim=-1, keepdim=True)


def _check_from_weights(fn: Callable, sizes: str, seed: int, label: str) -> None:
    q, k, v, do, _, L, D = _delta_case(sizes, seed)
    block = _DELTA_SIZES[sizes][-1]
    answer = _run_d_from_weights(fn, (q, k, v, do, L), block, label)
    check_tensor(answer, D, f"D_from_weights{label}",
                 {hint: _d_tiled(q, k, v, do, L, block, m) for m, hint in _D_MISTAKES.items()})


def delta_both_ways(D_from_output: object, D_from_weights: object) -> None:
    """Exercise ex-ch10-delta: ``D_from_output(dO, O)`` as rowsum(dO ∘ O), and ``D_from_weights(q, k, v, dO, L,
    block)`` as rowsum(P ∘ dP), tile by tile, for any leading dimensions."""
    if not callable(D_from_weights):
        raise CheckFailed(f"D_from_weights should be a function, got {type(D_from_weights).__name__}.")
    if outside := tensors_from_outside(D_from_weights):
        raise CheckFailed(f"D_from_weights reads {', '.join(outside)} from the notebook: compute D inside the "
                          "function from its arguments alone, so that each way is computed on its own.")
    _, _, _, do, o, _, D = _delta_case("exercise", 1010)
    _check_d_function(D_from_output, "D_from_output", (do, o), D, "")
    _check_from_weights(D_from_weights, "exercise", 1010, "")
    lead, t_q, t_k, d_k, d_v, block = _DELTA_SIZES["other"]
    hint = "take every size from the arguments, and work along the last dimensions."
    _, _, _, do, o, _, D = _delta_case("other", 1013)
    with on_other_sizes("D_from_output", f"{lead} heads of {t_q} queries, d_v = {d_v}", hint):
        _check_d_function(D_from_output, "D_from_output", (do, o), D, " on other inputs")
    with on_other_sizes("D_from_weights", f"{lead} heads of {t_q} queries and {t_k} keys, d_k = {d_k}, d_v = {d_v}, "
                        f"block = {block}", hint):
        _check_from_weights(D_from_weights, "other", 1013, " on other inputs")


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
