"""Chapter 10's trained claim: the copy task trained with ah.attention and with the tiled passes gives the same
losses at every step (the chapter's seed is 4; here seeds 0-4)."""

from __future__ import annotations

import torch
from margins import Claim

import attn_helpers as ah


class _CopyHead(ah.SelfAttentionHead):
    """The chapter's head: one-hot token and position in, attention through ``attend``, in the head's precision."""

    def __init__(self, attend) -> None:  # noqa: ANN001
        super().__init__(10 + 8, 8, d_v=10)
        self.attend = attend

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        x = x.to(self.W_q.weight.dtype)
        return self.attend(self.W_q(x), self.W_k(x), self.W_v(x)), None


def loss_gap(seed: int) -> float:
    """Largest gap between the two runs' losses over 200 steps of Adam, in float64."""
    attends = [lambda q, k, v: ah.attention(q, k, v)[0],
               lambda q, k, v: ah.flash.flash_attention(q, k, v, block_q=3, block_k=3)]
    runs = []
    for attend in attends:
        torch.manual_seed(seed)
        runs.append(ah.training.train_copy_task(_CopyHead(attend).double(), steps=200, progress=False))
    return max(abs(a - b) for a, b in zip(runs[0].losses, runs[1].losses, strict=True))


CLAIMS = [Claim(10, "the copy task's losses with ah.attention and flash_attention agree within 1e-10", loss_gap,
                high=1e-10)]
