"""Self-checks for chapter 10's exercises (see ``attn_helpers.checks``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import attention
from ..flash import FlashAttention, flash_attention, flash_backward, flash_forward, tile_counts
from . import CheckFailed, Watch, call, check_tensor, check_value, on_cpu, on_other_sizes

__all__ = [
    "BLOCK", "BLOCK_K", "BLOCK_Q", "T", "block_backward_function", "block_inputs", "causal_tiles", "delta_both_ways",
    "delta_inputs",
]

# Exercise ex-ch10-predict: t queries and keys under a causal mask, in blocks of BLOCK_Q queries and BLOCK_K keys.
T, BLOCK_Q, BLOCK_K = 10, 4, 3


def causal_tiles(answer: object) -> None:
    """Exercise ex-ch10-predict: the number of tiles a causal pass computes for T, BLOCK_Q and BLOCK_K."""
    counts = tile_counts(T, T, BLOCK_Q, BLOCK_K, causal=True)
    rows, cols = math.ceil(T / BLOCK_Q), math.ceil(T / BLOCK_K)
    check_value(answer, counts["computed"], "n_tiles", {
        "under a causal mask the tiles entirely above the diagonal are skipped: not every tile is computed.":
            rows * cols,
        "a tile that the diagonal crosses is computed too (and masked inside); only tiles with no allowed key "
        "are skipped.": counts["computed"] - counts["masked"],
        "the blocks of queries and of keys have different sizes, so the tiles do not form a square grid with "
        "T(T + 1)/2 below the diagonal: go through the blocks of queries one by one and count the blocks of "
        "keys each one sees.": rows * (rows + 1) / 2,
        "the grid is not square (blocks of queries and of keys differ in size), so T(T + 1)/2 for the number of "
        "key blocks does not count it: go block of queries by block of queries.": cols * (cols + 1) / 2,
        "that is the number of tiles skipped; the question asks for the tiles computed.": counts["skipped"],
    }, atol=0, rtol=0)


def delta_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch10-delta: q (6, 4), k (6, 4), v (6, 5) and the gradient dO (6, 5) of the output."""
    gen = torch.Generator().manual_seed(1010)
    return (torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen), torch.randn(6, 5, generator=gen),
            torch.randn(6, 5, generator=gen))


def delta_both_ways(P: object, dP: object, D_out: object, D_p: object) -> None:
    """Exercise ex-ch10-delta: the weights P, dP = dO Vᵀ, and D as rowsum(dO ∘ O) and as rowsum(P ∘ dP)."""
    q, k, v, do = delta_inputs()
    o, p = attention(q, k, v)  # (6, 5), (6, 6)
    unscaled = attention(q, k, v, scale=1.0)
    check_tensor(P, p, "P", {
        "the weights are the softmax of the scaled scores q kᵀ / √d_k.": unscaled[1],
        "the softmax runs over the keys of each query (along each row, dim=-1).": torch.softmax(
            q @ k.T / 2, dim=0),
    })
    dp = do @ v.T  # (6, 6)
    check_tensor(dP, dp, "dP", {
        "dP[i, j] is dO[i] · V[j]: the product dO Vᵀ, in that order (V dOᵀ is its transpose).": dp.T,
    })
    D = (do * o).sum(dim=-1, keepdim=True)  # (6, 1)
    for name, answer in (("D_out", D_out), ("D_p", D_p)):
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (6,):
            raise CheckFailed(f"{name} has shape (6,); keep one column per query, shape (6, 1), so that it "
                              "broadcasts against the rows of dP: sum with keepdim=True.")
    if isinstance(D_p, torch.Tensor) and isinstance(D_out, torch.Tensor) and D_p.data_ptr() == D_out.data_ptr():
        raise CheckFailed("D_p is the very tensor D_out (or a view of it): the exercise asks for D a second way, "
                          "as rowsum(P ∘ dP) from the weights and dP, to see that the two agree.")
    check_tensor(D_out, D, "D_out", {
        "D multiplies dO by the output O of attention, not by the values V.": (do * v).sum(dim=-1, keepdim=True),
        "O is the output of attention with the scale 1/√d_k.": (do * unscaled[0]).sum(dim=-1, keepdim=True),
    })
    check_tensor(D_p, D, "D_p", {
        "D sums over the keys of each query (dim=-1), not over the queries.": (p * dp).sum(dim=0)[:, None],
        "dP[i, j] is dO[i] · V[j]: the product dO Vᵀ, in that order (V dOᵀ is its transpose).":
            (p * dp.T).sum(dim=-1, keepdim=True),
        "P is the normalised weights, not exp of the scores.":
            (torch.exp(q @ k.T / 2) * dp).sum(dim=-1, keepdim=True),
    })


# Exercise ex-ch10-block: one block of queries against t keys in blocks of BLOCK (3 on the other sizes).
BLOCK = 5
_SIZES = {"exercise": (4, 12, 8, 6, BLOCK), "other": (3, 7, 5, 2, 3)}  # (B_r, t, d_k, d_v, block)


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
    """The block's gradients, as a usual mistake computes them: 'no_scale', 'no_D', 'plus_D' or 'tile_softmax'."""
    scale = 1.0 if mistake == "no_scale" else 1 / math.sqrt(q_i.shape[-1])
    dq, dks, dvs = torch.zeros_like(q_i), [], []
    for c in range(0, k.shape[0], block):
        k_j, v_j = k[c:c + block], v[c:c + block]
        s = q_i @ k_j.T / math.sqrt(q_i.shape[-1])
        p = torch.softmax(s, dim=-1) if mistake == "tile_softmax" else torch.exp(s - L_i)
        ds = p * (do_i @ v_j.T - {"no_D": 0, "plus_D": -D_i}.get(mistake, D_i))
        dq, dks, dvs = dq + ds @ k_j * scale, [*dks, ds.T @ q_i * scale], [*dvs, p.T @ do_i]
    return dq, torch.cat(dks), torch.cat(dvs)


def _expected(q_i: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do_i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Autograd's gradients of the plain formula: what this block of queries adds to dQ, dK and dV."""
    q_i, k, v = (x.detach().double().requires_grad_() for x in (q_i, k, v))
    o_i, _ = attention(q_i, k, v)
    return tuple(g.float() for g in torch.autograd.grad(o_i, (q_i, k, v), do_i.double()))


_AUTOGRAD = {torch.autograd.grad: "torch.autograd.grad", torch.autograd.backward: "autograd (.backward())",
             torch.autograd.graph._engine_run_backward: "autograd's backward pass",
             flash_backward: "ah.flash.flash_backward", flash_attention: "ah.flash.flash_attention",
             FlashAttention.forward: "ah.flash.FlashAttention", attention: "ah.attention"}
_HINT = ("loop over the blocks of keys, recompute each tile of weights from its scores and L_i, and apply the "
         "chapter's equations for the backward pass to that tile, adding what it gives to dQ_i, dK and dV.")


def _run_block(fn: Callable, inputs: tuple[torch.Tensor, ...], block: int) -> tuple[torch.Tensor, ...]:
    """``fn(*inputs, block)`` under :class:`Watch`; refused if it reaches autograd or the book's attention, holds
    a row of scores against every key, or never makes a tile of ``block`` keys."""
    b_r, t = inputs[0].shape[0], inputs[1].shape[0]
    with Watch(_AUTOGRAD) as watch:
        answer = call(fn, *(x.clone() for x in inputs), block, name="block_backward")
    if watch.called or watch.used_fused_attention():
        called = ", ".join(sorted(watch.called)) or "PyTorch's fused attention"
        raise CheckFailed(f"block_backward calls {called}, which computes the gradients (or the weights) for you: "
                          f"the exercise asks for the tiled backward by hand. Hint: {_HINT}")
    shapes = {tuple(n for n in shape if n != 1) for op in watch.ops for shape in op.outputs}
    if {(b_r, t), (t, b_r), (t, t)} & shapes:
        raise CheckFailed(f"block_backward builds a tensor of the block's {b_r} queries against all {t} keys (or "
                          "t × t), which the tiled pass never holds. Hint: go through the keys block by block, "
                          f"k[c:c + block], and keep only (B_r, block) tiles; {_HINT}")
    if not {(b_r, block), (block, b_r)} & shapes:
        raise CheckFailed(f"block_backward never makes a tile of the block's {b_r} queries against {block} keys, "
                          f"although it was called with block={block}: go through the keys `block` at a time, "
                          "with the block size the argument gives, not a number of your own.")
    if not (isinstance(answer, (tuple, list)) and len(answer) == 3):
        raise CheckFailed("block_backward should return three tensors, (dq_i, dk, dv).")
    for name, x in zip(("dq_i", "dk", "dv"), answer, strict=True):
        on_cpu(x, name)
    return tuple(answer)


def _check_block(fn: Callable, sizes: str, seed: int, label: str) -> None:
    inputs, block = _block_problem(_SIZES[sizes], seed), _SIZES[sizes][-1]
    answer = _run_block(fn, inputs, block)
    expected = _expected(*inputs[:4])
    wrong = {m: _tiled(*inputs, block, m) for m in ("no_scale", "no_D", "plus_D", "tile_softmax")}
    hints = {
        "no_scale": "S = scale · Q Kᵀ, so the chain rule multiplies dQ and dK by the scale 1/√d_k.",
        "no_D": "the softmax's Jacobian subtracts D_i = rowsum(dO_i ∘ O_i): dS = P ∘ (dP - D).",
        "plus_D": "check the sign of D_i: the softmax's Jacobian P_j(δ_jk - P_k) subtracts it from dP.",
        "tile_softmax": "a softmax over one tile normalises each block of keys on its own; the weights of the "
                        "whole row are exp(S - L), with the L that the forward pass saved.",
    }
    for n, name in enumerate(("dq_i", "dk", "dv")):
        check_tensor(answer[n], expected[n], f"{name}{label}",
                     {hints[m]: w[n] for m, w in wrong.items()})


def block_backward_function(fn: Callable) -> None:
    """Exercise ex-ch10-block: ``fn(q_i, k, v, do_i, L_i, D_i, block)`` returns one block of queries' dQ_i and its
    contributions to dK and dV, tile by tile, without autograd and without a row of scores against every key."""
    _check_block(fn, "exercise", 1011, "")
    with on_other_sizes("block_backward", "a block of other sizes (B_r = 3, t = 7, d_k = 5, d_v = 2, block = 3)",
                        "take every size from the tensors, and the block size from the argument block."):
        _check_block(fn, "other", 1012, " on other sizes")
