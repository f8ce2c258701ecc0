"""Chapter 12's self-checks accept the reference answers and name the mistake in plausible wrong ones."""

from fractions import Fraction

import pytest
import torch

import attn_helpers as ah
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch12 as check
from attn_helpers.linear_attention import feature_map

# ex-ch12-predict: the bytes a token adds to an MLA cache

L, H, D_K, D_C, D_R, B = 4, 8, 32, 64, 16, 2


def test_mla_bytes_accepts_reference(capsys):
    check.mla_bytes(L * (D_C + D_R) * B)
    assert "✓ mla_bytes: correct" in capsys.readouterr().out


def test_mla_bytes_accepts_the_measured_cache(capsys):
    torch.manual_seed(0)
    layer = ah.latent.LatentAttention(H * D_K, H, D_C, D_R).to(check.DTYPE)
    with torch.no_grad():
        _, cache = layer(torch.randn(1, 10, H * D_K, dtype=check.DTYPE))
    check.mla_bytes(check.N_LAYERS * cache.nbytes // 10)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (2 * L * H * D_K * B, "not the keys and values of every head"),
    (L * (2 * D_C + D_R) * B, "cached once, not twice"),
    (L * (D_C + H * D_R) * B, "one per token, not one per head"),
    (L * D_C * B, "RoPE key is cached too"),
    (L * (D_C + D_R), "counts numbers"),
    (2 * L * H * D_K, "multi-head attention"),
    (L * (D_C + D_R) * 4, "2 bytes, not 4"),
    (L * 2 * (D_C + D_R) * B, "counted twice"),
    (8 * L * (D_C + D_R) * B, "counts bits"),
    (L * (H * D_C + D_R) * B, "one c per token, not one per head"),
    (L * H * (D_C + D_R) * B, "a latent and a RoPE key of its own"),
    (L * H * (D_K + D_R) * B, "what the long way builds"),
    ((D_C + D_R) * 4, "one layer"),
    (D_C + D_R, "numbers of one layer"),
    ((D_C + D_R) * B, "number of layers"),
    (700, "is not right"),
    ("640", "should be a number"),
])
def test_mla_bytes_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.mla_bytes(wrong)


# ex-ch12-recurrent: linear attention one token at a time


def reference_recurrent(q, k, v, decay):
    fq, fk = feature_map(q), feature_map(k)
    S, z = q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1])
    outs = []
    for i in range(q.shape[0]):
        S = decay * S + torch.outer(fk[i], v[i])
        z = decay * z + fk[i]
        outs.append(fq[i] @ S / (fq[i] @ z))
    return torch.stack(outs)


def with_(change):
    """The reference with one step changed: 'no_decay', 'z_no_decay', 'S_no_decay', 'no_norm', 'no_phi', 'phi_q_only',
    'phi_k_only', 'absolute', 'decay_after_read', 'read_first'."""
    def fn(q, k, v, decay):
        fq = q if change in ("no_phi", "phi_k_only") else feature_map(q)
        fk = k if change in ("no_phi", "phi_q_only") else feature_map(k)
        S, z = q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1])
        outs = []
        for i in range(q.shape[0]):
            if change == "read_first":
                outs.append(fq[i] @ S / (fq[i] @ z))
            if change == "absolute":  # key i weighed by decay ** i, its position
                S, z = S + decay ** i * torch.outer(fk[i], v[i]), z + decay ** i * fk[i]
            elif change == "decay_after_read":
                S, z = S + torch.outer(fk[i], v[i]), z + fk[i]
            else:
                S = (1 if change in ("no_decay", "S_no_decay") else decay) * S + torch.outer(fk[i], v[i])
                z = (1 if change in ("no_decay", "z_no_decay") else decay) * z + fk[i]
            if change != "read_first":
                outs.append(fq[i] @ S if change == "no_norm" else fq[i] @ S / (fq[i] @ z))
            if change == "decay_after_read":
                S, z = decay * S, decay * z
        return torch.stack(outs)
    return fn


def parallel_by_hand(q, k, v, decay):  # builds the t × t matrix: the form the exercise rules out
    t = q.shape[0]
    i = torch.arange(t)
    D = torch.where(i[:, None] >= i[None], decay ** (i[:, None] - i[None]).clamp_min(0).double(), 0.0)
    A = feature_map(q) @ feature_map(k).T * D
    return (A @ v) / A.sum(-1, keepdim=True)


def broadcast_pairs(q, k, v, decay):  # a (t, t, d_k) tensor of every query-key pair, never a (t, t) matrix by mm
    t = q.shape[0]
    i = torch.arange(t)
    D = torch.where(i[:, None] >= i[None], decay ** (i[:, None] - i[None]).clamp_min(0).double(), 0.0)
    A = (feature_map(q)[:, None, :] * feature_map(k)[None, :, :]).sum(-1) * D
    return (A @ v) / A.sum(-1, keepdim=True)


def row_by_row(q, k, v, decay):  # each new token weighs every earlier key again: attention over a cache, no state
    fq, fk = feature_map(q), feature_map(k)
    outs = []
    for i in range(q.shape[0]):
        w = (fk[:i + 1] @ fq[i]) * decay ** torch.arange(i, -1, -1, dtype=q.dtype)  # (i + 1,)
        outs.append(w @ v[:i + 1] / w.sum())
    return torch.stack(outs)


def masked_rows(q, k, v, decay):  # each row weighs all t keys under a decay mask: no state at all
    fq, fk = feature_map(q), feature_map(k)
    t = q.shape[0]
    outs = []
    for i in range(t):
        j = torch.arange(t)
        w = (fk @ fq[i]) * torch.where(j <= i, decay ** (i - j).clamp_min(0).double(), 0.0)  # (t,)
        outs.append(w @ v / w.sum())
    return torch.stack(outs)


def rebuilt_state(q, k, v, decay):  # the state rebuilt from every earlier token at each step
    fq, fk = feature_map(q), feature_map(k)
    outs = []
    for i in range(q.shape[0]):
        S, z = q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1])
        for j in range(i + 1):
            S = S + decay ** (i - j) * torch.outer(fk[j], v[j])
            z = z + decay ** (i - j) * fk[j]
        outs.append(fq[i] @ S / (fq[i] @ z))
    return torch.stack(outs)


def kept_states(q, k, v, decay):  # right, but a list that holds every state: memory that grows with t
    fq, fk = feature_map(q), feature_map(k)
    states = [(q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1]))]
    outs = []
    for i in range(q.shape[0]):
        S, z = states[-1]
        states.append((decay * S + torch.outer(fk[i], v[i]), decay * z + fk[i]))
        outs.append(fq[i] @ states[-1][0] / (fq[i] @ states[-1][1]))
    return torch.stack(outs)


def stacked_features(q, k, v, decay):  # right: φ applied to q_i and k_i stacked, one token at a time
    S, z = q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1])
    outs = []
    for i in range(q.shape[0]):
        fq_i, fk_i = feature_map(torch.stack([q[i], k[i]]))
        S = decay * S + torch.outer(fk_i, v[i])
        z = decay * z + fk_i
        outs.append(fq_i @ S / (fq_i @ z))
    return torch.stack(outs)


def einsum_state(q, k, v, decay):  # right, with einsum and in-place updates
    fq, fk = feature_map(q), feature_map(k)
    S, z = q.new_zeros(q.shape[1], v.shape[1]), q.new_zeros(q.shape[1])
    out = q.new_empty(q.shape[0], v.shape[1])
    for i in range(q.shape[0]):
        S.mul_(decay).add_(torch.einsum("d,e->de", fk[i], v[i]))
        z.mul_(decay).add_(fk[i])
        out[i] = torch.einsum("d,de->e", fq[i], S) / torch.dot(fq[i], z)
    return out


def all_states(q, k, v, decay):  # every token's state at once, (t, d_k, d_v), by a cumulative sum
    fq, fk = feature_map(q), feature_map(k)
    p = decay ** torch.arange(q.shape[0], dtype=q.dtype)  # (t,)
    S = torch.cumsum((fk / p[:, None])[:, :, None] * v[:, None, :], 0) * p[:, None, None]  # (t, d_k, d_v)
    z = torch.cumsum(fk / p[:, None], 0) * p[:, None]  # (t, d_k)
    return torch.einsum("td,tdv->tv", fq, S) / (fq * z).sum(-1, keepdim=True)


def state_transposed(q, k, v, decay):  # a (d_v, d_k) state is as good as a (d_k, d_v) one
    fq, fk = feature_map(q), feature_map(k)
    S, z = q.new_zeros(v.shape[1], q.shape[1]), q.new_zeros(q.shape[1])
    outs = []
    for i in range(q.shape[0]):
        S, z = decay * S + torch.outer(v[i], fk[i]), decay * z + fk[i]
        outs.append(S @ fq[i] / (fq[i] @ z))
    return torch.stack(outs)


def double_loop(q, k, v, decay):  # the likeliest mistake: each token's dot product with every earlier key, again
    fq, fk = feature_map(q), feature_map(k)
    outs = []
    for i in range(q.shape[0]):
        num, den = q.new_zeros(v.shape[1]), q.new_zeros(())
        for j in range(i + 1):
            w = decay ** (i - j) * (fq[i] @ fk[j])
            num, den = num + w * v[j], den + w
        outs.append(num / den)
    return torch.stack(outs)


def double_loop_of_items(q, k, v, decay):  # the same, with Python numbers for the weights, into a preallocated output
    fq, fk = feature_map(q), feature_map(k)
    out = q.new_zeros(q.shape[0], v.shape[1])
    for i in range(q.shape[0]):
        den = 0.0
        for j in range(i + 1):
            w = decay ** (i - j) * torch.dot(fq[i], fk[j]).item()
            out[i] += w * v[j]
            den += w
        out[i] /= den
    return out


def list_of_keys(q, k, v, decay):  # a growing Python list of decayed keys, read at every step: a cache
    fq, fk = feature_map(q), feature_map(k)
    keys, values, outs = [], [], []
    for i in range(q.shape[0]):
        keys = [key * decay for key in keys] + [fk[i]]
        values.append(v[i])
        w = [fq[i] @ key for key in keys]
        outs.append(sum(a * b for a, b in zip(w, values, strict=True)) / sum(w))
    return torch.stack(outs)


def every_key_with_zeros(q, k, v, decay):  # a weight for all t keys, zero for the later ones, one at a time
    fq, fk = feature_map(q), feature_map(k)
    t, outs = q.shape[0], []
    for i in range(t):
        w = torch.stack([decay ** (i - j) * (fq[i] @ fk[j]) if j <= i else q.new_zeros(()) for j in range(t)])
        outs.append(w @ v / w.sum())
    return torch.stack(outs)


def keys_as_columns(q, k, v, decay):  # a (d_k, i + 1) cache of keys, grown by one column a token
    fq, fk = feature_map(q), feature_map(k)
    K, V, outs = q.new_zeros(q.shape[1], 0), q.new_zeros(0, v.shape[1]), []
    for i in range(q.shape[0]):
        K, V = torch.cat([K * decay, fk[i][:, None]], 1), torch.cat([V, v[i][None]])
        w = fq[i] @ K
        outs.append(w @ V / w.sum())
    return torch.stack(outs)


def in_numpy(q, k, v, decay):  # the parallel form, computed where the check cannot watch
    import numpy as np

    fq, fk, v = feature_map(q).numpy(), feature_map(k).numpy(), v.numpy()
    i = np.arange(len(fq))
    A = fq @ fk.T * np.where(i[:, None] >= i, decay ** np.clip(i[:, None] - i, 0, None), 0.0)
    return torch.from_numpy(A @ v / A.sum(-1, keepdims=True))


def in_python_lists(q, k, v, decay):  # the double loop on Python lists
    fq, fk, v = feature_map(q).tolist(), feature_map(k).tolist(), v.tolist()
    out = []
    for i in range(len(fq)):
        w = [decay ** (i - j) * sum(a * b for a, b in zip(fq[i], fk[j], strict=True)) for j in range(i + 1)]
        out.append([sum(w[j] * v[j][e] for j in range(i + 1)) / sum(w) for e in range(len(v[0]))])
    return torch.tensor(out, dtype=q.dtype)


def in_python_numbers(q, k, v, decay):  # every number read out with float(), then the same double loop
    fq, fk = ([[float(x) for x in row] for row in feature_map(m)] for m in (q, k))
    v_ = [[float(x) for x in row] for row in v]
    out = []
    for i in range(len(fq)):
        w = [decay ** (i - j) * sum(a * b for a, b in zip(fq[i], fk[j], strict=True)) for j in range(i + 1)]
        out.append([sum(w[j] * v_[j][e] for j in range(i + 1)) / sum(w) for e in range(len(v_[0]))])
    return torch.tensor(out, dtype=q.dtype)


def fixed_size(q, k, v, decay):  # right on the exercise's inputs, with a size written in
    return reference_recurrent(q[:11], k, v, 0.8)


def test_recurrent_accepts_reference(capsys):
    check.recurrent_function(reference_recurrent)
    out = capsys.readouterr().out
    assert "✓ linear_step_by_step(q, k, v, decay): correct" in out and "t = 7" in out


@pytest.mark.parametrize("right", [state_transposed, stacked_features, einsum_state, with_("decay_after_read")])
def test_recurrent_accepts_other_right_answers(right, capsys):
    check.recurrent_function(right)
    assert "t = 7, d_k = 5, d_v = 2, decay 0.6: correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (with_("no_decay"), "the decay is missing"),
    (with_("z_no_decay"), "only the state fades, not the normaliser"),
    (with_("S_no_decay"), "only the normaliser fades, not the state"),
    (with_("no_norm"), "not divided by the normaliser"),
    (with_("no_phi"), "feature map is missing"),
    (with_("phi_q_only"), "queries only"),
    (with_("phi_k_only"), "keys only"),
    (with_("absolute"), "position in the sequence, not how far back"),
    (with_("read_first"), "NaN"),
    (masked_rows, "weighs all t = 11 keys at once"),
    (rebuilt_state, "rebuilds the state"),
    (kept_states, "a state for every token"),
    (parallel_by_hand, "t × t"),
    (broadcast_pairs, "t × t"),
    (row_by_row, "attention over a cache, not a state"),
    (all_states, "one \\(d_k, d_v\\) matrix for every token"),
    (lambda q, k, v, decay: ah.linear_attention.recurrent(q, k, v, decay)[0], "linear_attention.recurrent"),
    (lambda q, k, v, decay: ah.linear_attention.chunked(q, k, v, 2, decay), "linear_attention.chunked"),
    (lambda q, k, v, decay: ah.linear_attention.chunked(q, k, v, 2, decay) + 0 * ah.linear_attention.recurrent(
        q, k, v, decay)[0], "calls ah.linear_attention.chunked, ah.linear_attention.decay_mask and "
                            "ah.linear_attention.recurrent, which"),  # listed as a sentence lists them
    (lambda q, k, v, decay: torch.softmax(q @ k.T, -1) @ v, "softmax"),
    (double_loop, "4 times the tokens take 1[0-9] times the operations.*not a recurrence"),
    (double_loop_of_items, "each token costs more than the one before"),
    (list_of_keys, "each token costs more than the one before"),
    (every_key_with_zeros, "each token costs more than the one before"),
    (keys_as_columns, "attention over a cache, not a state"),
    (in_numpy, "takes the numbers out of PyTorch"),
    (in_python_lists, "takes the numbers out of PyTorch"),
    (in_python_numbers, "reads 220 single numbers"),
    (fixed_size, "decay argument"),
    (lambda q, k, v, decay: reference_recurrent(q.float(), k.float(), v.float(), decay), "float64"),
])
def test_recurrent_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.recurrent_function(wrong)


# ex-ch12-tree: the verification mask of a draft tree


def reference_verify_mask(parents, n_cached):
    n = len(parents)
    tree = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            tree[i] |= tree[p]
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree], dim=1)


def test_verify_mask_accepts_reference(capsys):
    check.verify_mask_function(reference_verify_mask)
    assert "✓ verify_mask: correct" in capsys.readouterr().out


def causal(parents, n_cached):
    n = len(parents)
    return torch.ones(n, n_cached + n, dtype=torch.bool).tril(diagonal=n_cached)


def roots_only_see_the_cache(parents, n_cached):
    m = reference_verify_mask(parents, n_cached)
    m[:, :n_cached] &= torch.tensor([p < 0 for p in parents])[:, None]
    return m


def with_earlier_siblings(parents, n_cached):
    n = len(parents)
    tree = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            tree[i] |= tree[p]
        for j in range(i):
            tree[i, j] |= parents[j] == p
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree], dim=1)


def parent_only(parents, n_cached):
    n = len(parents)
    tree = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            tree[i, p] = True
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree], dim=1)


def without_diagonal(parents, n_cached):
    m = reference_verify_mask(parents, n_cached)
    m[:, n_cached:] &= ~torch.eye(len(parents), dtype=torch.bool)
    return m


def transposed(parents, n_cached):
    m = reference_verify_mask(parents, n_cached)
    m[:, n_cached:] = m[:, n_cached:].T.clone()
    return m


def walk_stops_before_0(parents, n_cached):
    n = len(parents)
    tree = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        j = i
        while j > 0:
            tree[i, j] = True
            j = parents[j]
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree], dim=1)


def root_reads_last_row(parents, n_cached):
    n = len(parents)
    tree = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        tree[i] |= tree[p]
    return torch.cat([torch.ones(n, n_cached, dtype=torch.bool), tree], dim=1)


def walk_up(parents, n_cached):  # right: each token walks up its parents
    n = len(parents)
    mask = torch.zeros(n, n_cached + n, dtype=torch.bool)
    mask[:, :n_cached] = True
    for i in range(n):
        j = i
        while j != -1:
            mask[i, n_cached + j] = True
            j = parents[j]
    return mask


def test_verify_mask_accepts_a_walk_up_the_parents(capsys):
    check.verify_mask_function(walk_up)
    assert "✓ verify_mask: correct" in capsys.readouterr().out


SAVED = reference_verify_mask(check.PARENTS, check.N_CACHED)
OTHER_SAVED = torch.zeros(len(check.PARENTS), check.N_CACHED + len(check.PARENTS) + 1, dtype=torch.bool)


@pytest.mark.parametrize("wrong, hint", [
    (causal, "not a chain"),
    (parent_only, "all its ancestors"),
    (without_diagonal, "sees itself"),
    (transposed, "not its descendants"),
    (roots_only_see_the_cache, "may see all the cached tokens"),
    (with_earlier_siblings, "does not see its siblings"),
    (walk_stops_before_0, "stops too early"),
    (root_reads_last_row, "LAST row"),
    (lambda p, n: ~reference_verify_mask(p, n), "inverted"),
    (lambda p, n: reference_verify_mask(p, n).roll(-n, dims=1), "columns come first"),
    (lambda p, n: reference_verify_mask(p, n)[:, n:], "n_cached more columns"),
    (lambda p, n: reference_verify_mask(p, n).int(), "bool tensor"),
    (lambda p, n: torch.cat([torch.ones(len(p), n, dtype=torch.bool), ah.speculative.tree_mask(p)], 1), "tree_mask"),
    (lambda p, n: SAVED, "SAVED"),
    (lambda p, n: SAVED | OTHER_SAVED[:, :SAVED.shape[1]], "reads OTHER_SAVED and SAVED, which"),  # as a sentence lists
    (lambda p, n: reference_verify_mask(p, 5), "take every size"),
    (lambda p, n: reference_verify_mask(p.shape, n), "raised AttributeError"),
])
def test_verify_mask_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.verify_mask_function(wrong)


# ex-ch12-sampling: speculative sampling's rule, checked by exact enumeration

F = Fraction


def excess(p, q):
    return [max(F(0), a - b) for a, b in zip(p, q, strict=True)]


def norm(values):
    return [v / sum(values) for v in values]


def reference_rule(p, q, x):
    return min(F(1), p[x] / q[x]), norm(excess(p, q))


def rule_by_cases(p, q, x):  # right, written another way: keep outright where p >= q
    keep = F(1) if p[x] >= q[x] else p[x] / q[x]
    left = [p[y] - q[y] if p[y] > q[y] else 0 for y in range(len(p))]
    return keep, [v / sum(left) for v in left]


def half_as_often(p, q, x):  # emits p exactly, but keeps each draft half as often as it could
    keep = [min(F(1), p[y] / q[y]) / 2 if q[y] else F(0) for y in range(len(p))]
    return keep[x], norm([p[y] - q[y] * keep[y] for y in range(len(p))])


def test_sampling_rule_accepts_reference(capsys):
    check.sampling_rule_function(reference_rule)
    assert "✓ speculative_rule: correct" in capsys.readouterr().out


def test_sampling_rule_accepts_another_right_answer(capsys):
    check.sampling_rule_function(rule_by_cases)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda p, q, x: (min(F(1), p[x] / q[x]), list(p)), "draw from p itself"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), list(q)), "draw from the draft's q"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), norm(excess(q, p))), "the wrong way round"),
    (lambda p, q, x: (min(F(1), q[x] / p[x]), norm(excess(p, q))), "upside down"),
    (lambda p, q, x: (p[x], norm(excess(p, q))), "ignores how often the draft proposes it"),
    (lambda p, q, x: (F(int(p[x] >= q[x])), norm(excess(p, q))), "between 0 and 1"),
    (lambda p, q, x: (p[x] / q[x], norm(excess(p, q))), "above 1"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), excess(p, q)), "divided by its own total"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), [a - b for a, b in zip(p, q, strict=True)]), "negative entry"),
    (lambda p, q, x: (F(1), list(p)), "keeps every draft token"),
    (lambda p, q, x: (F(0), list(p)), "no draft is ever kept"),
    (half_as_often, "kept less often than it could be"),
    (lambda p, q, x: (min(1.0, float(p[x] / q[x])), norm(excess(p, q))), "not an exact fraction"),
    (lambda p, q, x: min(F(1), p[x] / q[x]), "return two things"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), norm(excess(p, q))[:3]), "list of 4 probabilities"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]) / 2, norm(excess(p, q))), "total-variation distance"),
    (lambda p, q, x: ah.speculative.sampling_rule(p, q, x), "ah.speculative.sampling_rule"),
    (lambda p, q, x: (min(F(1), p[x] / q[x]), norm(excess(p, q)) if len(p) == 4 else list(p)),
     "right on the exercise's inputs. Hint: a rejected draft"),
])
def test_sampling_rule_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.sampling_rule_function(wrong)


def test_no_hint_of_chapter_12_quotes_its_solution():
    """A hint names the mistake and the idea, never a line or an expression of the solution (issue 40)."""
    import inspect
    import re

    from attn_helpers.checks import _ch12_recurrent, _ch12_sampling, ch12
    source = "".join(inspect.getsource(module) for module in (ch12, _ch12_recurrent, _ch12_sampling))
    hints = " ".join(re.findall(r'"([^"]*)"', source))
    solutions = ["S = decay * S + torch.outer(fk[i], v[i])", "z = decay * z + fk[i]", "fq[i] @ S / (fq[i] @ z)",
                 "tree[i] |= tree[p]", "min(F(1), p[x] / q[x])", "max(F(0), a - b)",
                 "check.N_LAYERS * (check.D_C + check.D_ROPE) * 2"]
    for line in solutions:
        tokens = re.findall(r"\w+|[^\w\s]", line)
        for n in range(len(tokens) - 4):
            piece = tokens[n:n + 5]
            assert not re.search(r"\s*".join(map(re.escape, piece)), hints), f"a hint quotes {' '.join(piece)!r}"
    for symbols in ("z = decay · z + φ(k_i)", "φ(q_i)ᵀ S / φ(q_i)ᵀ z", "γ z"):
        assert symbols not in hints


def test_the_prediction_is_not_shown_before_it_is_made():
    """Exercise 12.1 asks for a prediction: no output or glued number of the chapter, outside the folded
    solution, shows its answer (issue 39)."""
    import json
    from pathlib import Path

    answer = str(check.N_LAYERS * (check.D_C + check.D_ROPE) * 2)
    chapter = Path(__file__).parent.parent / "chapters" / "12_cost_of_the_cache.ipynb"
    for cell in json.loads(chapter.read_text())["cells"]:
        if cell["cell_type"] != "code" or "solution" in cell["metadata"].get("tags", []):
            continue
        for output in cell.get("outputs", []):
            parts = [output.get("text", "")] + [output.get("data", {}).get(kind, "")
                                                for kind in ("text/plain", "text/html")]
            shown = " ".join("".join(part) if isinstance(part, list) else part for part in parts)
            assert f" {answer} " not in f" {shown} ".replace("\n", " ").replace("<", " ").replace(">", " ")
