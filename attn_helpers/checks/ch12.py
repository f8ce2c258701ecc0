"""Self-checks for the exercises of chapter 12 (chapter 12; see ``attn_helpers.checks``)."""

from __future__ import annotations

import contextlib
import io
import math
import weakref
from collections.abc import Callable, Sequence

import torch

from .. import linear_attention as la
from .._torch_private import dispatch_mode_base, tensors_in
from ..speculative import tree_mask
from . import (
    CheckFailed,
    Watch,
    _ch12_sampling,
    call,
    check_tensor,
    check_value,
    correct,
    on_other_sizes,
    reached_functions,
    tensors_from_outside,
)

__all__ = [
    "D_C", "D_K", "D_ROPE", "DTYPE", "H", "N_LAYERS", "PARENTS", "N_CACHED", "mla_bytes", "recurrent_function",
    "recurrent_inputs", "verify_mask_function", "P", "Q", "sampling_rule_function",
]

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


def recurrent_inputs(t: int = 11, d_k: int = 4, d_v: int = 3, seed: int = 1200) -> tuple[torch.Tensor, ...]:
    """Exercise ex-ch12-recurrent: q, k ``(t, d_k)`` and v ``(t, d_v)`` in float64."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t, d, generator=gen, dtype=torch.float64) for d in (d_k, d_k, d_v))


def _weighted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num: torch.Tensor, den: torch.Tensor,
              fq: torch.Tensor | None = None, fk: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs with the weight masks ``num`` (for the values) and ``den`` (for the normaliser), each (t, t)."""
    fq = la.feature_map(q) if fq is None else fq
    fk = la.feature_map(k) if fk is None else fk
    A = fq @ fk.T  # (t, t)
    return ((A * num) @ v) / (A * den).sum(-1, keepdim=True)


class _LiveStates(dispatch_mode_base()):
    """Counts the state-shaped tensors, (d_k, d_v) or (d_v, d_k), alive at once while a function runs."""

    def __init__(self, shapes: set[tuple[int, ...]]) -> None:
        super().__init__()
        self.shapes, self.live, self.made, self.most = shapes, {}, 0, 0  # live: id -> weak reference

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for x in tensors_in(out):
            if isinstance(x, torch.Tensor) and tuple(x.shape) in self.shapes:
                self.made += self.live.get(id(x), lambda: None)() is not x  # an in-place op is no new tensor
                self.live[id(x)] = weakref.ref(x)
        self.most = max(self.most, sum(ref() is not None for ref in self.live.values()))
        return out


def _run_recurrent(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float) -> object:
    t, d_k, d_v = q.shape[0], q.shape[1], v.shape[1]
    forbidden = {la.parallel: "ah.linear_attention.parallel", la.recurrent: "ah.linear_attention.recurrent",
                 la.chunked: "ah.linear_attention.chunked", la.decay_mask: "ah.linear_attention.decay_mask",
                 la.LinearAttentionHead.forward: "ah.linear_attention.LinearAttentionHead"}
    states = _LiveStates({(d_k, d_v), (d_v, d_k)})
    with Watch(forbidden) as watch, states:
        answer = call(fn, q.clone(), k.clone(), v.clone(), decay, name="linear_step_by_step")
    if watch.called:
        raise CheckFailed(f"linear_step_by_step calls {', '.join(sorted(watch.called))}, which computes linear "
                          f"attention for you. Hint: keep a (d_k, d_v) state and a (d_k,) normaliser, and update "
                          f"them once per token.")
    if watch.used_softmax():
        raise CheckFailed("linear_step_by_step calls a softmax. Hint: linear attention weighs key j by a dot product "
                          "of features and divides by their sum; no exponential of the scores.")
    prefixes = {shape[0] for op in watch.ops for shape in op.outputs + op.inputs if len(shape) == 2
                and shape[1] == d_k and 1 < shape[0] < t and shape[0] not in (d_k, d_v, d_k + 1, d_v + 1)}
    if len(prefixes) >= 3:  # (2, d_k) alone may be q_i and k_i side by side
        raise CheckFailed(f"linear_step_by_step works on {len(prefixes)} different numbers of keys at once "
                          f"({', '.join(map(str, sorted(prefixes)[:4]))}, …): it weighs every earlier key again for "
                          f"each new token, which is attention over a cache, not a state. Hint: read token i "
                          f"through the state alone, and add each key to it once.")
    for op in watch.ops:
        if any(sum(size == t for size in shape) >= 2 for shape in op.outputs):
            raise CheckFailed(f"linear_step_by_step builds a tensor of shape {op.outputs[0]} (operator {op.name}), "
                              f"which holds t × t = {t} × {t} numbers: the form that grows with t. Hint: carry a "
                              f"state of fixed size from token to token instead.")
        big = [shape for shape in op.outputs if t in shape and math.prod(shape) > t * (d_k + d_v + 1)]
        if big:
            raise CheckFailed(f"linear_step_by_step builds a tensor of shape {big[0]} (operator {op.name}): one "
                              f"(d_k, d_v) matrix for every token, t = {t} of them at once. Hint: the recurrent form "
                              f"keeps ONE state, and each token enters it inside the loop.")
        if (t, d_k) in op.inputs and any(math.prod(shape) == t for shape in op.outputs):
            raise CheckFailed(f"linear_step_by_step weighs all t = {t} keys at once (operator {op.name} makes one "
                              f"number per key from a ({t}, {d_k}) tensor): that is attention over every key under "
                              f"a mask, with no state. Hint: token i reads the state alone, and each key enters the "
                              f"state once, when its token comes.")
    if states.made > 8 * t:
        raise CheckFailed(f"linear_step_by_step makes {states.made} state-sized ({d_k}, {d_v}) tensors for t = {t} "
                          f"tokens: it rebuilds the state from the earlier tokens at every step, a cost that grows "
                          f"as t². Hint: each token enters the state once; the next token starts from that state.")
    if states.most > max(6, t // 2):
        raise CheckFailed(f"linear_step_by_step keeps {states.most} state-sized ({d_k}, {d_v}) tensors alive at "
                          f"once for t = {t} tokens: a state for every token, a memory that grows with t. Hint: "
                          f"keep only the current state; the output of each token is all that is stored.")
    return answer


def _mistakes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: float) -> dict[str, torch.Tensor]:
    """The outputs of plausible wrong recurrences, each with a hint naming its mistake (never the update itself)."""
    t = q.shape[0]
    causal, D = la.decay_mask(t, 1.0, q.dtype), la.decay_mask(t, decay, q.dtype)
    j = torch.arange(t, dtype=q.dtype)
    absolute = causal * decay ** j[None, :]  # (t, t): key j weighed by decay^j, its position, not its distance
    fq, fk = la.feature_map(q), la.feature_map(k)
    return {
        "the decay is missing: older tokens must fade by the decay factor at every step, in the state and in the "
        "normaliser alike.": _weighted(q, k, v, causal, causal),
        "only the state fades, not the normaliser: both hold sums over the same tokens and must fade at the same "
        "rate, or the weights no longer sum to one.": _weighted(q, k, v, D, causal),
        "only the normaliser fades, not the state: both hold sums over the same tokens and must fade at the same "
        "rate.": _weighted(q, k, v, causal, D),
        "the outputs are not divided by the normaliser's reading, so the weights do not sum to one.":
            (fq @ fk.T * D) @ v,
        "the feature map is missing: apply φ = ah.linear_attention.feature_map to the queries and the keys first.":
            ((q @ k.T * D) @ v) / (q @ k.T * D).sum(-1, keepdim=True),
        "the feature map is applied to the queries only: the keys that enter the state and the normaliser need "
        "it too.": _weighted(q, k, v, D, D, fk=k),
        "the feature map is applied to the keys only: the query that reads the state needs it too.":
            _weighted(q, k, v, D, D, fq=q),
        "the decay follows each key's position in the sequence, not how far back it lies from the reading "
        "token: decay the whole state once per step instead.": _weighted(q, k, v, absolute, absolute),
    }


def recurrent_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch12-recurrent: ``fn(q, k, v, decay)`` is causal linear attention, one state update a token."""
    for q, k, v, decay, where in ((*recurrent_inputs(), 0.8, None),
                                  (*recurrent_inputs(7, 5, 2, seed=1201), 0.6, "t = 7, d_k = 5, d_v = 2, decay 0.6")):
        context = on_other_sizes("linear_step_by_step", f"other inputs ({where})", "take every size from q, k and v, "
                                 "not from numbers, and use the decay argument.") if where else contextlib.nullcontext()
        with context:
            answer = _run_recurrent(fn, q, k, v, decay)
            if isinstance(answer, torch.Tensor) and torch.is_floating_point(answer) and torch.isnan(answer).any():
                raise CheckFailed("the output contains NaN. Hint: token i sees itself, so it must be in the state "
                                  "before the state is read; otherwise the first token sees nothing.")
            name = "linear_step_by_step(q, k, v, decay)" + (f" on {where}" if where else "")
            if isinstance(answer, torch.Tensor) and answer.dtype in (torch.float32, torch.float16, torch.bfloat16):
                raise CheckFailed(f"{name} is {answer.dtype}, but q, k and v are float64 and the three forms agree "
                                  f"to float64's rounding. Hint: keep the inputs' dtype (new_zeros makes the state "
                                  f"in it).")
            check_tensor(answer, la.parallel(q, k, v, decay), name, _mistakes(q, k, v, decay), atol=1e-10)


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
        raise CheckFailed(f"verify_mask reads {', '.join(outside)}, which holds tensors made before this call: build "
                          f"the mask inside the function, from parents and n_cached alone, on every call.")
    for parents, n_cached in [(PARENTS, N_CACHED), *_OTHER_TREES]:
        first = parents is PARENTS
        context = contextlib.nullcontext() if first else on_other_sizes(
            "verify_mask", f"another tree (parents {parents}, n_cached = {n_cached})",
            "take every size from parents and n_cached, not from numbers.")
        with context, contextlib.redirect_stdout(io.StringIO()):  # one line for all the trees, printed below
            _check_tree(fn, parents, n_cached)
    correct("verify_mask")
