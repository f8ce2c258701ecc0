"""Chapter 13's trained claims about the heads of its model: what they look at, whether a repeated passage is easier
the second time, what each head is worth, and the model past its trained length (the first exercise).

The model of each seed is ``claims.ch13``'s, trained once (``_trained``) and shared with the claims there; the
measures are the ``attn_helpers.lm_heads`` functions the chapter's cells call, with their defaults.
"""

from __future__ import annotations

import functools

import attn_helpers as ah
from claims import Claim
from claims.ch13 import _corpus, _trained


@functools.cache
def _looks(seed: int) -> dict[str, object]:
    model, windows = _trained(seed).model, ah.lm_heads.held_out(_corpus())
    return {"previous": ah.lm_heads.previous_token_scores(model, windows),
            "recent": ah.lm_heads.recent_weight(model, windows),
            "best_induction": ah.lm_heads.induction_scores(model, ah.lm_heads.repeated(_corpus())).max().max()}


@functools.cache
def _copies(seed: int) -> dict[str, object]:
    model, corpus = _trained(seed).model, _corpus()
    first_copy, second_copy = ah.lm_heads.copy_losses(model, ah.lm_heads.repeated(corpus))
    _, after_another = ah.lm_heads.copy_losses(model, ah.lm_heads.after_another(corpus))
    return {"first_copy": first_copy, "second_copy": second_copy, "after_another": after_another}


@functools.cache
def _rises(seed: int) -> dict[str, object]:
    return {"rises": ah.lm_heads.ablation_losses(_trained(seed).model, _corpus())}


@functools.cache
def _removed(seed: int) -> dict[str, object]:
    """The ablation exercise's losses (``val_loss`` without each head, as its solution computes them)."""
    model, corpus = _trained(seed).model, _corpus()
    losses = {(layer, head): ah.language_model.val_loss(ah.lm_heads.without_head(model, layer, head), corpus)
              for layer, head in ah.lm_heads.every_head(model)}
    return {"losses": losses, "full": ah.language_model.val_loss(model, corpus)}


@functools.cache
def _past(seed: int) -> dict[str, object]:
    """The first exercise's losses inside and past the trained window, as its solution computes them."""
    per_char = ah.lm_heads.loss_by_position(_trained(seed).model, ah.lm_heads.long_windows(_corpus()))
    trained = ah.language_model.CONTEXT
    return {"inside": per_char[:trained].mean().item(), "past": per_char[trained:].mean().item()}


CLAIMS = [
    Claim(13, "previous.loc[2].max() > 0.4", _looks),
    Claim(13, "previous.loc[1].max() < previous.loc[2].max()", _looks),
    Claim(13, "recent.loc[1].min() > 0.7", _looks),
    Claim(13, "best_induction < 0.05", _looks),
    Claim(13, "second_copy > 0.95 * after_another", _copies),
    Claim(13, "second_copy > 0.95 * first_copy", _copies),
    Claim(13, "rises.min().min() > 0.01", _rises),
    Claim(13, "rises.max().max() < 0.5", _rises),
    Claim(13, "min(losses.values()) > full", _removed),
    Claim(13, "past > inside + 0.2", _past),
]
