"""Chapter 10's trained claim: the copy task trained with ah.attention and with the tiled passes (flash_attention)
gives the same loss at every step, in float64. Its experiment is ``ah.flash.copy_task_both_ways``."""

from __future__ import annotations

from functools import cache

import attn_helpers as ah
from claims import Claim


@cache
def _losses(seed: int) -> dict[str, object]:
    losses, _ = ah.flash.copy_task_both_ways(seed=seed)
    return {"losses": losses}


CLAIMS = [Claim(10, "(losses['ah.attention'] - losses['flash_attention']).abs().max() <= 1e-10", _losses)]
