"""Chapter 4's trained claims: one head trained to copy the previous token (``training.train_copy_task``).

Each seed draws the head's weights (``training.copy_task_head``) and its training batches, as the chapter's cells
do with seed 0; the chapter's asserts on the loss curve are evaluated on that run.
"""

from __future__ import annotations

import functools
import math

from attn_helpers import training
from claims import Claim


@functools.cache
def _run(seed: int) -> dict:
    result = training.train_copy_task(training.copy_task_head(seed=seed), seed=seed, progress=False)
    return {"result": result, "math": math}


CLAIMS = [
    Claim(4, "max(abs(loss - math.log(10)) for loss in result.losses[:24]) < 0.3", _run),
    Claim(4, "result.losses[60] < result.losses[25] / 2", _run),
    Claim(4, "result.losses[-1] < 0.1", _run),
]
