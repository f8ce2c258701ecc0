"""Linear attention: a feature map in place of the softmax, and a state of fixed size (chapter 12).

With a feature map φ (here ``elu(x) + 1``, positive) the weight of key j for query i is
``φ(q_i)·φ(k_j)`` instead of ``exp(q_i·k_j)``, and the sums over keys can be carried forward
as a state: ``S_t = γ S_{t-1} + φ(k_t) v_tᵀ`` (``d_k × d_v``) and ``z_t = γ z_{t-1} + φ(k_t)``
(``d_k``), with output ``φ(q_t)ᵀ S_t / φ(q_t)ᵀ z_t``. ``γ = 1`` is the linear attention of
Katharopoulos et al. (2020); ``γ < 1`` is the decay of RetNet and, with a gate per token, of Mamba-2.
The same outputs come in three forms: :func:`parallel` (a masked ``t × t`` matrix),
:func:`recurrent` (one state update a token) and :func:`chunked` (parallel inside chunks, the state
between them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from . import validate
from .modules import SelfAttentionHead

if TYPE_CHECKING:
    import matplotlib.pyplot as plt
    import pandas as pd

__all__ = ["feature_map", "decay_mask", "parallel", "recurrent", "chunked", "LinearAttentionHead", "plot_recall"]


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, positive everywhere, elementwise (chapter 12)."""
    return F.elu(x) + 1


def _decay(decay: object) -> float:
    """The decay γ as a float after checking it lies in (0, 1]: each step multiplies the state by it."""
    return validate.real(decay, "decay", above=0, at_most=1,
                         why="each step multiplies the state by it: 1 keeps everything, 0.9 forgets a tenth a token")


def decay_mask(t: int, decay: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``(t, t)`` matrix D with ``D[i, j] = decay ** (i - j)`` for ``j <= i`` and 0 above the diagonal (chapter 12).

    With ``decay = 1`` it is the causal mask as 0s and 1s.
    """
    t = validate.integer(t, "t", minimum=1)
    offset = torch.arange(t)[:, None] - torch.arange(t)[None, :]  # (t, t): i - j
    powers = torch.tensor(_decay(decay), dtype=torch.float64) ** offset.clamp_min(0)
    return torch.where(offset >= 0, powers, 0.0).to(dtype)  # (t, t)


def parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float = 1.0) -> torch.Tensor:
    """Causal linear attention as one masked product: ``(A V) / (A 1)``, ``A = φ(Q) φ(K)ᵀ ⊙ D`` (chapter 12).

    q, k ``(..., t, d_k)``, v ``(..., t, d_v)``; returns ``(..., t, d_v)``. Builds the ``t × t`` matrix A.
    """
    validate.attention_args(q, k, v, None, None)
    t = q.shape[-2]
    A = feature_map(q) @ feature_map(k).transpose(-2, -1) * decay_mask(t, decay, q.dtype)  # (..., t, t)
    return (A @ v) / A.sum(-1, keepdim=True)  # (..., t, d_v)


def recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float = 1.0,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Causal linear attention one token at a time, carrying the state ``(S, z)`` (chapter 12).

    q, k ``(..., t, d_k)``, v ``(..., t, d_v)``; ``state`` is ``(S (..., d_k, d_v), z (..., d_k))``
    from earlier tokens, or None to start empty. Returns ``(out (..., t, d_v), (S, z))``. Nothing
    grows with t: the state after any number of tokens has the same size.
    """
    validate.attention_args(q, k, v, None, None)
    gamma = _decay(decay)
    fq, fk = feature_map(q), feature_map(k)  # (..., t, d_k)
    if state is None:
        S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # (..., d_k, d_v)
        z = q.new_zeros(*q.shape[:-2], q.shape[-1])  # (..., d_k)
    else:
        S, z = state
        want = (*q.shape[:-2], q.shape[-1], v.shape[-1]), (*q.shape[:-2], q.shape[-1])
        if (tuple(S.shape), tuple(z.shape)) != want:
            raise ValueError(f"state (S, z) must have shapes {want[0]} and {want[1]} for these q and v, got "
                             f"{tuple(S.shape)} and {tuple(z.shape)}: pass the state recurrent returned for them.")
    outs = []
    for i in range(q.shape[-2]):
        S = gamma * S + fk[..., i, :, None] * v[..., i, None, :]  # (..., d_k, d_v): add φ(k_i) v_iᵀ
        z = gamma * z + fk[..., i, :]  # (..., d_k)
        num = (fq[..., i, None, :] @ S)[..., 0, :]  # (..., d_v): φ(q_i)ᵀ S
        outs.append(num / (fq[..., i, :] * z).sum(-1, keepdim=True))  # (..., d_v)
    return torch.stack(outs, dim=-2), (S, z)  # (..., t, d_v)


def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int, decay: float = 1.0) -> torch.Tensor:
    """Causal linear attention in chunks of ``chunk`` tokens (chapter 12).

    Inside a chunk, the parallel form (a ``chunk × chunk`` matrix); between chunks, the state ``(S, z)``
    of everything before, decayed to each query's position. q, k ``(..., t, d_k)``, v ``(..., t, d_v)``;
    returns ``(..., t, d_v)``. ``chunk = 1`` is the recurrent form, ``chunk = t`` the parallel one.
    """
    validate.attention_args(q, k, v, None, None)
    chunk, gamma = validate.integer(chunk, "chunk", minimum=1), _decay(decay)
    fq, fk = feature_map(q), feature_map(k)  # (..., t, d_k)
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # (..., d_k, d_v)
    z = q.new_zeros(*q.shape[:-2], q.shape[-1])  # (..., d_k)
    outs = []
    for start in range(0, q.shape[-2], chunk):
        cq, ck, cv = fq[..., start:start + chunk, :], fk[..., start:start + chunk, :], v[..., start:start + chunk, :]
        c = cq.shape[-2]
        D = decay_mask(c, gamma, q.dtype)  # (c, c)
        A = cq @ ck.transpose(-2, -1) * D  # (..., c, c): within the chunk
        before = gamma ** torch.arange(1, c + 1, dtype=q.dtype)[:, None]  # (c, 1): γ^(i+1), the state's decay
        num = A @ cv + before * (cq @ S)  # (..., c, d_v)
        den = A.sum(-1, keepdim=True) + before * (cq @ z[..., :, None])  # (..., c, 1)
        outs.append(num / den)
        to_end = D[-1][:, None]  # (c, 1): γ^(c-1-j), key j's decay to the chunk's last token
        S = gamma ** c * S + (ck * to_end).transpose(-2, -1) @ cv  # (..., d_k, d_v)
        z = gamma ** c * z + (ck * to_end).sum(-2)  # (..., d_k)
    return torch.cat(outs, dim=-2)  # (..., t, d_v)


class LinearAttentionHead(SelfAttentionHead):
    """One head of causal linear attention with chapter 4's learned projections: a ``SelfAttentionHead`` whose
    weights come from the feature map (chapter 12).

    ``forward(x)`` takes ``x`` ``(..., t, d_model)`` and returns ``(out (..., t, d_v), weights (..., t, t))``:
    the weights are ``A`` normalised by its row sums, what token i gives token j.
    """

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """``(out (..., t, d_v), weights (..., t, t))`` for ``x`` ``(..., t, d_model)``."""
        validate.head_inputs(self, x, None)
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # (..., t, d_k), (..., t, d_k), (..., t, d_v)
        A = feature_map(q) @ feature_map(k).transpose(-2, -1) * decay_mask(x.shape[-2], 1.0, x.dtype)  # (..., t, t)
        weights = A / A.sum(-1, keepdim=True)  # (..., t, t), rows sum to 1
        return weights @ v, weights  # (..., t, d_v), (..., t, t)


def plot_recall(accuracy: pd.DataFrame, chance: float) -> plt.Axes:
    """Recall accuracy against the number of pairs, one line per model (a column of ``accuracy``) (chapter 12)."""
    import matplotlib.pyplot as plt

    if accuracy.empty:
        raise ValueError("plot_recall needs a non-empty DataFrame indexed by the number of pairs, one column per "
                         "model.")
    _, ax = plt.subplots(figsize=(6, 3.8))
    for i, ((name, column), marker) in enumerate(zip(accuracy.items(), "osv^D" * len(accuracy.columns), strict=False)):
        size = max(4, 11 - 3 * i)  # each line thinner than the one before, so that equal lines stay visible
        ax.plot(column.index, column.values, marker=marker, markersize=size, linewidth=size / 3, label=str(name))
    ax.axhline(chance, color="grey", linestyle=":", label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(accuracy.index), [str(n) for n in accuracy.index])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("key-value pairs in the sequence")
    ax.set_ylabel("accuracy on held-out sequences")
    ax.set_title("Associative recall: softmax and linear attention")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax
