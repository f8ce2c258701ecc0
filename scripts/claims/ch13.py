"""Chapter 13's trained claims: the character-level model of Tiny Shakespeare, its losses, its text and its draft.

Each seed trains the chapter's model (``ah.language_model.train_lm``) and its draft (``train_draft``) once, shared by
every claim below; the measures are the package functions the chapter's cells call, with their defaults. The claims
about the model's heads are in ``ch13_heads.py``, which shares ``_corpus`` and ``_trained``.
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


@functools.cache
def _losses(seed: int) -> dict[str, object]:
    result, corpus = _trained(seed), _corpus()
    return {"final": ah.language_model.split_loss(result.model, corpus.val),  # the whole validation split
            "train_end": sum(result.losses[-result.every:]) / result.every,  # the last 50 steps, as the chapter
            "baselines": ah.text.baselines(corpus), "result": result}


@functools.cache
def _generated(seed: int) -> dict[str, object]:
    model, corpus = _trained(seed).model, _corpus()
    prompt, start = corpus.encode(ah.language_model.PROMPT)[None], len(ah.language_model.PROMPT)  # (1, t), t
    n_new = ah.language_model.CONTEXT - start  # the trained window, full, as the chapter writes
    cached, cached_logits = model.generate(prompt, n_new)
    _, uncached_logits = model.generate(prompt, n_new, use_cache=False)
    return {"known": ah.text.word_share(corpus, corpus.decode(cached[:, start:])),
            "gap": (cached_logits - uncached_logits).abs().max(),
            "tie": ah.language_model.closest_call(uncached_logits)}


@functools.cache
def _speculation(seed: int) -> dict[str, object]:
    draft = ah.language_model.train_draft(_corpus(), seed=seed).model
    return {"spec": ah.language_model.speculate(_trained(seed).model, draft, _corpus())}


CLAIMS = [
    Claim(13, "final < 1.95", _losses),
    Claim(13, 'baselines["bigram"] - final > 0.5', _losses),
    Claim(13, "train_end < final", _losses),
    Claim(13, 'result.val_losses[2] < baselines["bigram"]', _losses),
    Claim(13, "known > 0.8", _generated),
    Claim(13, "2 * gap < tie", _generated),
    Claim(13, "spec.differing < 1", _speculation),
    Claim(13, "spec.kept > 0.05", _speculation),
    Claim(13, "spec.target_passes < 0.85 * spec.greedy_passes", _speculation),
]
