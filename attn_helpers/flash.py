"""FlashAttention from scratch: exact attention in tiles, forward and backward (chapter 10).

The queries are cut into blocks of ``block_q`` rows and the keys and values into blocks of ``block_k``.
For each block of queries the forward pass walks through the blocks of keys with chapter 6's running
maximum ``m``, running sum ``l`` and output accumulator, and keeps, per query, the log-sum-exp
``L = m + log l`` of its scores. The backward pass recomputes each tile of weights from ``q``, ``k`` and
``L`` instead of storing them: no tensor of ``t_q × t_k`` numbers exists in either pass. With
``causal=True`` the tiles that lie entirely above the diagonal are skipped. Passing an ``ah.traffic.Traffic``
counts the numbers the loops move between slow and fast memory (Dao et al., 2022, Theorem 2). Inputs in 16 bits
are computed in float32, as real kernels accumulate ``m``, ``ℓ`` and the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from . import validate
from .attention import attention
from .merge import finite_or_zero  # -inf -> 0 (chapter 9)
from .modules import SelfAttentionHead
from .traffic import Traffic
from .training import train_copy_task

__all__ = [
    "Tile", "tiles", "tile_counts", "tile_scores", "flash_forward", "flash_backward", "FlashAttention",
    "flash_attention", "CopyHead", "copy_task_both_ways", "plot_tiles",
]


@dataclass(frozen=True)
class Tile:
    """One tile of the score matrix: query rows ``rows``, key columns ``cols``, and whether part of it is masked
    (chapter 10)."""

    rows: slice
    cols: slice
    masked: bool


def tiles(t_q: int, t_k: int, block_q: int, block_k: int, causal: bool = False) -> Iterator[Tile]:
    """The tiles a tiled pass computes, block of queries by block of keys (chapter 10).

    With ``causal`` the triangle is aligned at the bottom right, as in ``ah.causal_mask(t_q, t_k)``: query
    ``i`` sees keys ``0 … i + t_k - t_q``. A tile whose keys all come after its last query's is skipped; a
    tile that the diagonal crosses is computed and marked ``masked``. The last blocks may be shorter.
    """
    for r in range(0, t_q, block_q):
        yield from _row_of_tiles(slice(r, min(r + block_q, t_q)), t_q, t_k, block_k, causal)


def _row_of_tiles(rows: slice, t_q: int, t_k: int, block_k: int, causal: bool) -> Iterator[Tile]:
    """The tiles of one block of queries ``rows``, from the first block of keys to the last one it may see."""
    shift = t_k - t_q  # query i sits at position i + shift
    for c in range(0, t_k, block_k):
        cols = slice(c, min(c + block_k, t_k))
        if causal and cols.start > rows.stop - 1 + shift:
            return  # this block of keys, and every later one, is in the future of every query of the block
        yield Tile(rows, cols, causal and cols.stop - 1 > rows.start + shift)


def tile_counts(t_q: int, t_k: int, block_q: int, block_k: int, causal: bool = False) -> dict[str, int]:
    """How many tiles a tiled pass computes, masks and skips: ``{"computed", "masked", "skipped", "all"}``
    (chapter 10)."""
    validate.integer(block_q, "block_q", minimum=1)
    validate.integer(block_k, "block_k", minimum=1)
    validate.integer(t_q, "t_q", minimum=1)
    validate.integer(t_k, "t_k", minimum=1)
    done = list(tiles(t_q, t_k, block_q, block_k, causal))
    every = math.ceil(t_q / block_q) * math.ceil(t_k / block_k)
    masked = sum(tile.masked for tile in done)
    return {"computed": len(done), "masked": masked, "skipped": every - len(done), "all": every}


def tile_scores(q_i: torch.Tensor, k_j: torch.Tensor, scale: float, tile: Tile, shift: int,
                mask: torch.Tensor | None) -> torch.Tensor:
    """One tile of scores ``q_i k_jᵀ · scale`` ``(..., B_r, B_c)``, -inf where the causal triangle (a key after
    query + ``shift``) or ``mask`` blocks a key (chapter 10)."""
    s = (q_i @ k_j.transpose(-2, -1)) * scale  # (..., B_r, B_c)
    if tile.masked:  # the diagonal crosses this tile: key j is allowed for query i when j <= i + shift
        i = torch.arange(tile.rows.start, tile.rows.stop)[:, None]
        j = torch.arange(tile.cols.start, tile.cols.stop)[None, :]
        s = torch.where(j <= i + shift, s, -math.inf)
    if mask is not None:
        s = torch.where(mask[..., tile.rows, tile.cols], s, -math.inf)
    return s


def flash_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False,
    block_q: int = 64, block_k: int = 64, scale: float | None = None, traffic: Traffic | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention in tiles: returns the output ``O`` ``(..., t_q, d_v)`` and ``L`` ``(..., t_q, 1)`` (chapter 10).

    q ``(..., t_q, d_k)``, k ``(..., t_k, d_k)``, v ``(..., t_k, d_v)`` with the same leading dimensions;
    ``mask`` (bool, True = may attend) broadcasts to ``(..., t_q, t_k)``. ``L = m + log l`` is each query's
    log-sum-exp of its scores (``-inf`` for a query with no allowed key, whose output is 0). Equal to
    ``ah.attention(q, k, v, mask)[0]``, but only a ``(block_q, block_k)`` tile of scores exists at a time.
    """
    scale, mask = validate.tiled_attention_args(q, k, v, mask, causal, block_q, block_k, scale)  # mask: (..., t_q, t_k)
    t_q, t_k, shift = q.shape[-2], k.shape[-2], k.shape[-2] - q.shape[-2]
    traffic = Traffic() if traffic is None else traffic  # counts what moves; nobody reads it unless passed
    dtype, work = q.dtype, torch.promote_types(q.dtype, torch.float32)  # 16-bit inputs: m, l and acc in float32
    q, k, v = q.to(work), k.to(work), v.to(work)
    outputs, lses = [], []
    for r in range(0, t_q, block_q):  # one block of queries at a time
        rows = slice(r, min(r + block_q, t_q))
        q_i = q[..., rows, :]  # (..., B_r, d_k)
        m_i = torch.full((*q_i.shape[:-1], 1), -math.inf, dtype=work, device=q.device)  # (..., B_r, 1): max
        l_i = torch.zeros_like(m_i)  # (..., B_r, 1): running sum of exp(s - m_i)
        acc = torch.zeros((*q_i.shape[:-1], v.shape[-1]), dtype=work, device=q.device)  # (..., B_r, d_v)
        traffic.read(q_i)
        for tile in _row_of_tiles(rows, t_q, t_k, block_k, causal):  # its blocks of keys, in order
            k_j, v_j = k[..., tile.cols, :], v[..., tile.cols, :]  # (..., B_c, d_k), (..., B_c, d_v)
            traffic.read(k_j, v_j, *_mask_tile(mask, tile))
            s = tile_scores(q_i, k_j, scale, tile, shift, mask)  # (..., B_r, B_c)
            traffic.hold(q_i, k_j, v_j, s, acc, m_i, l_i)  # what fast memory holds at this step
            m_new = torch.maximum(m_i, s.amax(dim=-1, keepdim=True))  # (..., B_r, 1)
            p = torch.exp(s - finite_or_zero(m_new))  # (..., B_r, B_c), 0 where blocked
            alpha = torch.exp(m_i - finite_or_zero(m_new))  # rescales what was summed against the old maximum
            l_i, acc, m_i = alpha * l_i + p.sum(dim=-1, keepdim=True), alpha * acc + p @ v_j, m_new
            traffic.state(tile, s, alpha, m_i, l_i, acc)  # for a counter that records the walk
        o_i = acc / torch.where(l_i == 0, torch.ones_like(l_i), l_i)  # (..., B_r, d_v); 0 for a query with no key
        L_i = m_i + torch.log(l_i)  # (..., B_r, 1): log-sum-exp of the scores, -inf for a query with no key
        outputs, lses = [*outputs, o_i.to(dtype)], [*lses, L_i]
        traffic.write(o_i, L_i)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-2)  # (..., t_q, d_v), (..., t_q, 1)


def _mask_tile(mask: torch.Tensor | None, tile: Tile) -> list[torch.Tensor]:
    """The part of ``mask`` a tile reads: ``[]`` without a mask."""
    return [] if mask is None else [mask[..., tile.rows, tile.cols]]


def flash_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, L: torch.Tensor, do: torch.Tensor,
    mask: torch.Tensor | None = None, causal: bool = False, block_q: int = 64, block_k: int = 64,
    scale: float | None = None, keys_outside: bool = True, traffic: Traffic | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dQ, dK, dV)`` of attention in tiles, from the forward pass's ``O`` and ``L`` (chapter 10).

    ``do`` ``(..., t_q, d_v)`` is the gradient of the loss with respect to the output ``o``. Each tile
    recomputes ``P = exp(S - L)``; with ``D = rowsum(dO ∘ O)``: ``dV = Pᵀ dO``, ``dP = dO Vᵀ``,
    ``dS = P ∘ (dP - D)``, ``dQ = scale · dS K``, ``dK = scale · dSᵀ Q``, summed over the tiles. With
    ``keys_outside`` (FlashAttention-1 and -2) the loop over blocks of keys is the outer one: ``dK_j`` and ``dV_j``
    stay in fast memory while each ``dQ_i`` is read and written back; otherwise the queries are outside, as in the
    forward pass. Both orders give the same gradients; ``traffic`` counts what each moves, and with ``M`` refuses
    a step that holds more (both blocks, their gradients, ``dO_i``, ``L_i``, ``D_i`` and the tiles ``P`` and ``dS``).
    """
    scale, mask = validate.tiled_attention_args(q, k, v, mask, causal, block_q, block_k, scale)  # mask: (..., t_q, t_k)
    if o.shape != do.shape or o.shape != (*q.shape[:-1], v.shape[-1]) or L.shape != (*q.shape[:-1], 1):
        raise ValueError(f"o and do must have the output's shape {(*q.shape[:-1], v.shape[-1])} and L "
                         f"{(*q.shape[:-1], 1)}, got o {tuple(o.shape)}, do {tuple(do.shape)}, L {tuple(L.shape)}: "
                         "pass what flash_forward returned for these q, k and v.")
    validate.flag(keys_outside, "keys_outside")
    traffic = Traffic() if traffic is None else traffic
    t_q, t_k, shift = q.shape[-2], k.shape[-2], k.shape[-2] - q.shape[-2]
    dtypes, work = (q.dtype, k.dtype, v.dtype), torch.promote_types(q.dtype, torch.float32)
    q, k, v, o, L, do = (x.to(work) for x in (q, k, v, o, L, do))
    D = (do * o).sum(dim=-1, keepdim=True)  # (..., t_q, 1): rowsum(dO ∘ O) = rowsum(P ∘ dP)
    traffic.read(do, o)
    traffic.write(D)
    dq = {r: torch.zeros_like(q[..., r:r + block_q, :]) for r in range(0, t_q, block_q)}  # dQ by block of queries
    dk = {c: torch.zeros_like(k[..., c:c + block_k, :]) for c in range(0, t_k, block_k)}  # dK by block of keys
    dv = {c: torch.zeros_like(v[..., c:c + block_k, :]) for c in range(0, t_k, block_k)}  # dV by block of keys
    done = list(tiles(t_q, t_k, block_q, block_k, causal))

    def add_tile(tile: Tile) -> None:  # equation (eq-ch10-ds) on one tile, added to dQ_i, dK_j and dV_j
        r, c = tile.rows.start, tile.cols.start
        q_i, k_j, v_j = q[..., tile.rows, :], k[..., tile.cols, :], v[..., tile.cols, :]
        do_i, L_i, D_i = do[..., tile.rows, :], L[..., tile.rows, :], D[..., tile.rows, :]
        s = tile_scores(q_i, k_j, scale, tile, shift, mask)  # (..., B_r, B_c)
        p = torch.exp(s - finite_or_zero(L_i))  # (..., B_r, B_c): P, recomputed
        dv[c] = dv[c] + p.transpose(-2, -1) @ do_i  # (..., B_c, d_v)
        dp = do_i @ v_j.transpose(-2, -1)  # (..., B_r, B_c)
        ds = p * (dp - D_i)  # (..., B_r, B_c)
        traffic.hold(q_i, do_i, L_i, D_i, dq[r], k_j, v_j, dk[c], dv[c], p, ds)  # fast memory, in either order
        dq[r] = dq[r] + (ds @ k_j) * scale  # (..., B_r, d_k)
        dk[c] = dk[c] + (ds.transpose(-2, -1) @ q_i) * scale  # (..., B_c, d_k)

    def queries(rows: slice) -> tuple[torch.Tensor, ...]:  # what a tile needs of its block of queries
        return q[..., rows, :], do[..., rows, :], L[..., rows, :], D[..., rows, :]

    if keys_outside:  # K_j, V_j, dK_j, dV_j stay in fast memory; Q_i, dO_i, L_i, D_i come in, dQ_i goes and comes back
        for c in dk:
            traffic.read(k[..., c:c + block_k, :], v[..., c:c + block_k, :])
            for tile in (tile for tile in done if tile.cols.start == c):
                traffic.read(*queries(tile.rows), dq[tile.rows.start], *_mask_tile(mask, tile))
                add_tile(tile)
                traffic.write(dq[tile.rows.start])
            traffic.write(dk[c], dv[c])
    else:  # Q_i, dO_i, L_i, D_i, dQ_i stay; K_j, V_j come in, dK_j and dV_j go and come back
        for r in dq:
            traffic.read(*queries(slice(r, r + block_q)))
            for tile in (tile for tile in done if tile.rows.start == r):
                c = tile.cols.start
                traffic.read(k[..., tile.cols, :], v[..., tile.cols, :], dk[c], dv[c], *_mask_tile(mask, tile))
                add_tile(tile)
                traffic.write(dk[c], dv[c])
            traffic.write(dq[r])
    return tuple(torch.cat(list(g.values()), dim=-2).to(dtype) for g, dtype in zip((dq, dk, dv), dtypes, strict=True))


class FlashAttention(torch.autograd.Function):
    """Attention whose forward and backward passes are the tiled ones (chapter 10).

    Saves only ``q``, ``k``, ``v``, the output and ``L`` for the backward pass. Call it through
    :func:`flash_attention`.
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                causal: bool, block_q: int, block_k: int, scale: float | None) -> torch.Tensor:
        """The output of :func:`flash_forward`; saves ``q``, ``k``, ``v``, the output and ``L``."""
        o, L = flash_forward(q, k, v, mask, causal, block_q, block_k, scale)
        ctx.save_for_backward(q, k, v, o, L)
        ctx.settings = (mask, causal, block_q, block_k, scale)
        return o

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """``(dq, dk, dv)`` from :func:`flash_backward`, and no gradient for the settings. Once differentiable only."""
        if torch.is_grad_enabled():  # create_graph=True: autograd would differentiate this backward pass again
            raise RuntimeError("flash_attention has no second derivative: its backward pass is written by hand and "
                               "autograd cannot differentiate it, so create_graph=True (a gradient of a gradient, "
                               "gradgradcheck) would come out wrong. Use ah.attention where you need one.")
        q, k, v, o, L = ctx.saved_tensors
        dq, dk, dv = flash_backward(q, k, v, o, L, do, *ctx.settings)
        return dq, dk, dv, None, None, None, None, None


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False,
    block_q: int = 64, block_k: int = 64, scale: float | None = None,
) -> torch.Tensor:
    """The output of attention ``(..., t_q, d_v)``, differentiable, computed in tiles both ways (chapter 10).

    Takes what :func:`flash_forward` takes; gradients come from :func:`flash_backward`.
    """
    return FlashAttention.apply(q, k, v, mask, causal, block_q, block_k, scale)


class CopyHead(SelfAttentionHead):
    """Chapter 4's copy-task head with the attention function as a setting: ``attend(q, k, v)`` returns the output
    ``(b, t, d_v)``; the input is cast to the head's precision (chapter 10)."""

    def __init__(self, attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__(10 + 8, 8, d_v=10)  # one-hot token and position in, one score per token out
        self.attend = attend

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        x = x.to(self.W_q.weight.dtype)  # (b, t, d_model), in the head's precision
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # (b, t, d_k), (b, t, d_k), (b, t, d_v)
        return self.attend(q, k, v), None  # (b, t, d_v); no weights to return


def copy_task_both_ways(seed: int = 0, steps: int = 100, block: int = 3) -> tuple[pd.DataFrame, dict[str, float]]:
    """Train a :class:`CopyHead` in float64 on chapter 4's copy task twice, from the same initial weights (drawn with
    ``seed``) and batches: once with ``ah.attention``, once with :func:`flash_attention` in tiles of
    ``block × block`` (chapter 10). Returns each step's loss ``(steps, 2)``, one column per run, and each run's
    accuracy on 1,000 fresh sequences."""
    validate.integer(seed, "seed", minimum=0)
    runs = {"ah.attention": lambda q, k, v: attention(q, k, v)[0],
            "flash_attention": lambda q, k, v: flash_attention(q, k, v, block_q=block, block_k=block)}
    losses, accuracy = {}, {}
    for name, attend in runs.items():
        with torch.random.fork_rng(devices=[]):  # the same initial weights for both, and the caller's generator kept
            torch.manual_seed(seed)
            head = CopyHead(attend).double()
        run = train_copy_task(head, steps=steps, seed=seed, progress=False)
        losses[name], accuracy[name] = run.losses, run.accuracy
    return pd.DataFrame(losses, index=pd.RangeIndex(1, steps + 1, name="step")), accuracy


def plot_tiles(t_q: int, t_k: int, block_q: int, block_k: int, causal: bool = True, ax: Any = None) -> Any:
    """Draw the score matrix cut into tiles: allowed scores dark, blocked ones light, and each tile outlined and
    labelled as computed, masked (computed, and the diagonal crosses it) or skipped; the title counts them as
    :func:`tile_counts` does, the masked tiles among the computed ones (chapter 10). Returns the Axes."""
    import matplotlib.pyplot as plt  # only when a figure is drawn
    from matplotlib.patches import Rectangle

    counts = tile_counts(t_q, t_k, block_q, block_k, causal)  # checks the sizes
    shift = t_k - t_q
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    allowed = (torch.arange(t_k)[None, :] <= torch.arange(t_q)[:, None] + shift) if causal else torch.ones(t_q, t_k)
    ax.imshow(allowed.float().numpy(), cmap="Greys", vmin=-0.3, vmax=1.6, extent=(0, t_k, t_q, 0))
    done = {(tile.rows.start, tile.cols.start): tile for tile in tiles(t_q, t_k, block_q, block_k, causal)}
    styles = {"computed": ("tab:blue", "-"), "masked": ("tab:orange", "-"), "skipped": ("0.45", ":")}
    for r in range(0, t_q, block_q):
        for c in range(0, t_k, block_k):
            tile = done.get((r, c))
            kind = "skipped" if tile is None else "masked" if tile.masked else "computed"
            h, w = min(block_q, t_q - r), min(block_k, t_k - c)
            color, line = styles[kind]
            ax.add_patch(Rectangle((c + 0.15, r + 0.15), w - 0.3, h - 0.3, fill=False, edgecolor=color,
                                   linestyle=line, linewidth=2.5))
            ax.text(c + w / 2, r + h / 2, kind, ha="center", va="center", fontsize=9, color=color,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    ax.set_xticks(range(0, t_k + 1, block_k))
    ax.set_yticks(range(0, t_q + 1, block_q))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"{t_q} queries × {t_k} keys in tiles of {block_q} × {block_k}:\n{counts['computed']} computed "
                 f"({counts['masked']} of them masked), {counts['skipped']} skipped", fontsize=11)
    return ax
