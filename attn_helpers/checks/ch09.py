"""Self-checks for the exercises of chapter 9 (chapter 9; see ``attn_helpers.checks``)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable

import torch

from .._torch_private import dispatch_mode_base, tensors_in, written_tensors
from ..attention import attention
from ..inference import grouped_query_attention
from ..merge import merge_partials, partial_attention
from . import CheckFailed, Watch, call, check_tensor, check_value, correct, on_cpu, on_other_sizes, torch_attention

__all__ = [
    "DTYPE", "D_K", "G", "GQA_B", "GQA_DK", "GQA_G", "GQA_H", "GQA_T", "H", "N_LAYERS", "T", "cache_bytes",
    "gqa_function", "gqa_inputs", "merge_function",
]

# Exercise ex-ch09-predict: the model whose cache the learner sizes.
N_LAYERS, H, G, D_K, T = 4, 8, 2, 16, 100
DTYPE = torch.bfloat16


def cache_bytes(answer: object) -> None:
    """Exercise ex-ch09-predict: bytes of the KV cache of T tokens, n_layers=4, h=8, g=2, d_k=16, bfloat16.

    Of the models ``TinyDecoder(50, 128, 8, 2, 4)`` builds with two arguments swapped, two run and cache
    another number of bytes, and the hints name the swap; swapping ``num_kv_heads`` and ``n_layers`` caches
    the same bytes, which no check of a number can catch (hence the keywords the exercise asks for).
    """
    per_number = torch.finfo(DTYPE).bits // 8
    check_value(answer, 2 * N_LAYERS * G * D_K * per_number * T, "cache_bytes", {
        "the cache holds keys and values for the g = 2 shared heads only, not for all h = 8 query heads. (If "
        "you measured it, check that the model was not built with num_heads and n_layers swapped: pass the "
        "sizes as keywords.)": 2 * N_LAYERS * H * D_K * per_number * T,
        "that is the cache of a model of 50 layers: the vocabulary size and the number of layers were swapped. "
        "Pass each size as a keyword argument when you build the model.": 2 * 50 * G * D_K * per_number * T,
        "the cache holds keys AND values: two tensors per layer.": N_LAYERS * G * D_K * per_number * T,
        "bfloat16 takes 2 bytes a number, not 4.": 2 * N_LAYERS * G * D_K * 4 * T,
        "that is the size per token; the cache holds all T tokens.": 2 * N_LAYERS * G * D_K * per_number,
        "every layer has its own cache: multiply by n_layers.": 2 * G * D_K * per_number * T,
        "that takes the model's width (128) as the width of a key: each head's keys and values are "
        "d_k = d_model / h = 16 numbers wide.": 2 * N_LAYERS * G * H * D_K * per_number * T,
        "that counts every key/value head as d_model = 128 numbers wide and all h = 8 query heads: each of the "
        "g = 2 shared heads stores keys and values of d_k = d_model / h = 16 numbers.":
            2 * N_LAYERS * H * H * D_K * per_number * T,
    }, atol=0.5)


def _shards() -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]:
    """Two shards of keys for 4 queries; query 0 may attend nothing in the second shard, query 3 nothing at all."""
    gen = torch.Generator().manual_seed(909)
    q = torch.randn(4, 8, generator=gen) * 2
    k, v = torch.randn(10, 8, generator=gen) * 2, torch.randn(10, 5, generator=gen)
    mask = torch.ones(4, 10, dtype=torch.bool)
    mask[0, 6:] = False  # query 0: the whole second shard is blocked
    mask[3] = False  # query 3: every key is blocked
    parts = [partial_attention(q, k[:6], v[:6], mask[:, :6]), partial_attention(q, k[6:], v[6:], mask[:, 6:])]
    return attention(q, k, v, mask)[0], parts


def _merge_without_rescale(a, b):  # noqa: ANN001, ANN202
    return torch.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2]


def _divided_by_zero_sum(m: object, ell: object, o: object,
                         expected: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> bool:
    """Whether m and l are right but o is NaN exactly where l is 0: the output divided by its sum, 0 / 0."""
    parts = (m, ell, o)
    if not all(isinstance(x, torch.Tensor) and x.shape == e.shape and torch.is_floating_point(x)
               for x, e in zip(parts, expected, strict=True)):
        return False
    nan_rows = torch.isnan(o).any(dim=-1, keepdim=True)  # (t_q, 1)
    empty = expected[1] == 0  # (t_q, 1): no allowed key in either shard
    return (torch.equal(m, expected[0]) and torch.allclose(ell, expected[1], atol=1e-5)
            and bool(nan_rows.any()) and torch.equal(nan_rows, empty))


def _check_order(answer: tuple | list, expected: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
    """Fail with the order the learner used if ``answer`` is the right triple in another order."""
    names = ("m", "l", "o")
    for order in itertools.permutations(range(3)):
        if order == (0, 1, 2):
            continue
        if all(isinstance(x, torch.Tensor) and x.shape == expected[i].shape
               and torch.allclose(x.double(), expected[i].double(), atol=1e-5, equal_nan=True)
               for x, i in zip(answer, order, strict=True)):
            given = ", ".join(names[i] for i in order)
            raise CheckFailed(f"the three parts are right but returned in the order ({given}). Hint: return them in "
                              f"the order partial_attention uses, (m, l, o).")


def merge_function(fn: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
    """Exercise ex-ch09-merge: ``fn(a, b)`` merges two ``(m, l, o)`` triples exactly, with no NaN."""
    full, (a, b) = _shards()
    expected = merge_partials([a, b])
    with Watch([merge_partials]) as watch:
        answer = call(fn, tuple(x.clone() for x in a), tuple(x.clone() for x in b), name="merge_two",
                      given="two (m, l, o) triples of 4 queries")
    if watch.called:
        raise CheckFailed("merge_two calls ah.merge.merge_partials; the exercise asks you to write the merge "
                          "yourself, from the equation (rescale both shards to the larger maximum, then add).")
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise CheckFailed("merge_two should return the triple (m, l, o), like partial_attention.")
    m, ell, o = answer
    for name, x in (("m", m), ("l", ell), ("o", o)):
        on_cpu(x, name)
    if _divided_by_zero_sum(m, ell, o, expected):
        raise CheckFailed(
            "o contains NaN for the query with no allowed key in either shard. Your guard for an infinite maximum "
            "works (m and l are right there), but o was divided by l, which is 0 for that query: 0 / 0 is NaN. "
            "Hint: return o unnormalised, as partial_attention does; the division by l comes only at the very end."
        )
    for name, x in (("m", m), ("l", ell), ("o", o)):
        if isinstance(x, torch.Tensor) and torch.is_floating_point(x) and torch.isnan(x).any():
            raise CheckFailed(
                f"{name} contains NaN. Hint: where both maxima are -inf (a query with no allowed key in "
                f"either shard), e^(m_a - M) is e^(-inf - (-inf)) = NaN; replace an infinite M by 0 first."
            )
    _check_order(answer, expected)
    wrong = _merge_without_rescale(a, b)
    if not isinstance(m, torch.Tensor) or m.shape != expected[0].shape or not torch.equal(m, expected[0]):
        empty = torch.isinf(expected[0])  # queries with no allowed key in either shard
        if isinstance(m, torch.Tensor) and m.shape == expected[0].shape and empty.any() and \
                torch.equal(m[~empty], expected[0][~empty]) and torch.isfinite(m[empty]).all():
            raise CheckFailed(
                "m is right except for the query with no allowed key in either shard, where it should stay -inf: "
                "a triple with no keys is (-inf, 0, 0). Hint: replace -inf by 0 only in a copy used inside the "
                "exponent, e^(m_a - M), and return the maximum itself."
            )
        raise CheckFailed("m is not right yet. Hint: for each query, the merged maximum is the larger of the two "
                          "shards' maxima (not the smaller, nor their sum).")
    correct("m")
    check_tensor(ell, expected[1], "l", {
        "rescale each sum to the common maximum before adding: l_a e^(m_a - M) + l_b e^(m_b - M).": wrong[1],
    })
    check_tensor(o, expected[2], "o", {
        "rescale each output to the common maximum before adding: o_a e^(m_a - M) + o_b e^(m_b - M).": wrong[2],
        "keep o unnormalised, as partial_attention returns it: divide by l only at the very end.":
            expected[2] / torch.where(expected[1] == 0, torch.ones_like(expected[1]), expected[1]),
    })
    finished = o / torch.where(ell == 0, torch.ones_like(ell), ell)
    check_tensor(finished, full, "o / l against attention over all keys")


# Operators that return uninitialised memory: whatever bytes it holds (keys freed a moment ago, say), they copy nothing.
_EMPTY = {torch.ops.aten.empty, torch.ops.aten.empty_like, torch.ops.aten.new_empty, torch.ops.aten.empty_strided,
          torch.ops.aten.new_empty_strided}


def _unit_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows / their norms, norms) in float64, for rows (n, d_k): a copy and a scaled copy point the same way."""
    rows = rows.double()
    norms = rows.norm(dim=-1)
    return rows / norms.clamp_min(1e-300)[:, None], norms


class _CopyCounter(dispatch_mode_base()):
    """Counts how often each row of ``sources`` (one token's key or value, ``d_k`` numbers), or a multiple of
    it, turns up in the tensors that operators make or write into; copies of one form (dtype, layout, scale)
    are counted together, so a cache converted, scaled and transposed once is not taken for h/g copies.

    A tensor is read as consecutive rows of d_k numbers in its own order, and, when its second-to-last
    dimension is d_k, column by column (keys stored transposed). Keys copied once per query head make each
    row turn up h/g times in one form, however the copies are made: all at once, a head or a token at a time,
    in new tensors, into a buffer (``x[i] = k``, ``out=``), flattened, or in a (b, t, h, d_k) layout. A view
    of an operator's input is not counted (nothing was copied), nor is a row that an in-place operator leaves
    as it was, nor what uninitialised memory holds (``torch.empty``). Memory that no operator made (a tensor
    from NumPy, say) is read whole the first time an operator takes a tensor in it.
    """

    def __init__(self, *sources: torch.Tensor) -> None:
        super().__init__()
        self.d_k = sources[0].shape[-1]
        self.rows, self.norms = _unit_rows(torch.cat([s.reshape(-1, self.d_k) for s in sources]))
        self.counts: Counter = Counter()  # (source row, form) -> copies
        self.known = {s.untyped_storage().data_ptr() for s in sources}  # memory whose rows were counted
        self.uninitialised = set()  # memory from the empty family, not yet written

    def most_copies(self) -> int:
        """The most copies of one row in one form."""
        return max(self.counts.values(), default=0)

    def _matches(self, x: torch.Tensor) -> set[tuple[str, int, int, tuple]]:
        """(reading, row, source row, form) for each row of ``x`` that is a source row or a multiple of it."""
        if not torch.is_floating_point(x) or x.numel() < self.d_k:
            return set()
        x = x.detach()
        readings = []
        if x.numel() % self.d_k == 0:
            readings.append(("rows", x.reshape(-1, self.d_k)))
        if x.dim() >= 2 and x.shape[-2] == self.d_k:
            readings.append(("columns", x.transpose(-2, -1).reshape(-1, self.d_k)))
        found = set()
        for reading, rows in readings:
            for first in range(0, len(rows), 4096):  # a few MB of cosines at a time, however large x is
                units, norms = _unit_rows(rows[first:first + 4096])
                for row, source in ((units @ self.rows.T) > 1 - 1e-10).nonzero().tolist():
                    scale = f"{float(norms[row] / self.norms[source]):.4g}"
                    found.add((reading, first + row, source, (reading, x.dtype, scale)))
        return found

    def _count(self, matches: set[tuple[str, int, int, tuple]]) -> None:
        self.counts.update((source, form) for _, _, source, form in matches)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        for x in tensors_in((args, kwargs)):
            storage = x.untyped_storage()
            if storage.data_ptr() not in self.known:  # made outside any operator: all of it, once
                self.known.add(storage.data_ptr())
                whole = x.new_empty(0).set_(storage)
                self._count(self._matches(whole[:whole.numel() - whole.numel() % self.d_k]))
        written = written_tensors(func, args, kwargs)
        before = [set() if x.untyped_storage().data_ptr() in self.uninitialised else self._matches(x) for x in written]
        out = func(*args, **kwargs)
        for x, held in zip(written, before, strict=True):
            self._count(self._matches(x) - held)
            self.uninitialised.discard(x.untyped_storage().data_ptr())
        storages = {x.untyped_storage().data_ptr() for x in tensors_in((args, kwargs))}
        for x in tensors_in(out):
            address = x.untyped_storage().data_ptr()
            if address not in storages:
                self.known.add(address)
                if func.overloadpacket in _EMPTY:
                    self.uninitialised.add(address)
                else:
                    self.uninitialised.discard(address)  # memory freed and given out again
                    self._count(self._matches(x))
        return out


GQA_B, GQA_H, GQA_G, GQA_T, GQA_DK = 2, 8, 2, 64, 4  # exercise ex-ch09-gqa


def gqa_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exercise ex-ch09-gqa: q (2, 8, 1, 4) for one new token; k, v (2, 2, 64, 4) from the cache."""
    gen = torch.Generator().manual_seed(919)
    q = torch.randn(GQA_B, GQA_H, 1, GQA_DK, generator=gen)
    k = torch.randn(GQA_B, GQA_G, GQA_T, GQA_DK, generator=gen)
    v = torch.randn(GQA_B, GQA_G, GQA_T, GQA_DK, generator=gen)
    return q, k, v


def _gqa_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Grouped-query attention the plain way, keys and values copied per query head: (b, h, 1, d_k)."""
    r = q.shape[1] // k.shape[1]
    return attention(q, k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1), scale=scale)[0]


def _run_gqa(fn: Callable[..., torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             expected: torch.Tensor, where: str) -> torch.Tensor:
    """``fn(q, k, v)``, watched; fails if it reaches attention already written or copies keys per query head."""
    r = q.shape[1] // k.shape[1]
    k_in, v_in = k.clone(), v.clone()
    with torch.no_grad(), _CopyCounter(k_in, v_in) as copies, \
            Watch({grouped_query_attention: "ah.inference.grouped_query_attention", **torch_attention()}) as watch:
        answer = call(fn, q.clone(), k_in, v_in, name="gqa_decode")
    if watch.called or watch.used_fused_attention():
        called = ", ".join(sorted(watch.called)) or "scaled_dot_product_attention"
        raise CheckFailed(f"gqa_decode calls {called}; the exercise asks you to write it yourself.")
    if isinstance(answer, (tuple, list)):
        raise CheckFailed("gqa_decode should return only the output tensor (b, h, 1, d_k), not a tuple.")
    on_cpu(answer, "gqa_decode(q, k, v)")
    copied = copies.most_copies() >= r  # every query head of a group got its own copy of the group's keys or values
    if copied and isinstance(answer, torch.Tensor) and answer.shape == expected.shape and torch.allclose(
            answer.double(), expected.double(), atol=1e-4):
        raise CheckFailed(
            f"the result is right {where}, but the keys or values were copied once per query head (one token's key "
            f"or value, or a multiple of it, turned up {copies.most_copies()} times in the tensors gqa_decode made). "
            "Hint: make the h/g query heads of a group the rows of one matrix per group (a reshape of q, no "
            "copy), and multiply it by that group's keys, transposed, of shape (b, g, d_k, t). (Broadcasting "
            "the keys against 5-D queries makes torch.matmul copy them too.)"
        )
    return answer


def gqa_function(fn: Callable[..., torch.Tensor]) -> None:
    """Exercise ex-ch09-gqa: ``fn(q, k, v)`` is grouped-query attention, without copying keys per query head."""
    q, k, v = gqa_inputs()
    r = GQA_H // GQA_G
    expected = _gqa_reference(q, k, v)  # (b, h, 1, d_k)
    answer = _run_gqa(fn, q, k, v, expected, "on the exercise's inputs")
    check_tensor(answer, expected, "gqa_decode(q, k, v)", {
        "query heads are paired with the wrong key heads: heads 0-3 share key head 0 and heads 4-7 key head 1 "
        "(i // (h // g), as repeat_interleave orders them), not i % g (as repeat does).":
            attention(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1))[0],
        "the scores are not scaled: divide q kᵀ by √d_k.":
            _gqa_reference(q, k, v, scale=1.0),
    })
    # Another cache (1 sequence, 12 query heads in 2 groups, 9 keys of 5 features), made here: nothing the
    # function kept from the exercise's call fits it, and every size must come from q, k and v.
    gen = torch.Generator().manual_seed(920)
    q, k, v = torch.randn(1, 12, 1, 5, generator=gen), torch.randn(1, 2, 9, 5, generator=gen), \
        torch.randn(1, 2, 9, 5, generator=gen)
    with on_other_sizes("gqa_decode", "a cache of other sizes (h = 12, g = 2, t = 9, d_k = 5)",
                        "take every size from q, k and v, not from numbers."):
        expected = _gqa_reference(q, k, v)
        answer = _run_gqa(fn, q, k, v, expected, "on another cache")
        check_tensor(answer, expected, "gqa_decode on another cache (h = 12, g = 2, t = 9, d_k = 5)")
