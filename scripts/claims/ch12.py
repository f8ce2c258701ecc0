"""Chapter 12's trained claims: associative recall with a softmax head and linear attention heads.

Each seed trains the chapter's nine heads once (``ah.tasks.compare_recall``: a softmax head of d_k = 8 and linear
heads of d_k = 8 and 32, each for 4, 8 and 16 keys), shared by every claim below.
"""

from __future__ import annotations

import functools

import attn_helpers as ah
from claims import Claim


@functools.cache
def _recall(seed: int) -> ah.tasks.RecallComparison:
    return ah.tasks.compare_recall(seed=seed)


def _accuracy(seed: int) -> dict[str, object]:
    return {"accuracy": _recall(seed).accuracy}


def _share(seed: int) -> dict[str, object]:
    return {"share": _recall(seed).share}


CLAIMS = [
    Claim(12, 'accuracy["softmax, d_k = 8"].min() > 0.98', _accuracy),
    Claim(12, 'accuracy.loc[4, "linear, d_k = 8"] > 0.98', _accuracy),
    Claim(12, 'accuracy.loc[16, "linear, d_k = 32"] > 0.95', _accuracy),
    Claim(12, 'accuracy.loc[16, "linear, d_k = 8"] < 0.7 < accuracy.loc[8, "linear, d_k = 8"]', _accuracy),
    Claim(12, 'share["softmax, d_k = 8"] > share["linear, d_k = 32"] > share["linear, d_k = 8"]', _share),
]
