"""Chapter 5's trained claims: one head against two of the same width on the two-back task.

Each seed draws both models and their batches as the chapter's cell does with seed 0
(``heads_task.train_head_counts``); the chapter's assert on their held-out accuracy is evaluated on that run.
"""

from __future__ import annotations

import functools

from attn_helpers.heads_task import train_head_counts
from claims import Claim


@functools.cache
def _accuracy(seed: int) -> dict:
    return {"accuracy": {heads: accuracy for heads, (_, accuracy) in train_head_counts(seed=seed).items()}}


CLAIMS = [
    Claim(5, "accuracy[2].both > 0.95", _accuracy),
    Claim(5, "accuracy[1].both < 0.6", _accuracy),
]
