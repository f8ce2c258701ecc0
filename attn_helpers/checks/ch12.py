"""Self-checks for the exercises of chapter 12 (chapter 12; see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence

import torch

from ..speculative import tree_mask
from . import (
    CheckFailed,
    Watch,
    _ch12_recurrent,
    _ch12_sampling,
    call,
    check_tensor,
    check_value,
    correct,
    listed,
    on_other_sizes,
    reached_functions,
    tensors_from_outside,
)

__all__ = [
    "D_C", "D_K", "D_ROPE", "DTYPE", "H", "N_LAYERS", "PARENTS", "N_CACHED", "mla_bytes", "recurrent_function",
    "recurrent_inputs", "verify_mask_function", "P", "Q", "sampling_rule_function",
]

# Exercise ex-ch12-recurrent (medium), checked in _ch12_recurrent: its inputs, and the check.
recurrent_inputs, recurrent_function = _ch12_recurrent.recurrent_inputs, _ch12_recurrent.recurrent_function
# Exercise ex-ch12-sampling (hard), checked in _ch12_sampling: the target's p and the draft's q, and the check.
P, Q, sampling_rule_function = _ch12_sampling.P, _ch12_sampling.Q, _ch12_sampling.sampling_rule_function

# Exercise ex-ch12-predict: the MLA model whose cache the learner sizes.
N_LAYERS, H, D_K, D_C, D_ROPE = 4, 8, 32, 64, 16
DTYPE = torch.bfloat16


def mla_bytes(answer: object) -> None:
    """Exercise ex-ch12-predict: bytes a token adds to the cache of 4 MLA layers, d_c = 64, d_rope = 16, bfloat16."""
    B = torch.finfo(DTYPE).bits // 8
    right = N_LAYERS * (D_C + D_ROPE) * B
    check_value(answer, right, "mla_bytes", {
        "that is the cache of ordinary multi-head attention: MLA caches the latent c, not the keys and values "
            "of every head.": 2 * N_LAYERS * H * D_K * B,
        "that counts the numbers of ordinary multi-head attention's cache: MLA caches the latent c, not the keys "
            "and values of every head, and the question asks for bytes.": 2 * N_LAYERS * H * D_K,
        "that is what the long way builds for every head (keys of d_k + d_rope numbers); the cache holds only "
            "what they are built from.": N_LAYERS * H * (D_K + D_ROPE) * B,
        "the latent c serves as keys AND values: it is cached once, not twice.": N_LAYERS * (2 * D_C + D_ROPE) * B,
        "twice the answer: a bfloat16 number takes 2 bytes, not 4; or c and the RoPE key were counted twice, once as "
            "keys and once as values, where c serves as both and the RoPE key is only a key.": 2 * right,
        "the RoPE key is shared by all heads: one per token, not one per head.": N_LAYERS * (D_C + H * D_ROPE) * B,
        "the latent is shared by all heads too: one c per token, not one per head.": N_LAYERS * (H * D_C + D_ROPE) * B,
        "eight times the answer: that counts bits (8 to a byte), or gives every head a latent and a RoPE key of "
            "its own, where one of each serves all heads.": 8 * right,
        "the RoPE key is cached too, next to the latent.": N_LAYERS * D_C * B,
        "every layer has its own cache: multiply by the number of layers.": (D_C + D_ROPE) * B,
        "half the answer: that counts numbers, where each bfloat16 number takes 2 bytes; or it weighs one layer "
            "only, in 4-byte numbers.": right // 2,
        "that counts the numbers of one layer: the question asks for the bytes of all 4 layers.": D_C + D_ROPE,
    }, atol=0.5, rtol=0)


PARENTS, N_CACHED = [-1, 0, 0, 1, 1, 2, -1], 5  # exercise ex-ch12-tree: the draft tree and the cached tokens
_OTHER_TREES = [([-1, 0, 1, 2], 3), ([-1, -1, 0, 1, 0], 1), ([-1, 0, 0, 0, 3, 3, 1, 6], 2)]


def _expected(parents: Sequence[int], n_cached: int) -> torch.Tensor:
    n = len(parents)
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree_mask(parents)], dim=1)  # (n, n_cached + n)


def _parent_only(parents: Sequence[int]) -> torch.Tensor:
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i, p] = True
    return mask


def _with_siblings(parents: Sequence[int]) -> torch.Tensor:
    mask = torch.eye(len(parents), dtype=torch.bool)  # each token also sees the earlier tokens with its parent
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]
        for j in range(i):
            mask[i, j] |= parents[j] == p
    return mask


def _walk_stops_before_0(parents: Sequence[int]) -> torch.Tensor:
    mask = torch.zeros(len(parents), len(parents), dtype=torch.bool)  # a walk up the parents that ends at 0
    for i in range(len(parents)):
        j = i
        while j > 0:
            mask[i, j], j = True, parents[j]
    return mask


def _root_reads_last_row(parents: Sequence[int]) -> torch.Tensor:
    mask = torch.eye(len(parents), dtype=torch.bool)  # parents[i] = -1 taken as an index: the last row
    for i, p in enumerate(parents):
        mask[i] |= mask[p]
    return mask


def _check_tree(fn: Callable[[Sequence[int], int], torch.Tensor], parents: Sequence[int], n_cached: int) -> None:
    n = len(parents)
    with Watch({tree_mask: "ah.speculative.tree_mask"}) as watch:
        answer = call(fn, list(parents), n_cached, name="verify_mask",
                      given=f"parents={list(parents)}, n_cached={n_cached}",
                      hint="parents is a list of ints and n_cached an int.")
    if watch.called:
        raise CheckFailed("verify_mask calls ah.speculative.tree_mask, which builds the tree part for you. "
                          "Hint: a token sees what its parent sees, and itself.")
    name = f"verify_mask({list(parents)}, {n_cached})"
    if not isinstance(answer, torch.Tensor) or answer.dtype != torch.bool:
        raise CheckFailed(f"{name} should be a bool tensor (True = may attend), got "
                          f"{getattr(answer, 'dtype', type(answer).__name__)}.")
    expected, cached = _expected(parents, n_cached), torch.ones(n, n_cached, dtype=torch.bool)
    tree = tree_mask(parents)
    mistakes = {
        "a tree is not a chain: the causal mask lets a token see the drafts of other branches. Follow the "
        "parents instead.": torch.ones(n, n_cached + n, dtype=torch.bool).tril(diagonal=n_cached),
        "a token sees all its ancestors, not just its parent: its parent's row is part of its own.":
            torch.cat([cached, _parent_only(parents)], dim=1),
        "each draft token sees itself too (the diagonal).": torch.cat([cached, tree & ~torch.eye(n, dtype=bool)], 1),
        "row i is what token i may see: its ancestors (earlier tokens), not its descendants.":
            torch.cat([cached, tree.T], dim=1),
        "True must mean 'may attend'; this mask is inverted.": ~expected,
        "every draft token may see all the cached tokens, not only those that follow the cache directly: the "
        "cache comes before the whole tree.": torch.cat([cached & torch.tensor([p < 0 for p in parents])[:, None],
                                                          tree], dim=1),
        "a token does not see its siblings (or their descendants): they are other guesses for the same place.":
            torch.cat([cached, _with_siblings(parents)], dim=1),
        "the cached tokens come first in the sequence, so their columns come first too.": torch.cat([tree, cached], 1),
        "the walk up the parents stops too early: token 0 is a token too, an ancestor of its branch and visible to "
        "itself. Walk until the parent is -1, which marks the cache.":
            torch.cat([cached, _walk_stops_before_0(parents)], 1),
        "a root's parent is -1, and as an index -1 means the LAST row: the roots took what the last token sees. "
        "A token that follows the cache has no parent row to copy.":
            torch.cat([cached, _root_reads_last_row(parents)], 1),
    }
    if answer.shape == tree.shape and n_cached:
        raise CheckFailed(f"{name} has shape {tuple(answer.shape)}, only the drafts' columns. Hint: the drafts "
                          f"attend to the cached tokens too, which come first: n_cached more columns.")
    check_tensor(answer.float(), expected.float(), name, {h: m.float() for h, m in mistakes.items()})


def verify_mask_function(fn: Callable[[Sequence[int], int], torch.Tensor]) -> None:
    """Exercise ex-ch12-tree: ``fn(parents, n_cached)`` is the (n, n_cached + n) bool mask of a draft tree."""
    for reached in reached_functions(fn):  # functools.cache and its kind: computed again, under the watch
        if hasattr(reached, "cache_clear"):
            reached.cache_clear()
    if outside := tensors_from_outside(fn):
        raise CheckFailed(f"verify_mask reads {listed(outside)}, which holds tensors made before this call: build "
                          f"the mask inside the function, from parents and n_cached alone, on every call.")
    for parents, n_cached in [(PARENTS, N_CACHED), *_OTHER_TREES]:
        first = parents is PARENTS
        context = contextlib.nullcontext() if first else on_other_sizes(
            "verify_mask", f"another tree (parents {parents}, n_cached = {n_cached})",
            "take every size from parents and n_cached, not from numbers.")
        with context, contextlib.redirect_stdout(io.StringIO()):  # one line for all the trees, printed below
            _check_tree(fn, parents, n_cached)
    correct("verify_mask")
