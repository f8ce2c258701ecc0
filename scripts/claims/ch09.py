"""Chapter 9's trained claims: where the retrieval models put an absent query's weight, and what it costs them.

Each claim re-runs the chapter's experiment, ``ah.null_attention.null_key_experiment``, with another seed (the
three models' shared starting weights) and reads the value the chapter's assert compares from its table. The
three models are trained once per seed and kernel set, and shared by the claims.
"""

from __future__ import annotations

import functools

import pandas as pd

import attn_helpers as ah
from claims import Claim


@functools.cache
def _results(seed: int) -> dict[str, pd.DataFrame]:
    """The chapter's ``results``: the experiment's table for ``seed``."""
    return {"results": ah.null_attention.null_key_experiment(seed=seed).table}


CLAIMS = [Claim(9, asserts, _results) for asserts in (
    'results.loc["softmax", "key absent"] / results.loc["softmax", "key present"] > 8',
    'results.loc["softmax", "length (present)"] < 0.9',
    'results.loc["softmax", "largest weight (absent)"] < 0.4',
    'results.loc["softmax_plus_one", "nothing (absent)"] >= 0.95',
    'results.loc["softmax_plus_one", "key absent"] / results.loc["softmax", "key absent"] <= 0.01',
    'results.loc["null_key", "nothing (absent)"] >= 0.75',
    'results.loc["null_key", "key absent"] / results.loc["softmax", "key absent"] <= 0.3',
    'results.loc[["null_key", "softmax_plus_one"], "nothing (present)"].max() < 0.02',
)]
