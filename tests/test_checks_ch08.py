"""Every chapter 8 check accepts the reference solution and rejects plausible wrong answers with a hint."""

import math

import pytest
import torch

import attn_helpers as ah
from attn_helpers import circuits, position
from attn_helpers.checks import CheckFailed
from attn_helpers.checks import ch08 as check
from attn_helpers.circuits import qk_circuit as circuit_by_its_own_name  # the shortcuts, imported by name
from attn_helpers.position import rope as rope_by_its_own_name

# ---------------------------------------------------------------- ex-ch08-shuffle


def _shuffle_parts():
    X, perm = check.exercise_sequence(), check.exercise_permutation()
    return X, perm, ah.position.sinusoidal_encoding(6, 8)


def _attend(Z, **kwargs):
    return ah.attention(Z, Z, Z, **kwargs)[0]


def test_shuffled_with_positions_accepts_solution(capsys):
    X, perm, pe = _shuffle_parts()
    check.shuffled_with_positions(_attend(X[perm] + pe))
    out = capsys.readouterr().out
    assert "✓ out_ex: correct" in out
    assert "reordered" not in out  # the pass message must not give away the prediction


@pytest.mark.parametrize("wrong, hint", [
    (lambda X, perm, pe: _attend(X + pe)[perm], "added the encodings before shuffling"),
    (lambda X, perm, pe: _attend((X + pe)[perm]), "added the encodings before shuffling"),
    (lambda X, perm, pe: _attend(X[perm]), "forgot the position encodings"),
    (lambda X, perm, pe: _attend(X[perm] + pe, scale=1.0), "default scale"),
    (lambda X, perm, pe: _attend(X + pe), "unshuffled outputs"),
    (lambda X, perm, pe: _attend(X[perm] + pe)[:, :4], "shape"),
])
def test_shuffled_with_positions_rejects_mistakes(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.shuffled_with_positions(wrong(*_shuffle_parts()))


# ---------------------------------------------------------------- ex-ch08-rope


def _reference_rope(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2) / d)
    angles = positions[:, None] * theta
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def test_rope_function_accepts_solution(capsys):
    check.rope_function(_reference_rope)
    out = capsys.readouterr().out
    assert "✓ my_rope(x, positions): correct" in out and "✓ my_rope on x of shape (3, 4, 6): correct" in out


def test_rope_function_rejects_d_written_in():
    def rope_d8(x, positions):  # right for the exercise's d = 8 only
        theta = 10000.0 ** (-torch.arange(0, 8, 2) / 8)
        angles = positions[:, None] * theta
        cos, sin = torch.cos(angles), torch.sin(angles)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)

    x, positions = torch.ones(2, 3, 8), torch.arange(3)
    assert torch.allclose(rope_d8(x, positions), _reference_rope(x, positions), atol=1e-5)
    with pytest.raises(CheckFailed, match="take d from the last dimension of x"):
        check.rope_function(rope_d8)


def _backwards(x, positions):
    return _reference_rope(x, -positions)


def _neox(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2) / d)
    angles = positions[:, None] * theta
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * torch.cos(angles) - b * torch.sin(angles), a * torch.sin(angles) + b * torch.cos(angles)], -1)


def _slow(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d // 2) / d)
    angles = positions[:, None] * theta
    out = torch.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * torch.cos(angles) - x[..., 1::2] * torch.sin(angles)
    out[..., 1::2] = x[..., 0::2] * torch.sin(angles) + x[..., 1::2] * torch.cos(angles)
    return out


@pytest.mark.parametrize("wrong, hint", [
    (_backwards, "wrong way"),
    (_neox, "GPT-NeoX"),
    (_slow, r"10000\^\(−2i/d\)"),
    (lambda x, positions: x, "x is unchanged"),
    (lambda x, positions: _reference_rope(x, torch.arange(x.shape[-2])), "ignored the positions"),
    (lambda x, positions: _reference_rope(x, positions - positions[0]), "from the first one"),
    (lambda x, positions: _reference_rope(x, positions - positions.min()), "from the smallest one"),
    (lambda x, positions: ah.position.rope(x, positions), "do not call ah.position.rope"),
    (lambda x, positions: position.rope(x, positions), "do not call ah.position.rope"),
    (lambda x, positions: rope_by_its_own_name(x, positions), "do not call ah.position.rope"),
])
def test_rope_function_rejects_mistakes_and_the_shortcut(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.rope_function(wrong)
    assert ah.position.rope is position.rope                          # the shortcut guard restores both names
    assert ah.position.rope(torch.ones(1, 2)).shape == (1, 2)


# ---------------------------------------------------------------- ex-ch08-circuit


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(5)
    return circuits.AttentionOnly(24, 20, 16, 2)             # the check needs no training to compare formulas


def _by_hand(m):
    E = m.embed.weight
    l1, l2 = m.layers
    written = E @ l1.W_v.weight.T @ l1.W_o.weight.T
    return (E @ l2.W_q.weight.T) @ (written @ l2.W_k.weight.T).T / math.sqrt(l2.d_k)


def test_qk_circuit_function_accepts_solution(model, capsys):
    check.qk_circuit_function(_by_hand, model)
    out = capsys.readouterr().out
    assert "chapter's model: correct" in out and "freshly initialised model: correct" in out


def _direct(m):
    E, l2 = m.embed.weight, m.layers[1]
    return (E @ l2.W_q.weight.T) @ (E @ l2.W_k.weight.T).T / math.sqrt(l2.d_k)


def _no_wo(m):
    E, (l1, l2) = m.embed.weight, m.layers
    return (E @ l2.W_q.weight.T) @ (E @ l1.W_v.weight.T @ l2.W_k.weight.T).T / math.sqrt(l2.d_k)


def _layer1(m):
    E, l1 = m.embed.weight, m.layers[0]
    written = E @ l1.W_v.weight.T @ l1.W_o.weight.T
    return (E @ l1.W_q.weight.T) @ (written @ l1.W_k.weight.T).T / math.sqrt(l1.d_k)


@pytest.mark.parametrize("wrong, hint", [
    (_direct, "previous"),
    (lambda m: _by_hand(m) * math.sqrt(m.layers[1].d_k), "scale"),
    (_no_wo, "W_O"),
    (lambda m: _by_hand(m).T, "swapped"),
    (_layer1, "layer 2"),
    (lambda m: circuits.qk_circuit(m), "do not call circuits.qk_circuit"),
    (lambda m: circuit_by_its_own_name(m), "do not call circuits.qk_circuit"),
])
def test_qk_circuit_function_rejects_mistakes_and_the_shortcut(model, wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.qk_circuit_function(wrong, model)
    assert callable(circuits.qk_circuit) and circuits.qk_circuit(model).shape == (24, 24)


def test_qk_circuit_function_names_a_global_model(model):  # right formula, but of the chapter's model, not the argument
    with pytest.raises(CheckFailed, match="not of the model your function was given") as failed:
        check.qk_circuit_function(lambda m: _by_hand(model), model)
    assert "freshly initialised" in str(failed.value)


def test_qk_circuit_function_leaves_the_random_state_alone(model):
    state = torch.random.get_rng_state()
    check.qk_circuit_function(_by_hand, model)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_qk_circuit_function_rejects_a_hard_coded_answer(model):
    fixed = _by_hand(model).detach()
    with pytest.raises(CheckFailed, match="freshly initialised"):
        check.qk_circuit_function(lambda m: fixed, model)


def test_qk_circuit_function_needs_the_model():
    with pytest.raises(CheckFailed, match="two-layer model"):
        check.qk_circuit_function(_by_hand, circuits.AttentionOnly(24, 20, 16, 1))


# ---------------------------------------------------------------- ex-ch08-pieces


@pytest.fixture(scope="module")
def pieces():
    from attn_helpers import depth

    X = ah.GloVe().embed(ah.explore.ODYSSEY_SENTENCE)
    return {
        "residual": depth.stack_attention(X, 12, residual=True),
        "layer_norm": depth.stack_attention(X, 12, layer_norm=True),
        "both": depth.stack_attention(X, 12, residual=True, layer_norm=True),
        "plain": depth.stack_attention(X, 12),
        "residual_13": depth.stack_attention(X, 13, residual=True),
    }


def collapsed(values):
    return next(layers for layers, r in enumerate(values) if r < 1e-12)


def test_collapse_pieces_accepts_solution(pieces, capsys):
    check.collapse_pieces(pieces["residual"][-1], collapsed(pieces["layer_norm"]))
    out = capsys.readouterr().out
    assert "✓ r_residual: correct" in out and "✓ collapsed_layer_norm: correct" in out


def test_layer_norm_alone_only_postpones_the_collapse(pieces):  # what the solution says: by one layer
    assert collapsed(pieces["layer_norm"]) == collapsed(pieces["plain"]) + 1


@pytest.mark.parametrize("wrong, hint", [
    (lambda p: (p["layer_norm"][-1], collapsed(p["layer_norm"])), "collapsed to round-off"),
    (lambda p: (p["both"][-1], collapsed(p["layer_norm"])), "both pieces"),
    (lambda p: (p["plain"][-1], collapsed(p["layer_norm"])), "neither piece"),  # also collapsed: either hint fits
    (lambda p: (p["residual"][0], collapsed(p["layer_norm"])), "before the first layer"),
    (lambda p: (p["residual"][-2], collapsed(p["layer_norm"])), "after 11 layers"),
    (lambda p: (p["residual_13"][-1], collapsed(p["layer_norm"])), "after 13 layers"),
    (lambda p: (p["residual"][-1], collapsed(p["plain"])), "neither piece collapses"),   # attention alone
    (lambda p: (p["residual"][-1], collapsed(p["layer_norm"]) + 1), "count from 0"),
    (lambda p: (p["residual"][-1], p["layer_norm"][-1]), "is not right"),             # r after 12 layers instead
    (lambda p: (p["residual"][-1], 0.0), "is not right"),
    (lambda p: (p["residual"][-1], "6"), "should be a number"),
])
def test_collapse_pieces_rejects_mistakes(pieces, wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        check.collapse_pieces(*wrong(pieces))


def _folded_in_place(m):  # right: folds the scale into layer 2's W_q first (the check hands it a copy)
    l2 = m.layers[1]
    l2.W_q.weight /= math.sqrt(l2.d_k)
    return _by_hand(m) * math.sqrt(l2.d_k)


def _zeroed(m):  # wrong: zeroes the weights, then returns the zeros the check would then expect
    m.layers[1].W_q.weight.zero_()
    return torch.zeros(m.vocab_size, m.vocab_size)


def test_qk_circuit_function_hands_the_function_a_copy(model, capsys):
    before = [p.clone() for p in model.parameters()]
    check.qk_circuit_function(_folded_in_place, model)
    assert capsys.readouterr().out.count("correct") == 2
    with pytest.raises(CheckFailed, match="the circuit of the chapter's model"):
        check.qk_circuit_function(_zeroed, model)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # the model untouched
