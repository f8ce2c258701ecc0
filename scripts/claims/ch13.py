"""Chapter 13's trained claims: the character-level model of Tiny Shakespeare, its draft, and its heads.

Each seed trains the chapter's model (``ah.language_model.train_lm``) and its draft (``train_draft``) once, shared by
every claim below; the measures are the package functions the chapter's cells call, with their defaults.
"""

from __future__ import annotations

import functools

import attn_helpers as ah
from claims import Claim


@functools.cache
def _corpus() -> ah.text.Corpus:
    return ah.text.load_shakespeare()


@functools.cache
def _trained(seed: int) -> ah.language_model.LMResult:
    return ah.language_model.train_lm(_corpus(), seed=seed)


def _final(seed: int) -> dict[str, object]:
    *_, final = _trained(seed).val_losses  # the last validation loss
    return {"final": final, "baselines": ah.text.baselines(_corpus())}


@functools.cache
def _speculation(seed: int) -> dict[str, object]:
    draft = ah.language_model.train_draft(_corpus(), seed=seed).model
    return {"spec": ah.language_model.speculate(_trained(seed).model, draft, _corpus())}


@functools.cache
def _heads(seed: int) -> dict[str, object]:
    model, corpus = _trained(seed).model, _corpus()
    twice = ah.lm_heads.repeated(corpus)
    first_copy, second_copy = ah.lm_heads.copy_losses(model, twice)
    return {"best_previous": ah.lm_heads.previous_token_scores(model, ah.lm_heads.held_out(corpus)).max().max(),
            "best_induction": ah.lm_heads.induction_scores(model, twice).max().max(),
            "first_copy": first_copy, "second_copy": second_copy,
            "rises": ah.lm_heads.ablation_losses(model, corpus)}


CLAIMS = [
    Claim(13, "final < 1.95", _final),
    Claim(13, 'baselines["bigram"] - final > 0.5', _final),
    Claim(13, "spec.acceptance > 0.05", _speculation),
    Claim(13, "spec.target_passes < 0.85 * spec.greedy_passes", _speculation),
    Claim(13, "best_previous > 0.4", _heads),
    Claim(13, "best_induction < 0.1", _heads),
    Claim(13, "second_copy > 0.95 * first_copy", _heads),
    Claim(13, "rises.min().min() > 0.01", _heads),
    Claim(13, "rises.max().max() < 0.5", _heads),
]
