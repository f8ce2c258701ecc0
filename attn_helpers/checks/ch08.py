"""Self-checks for the exercises of chapter 8 (chapter 8; see ``attn_helpers.checks``)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch

from .. import circuits, depth, position
from ..attention import attention
from ..explore import ODYSSEY_SENTENCE
from ..glove import GloVe
from . import CheckFailed, Watch, call, check_tensor, check_value, on_other_sizes

__all__ = [
    "exercise_sequence",
    "exercise_permutation",
    "shuffled_with_positions",
    "collapse_pieces",
    "rope_function",
    "qk_circuit_function",
]


def exercise_sequence() -> torch.Tensor:
    """The sequence X of exercise ex-ch08-shuffle: (t, d) = (6, 8)."""
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(801))


def exercise_permutation() -> torch.Tensor:
    """The new order of the tokens in exercise ex-ch08-shuffle: a permutation of 0 … 5."""
    return torch.tensor([3, 0, 5, 1, 4, 2])


def shuffled_with_positions(out: torch.Tensor) -> None:
    """Exercise ex-ch08-shuffle: attention outputs (6, 8) of the shuffled tokens with sinusoidal positions."""
    X, perm = exercise_sequence(), exercise_permutation()
    pe = position.sinusoidal_encoding(*X.shape)  # (t, d): one encoding per slot 0 … t-1
    Z = X[perm] + pe
    expected, _ = attention(Z, Z, Z)
    carried, _ = attention(X + pe, X + pe, X + pe)
    check_tensor(out, expected, "out_ex", {
        "you added the encodings before shuffling, so each token took its position with it and the "
        "result is only the unshuffled output, reordered. Shuffle X_ex first, then add the encodings of "
        "positions 0 … t-1.": carried[perm],
        "you forgot the position encodings: add the sinusoidal encodings of positions 0 … t-1 to the shuffled "
        "tokens.":
            attention(X[perm], X[perm], X[perm])[0],
        "you used raw dot products; keep ah.attention's default scale 1/√d.": attention(Z, Z, Z, scale=1.0)[0],
        "these are the unshuffled outputs: shuffle the tokens with perm_ex first.": carried,
    })


def _collapsed_after(values: list[float]) -> int | None:
    return next((layers for layers, r in enumerate(values) if r < 1e-12), None)


def collapse_pieces(r_residual: float, collapsed_layer_norm: int) -> None:
    """Exercise ex-ch08-pieces: on the Odyssey sentence, r after 12 layers with the residual only, and the
    number of layers after which r is first below 1e-12 with LayerNorm only."""
    X = GloVe().embed(ODYSSEY_SENTENCE)  # (t, d) = (11, 50)
    residual = depth.stack_attention(X, 12, residual=True)
    layer_norm = depth.stack_attention(X, 12, layer_norm=True)
    plain = depth.stack_attention(X, 12)
    both = depth.stack_attention(X, 12, residual=True, layer_norm=True)[-1]
    check_value(r_residual, residual[-1], "r_residual", {
        "this r has collapsed to round-off, as with LayerNorm only or with neither piece; r_residual "
        "uses the residual connection alone.": layer_norm[-1],
        "this is attention with neither piece; add the residual connection.": plain[-1],
        "this is with both pieces; leave layer_norm out (False) for r_residual.": both,
        "this is r before the first layer; take the last value, after 12 layers: values[-1].": residual[0],
        "this is r after 11 layers; stack 12 and take the last value.": residual[-2],
        "this is r after 13 layers; stack 12 and take the last value.": depth.stack_attention(X, 13, residual=True)[-1],
    }, atol=0, rtol=1e-6)  # r changes by 1e-4 of itself from layer to layer: a tolerance 100 times finer
    expected = _collapsed_after(layer_norm)
    check_value(collapsed_layer_norm, expected, "collapsed_layer_norm", {
        "this is when attention with neither piece collapses; use LayerNorm alone.": _collapsed_after(plain),
        "values[0] is r before the first layer, so the index of the first value below 1e-12 is the number of "
        "layers; count from 0.": expected + 1,
    }, atol=0, rtol=0)


def rope_function(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise ex-ch08-rope: ``fn(x, positions)`` rotates pairs (2i, 2i+1) of ``x`` (…, t, d) by ``p θ_i``."""
    gen = torch.Generator().manual_seed(802)
    x = torch.randn(2, 5, 8, generator=gen)  # (b, t, d)
    positions = torch.tensor([4, 7, 11, 2, 16])  # not from 0: RoPE rotates by the positions as given
    message = "the exercise asks you to write RoPE yourself; do not call ah.position.rope or position.rope."
    with Watch([position.rope]) as watch:  # however the learner reached it: ah.position.rope, or an imported name
        answer = call(fn, x.clone(), positions.clone(), name="my_rope")
    if watch.called:
        raise CheckFailed(message)
    expected = position.rope(x, positions)
    angles = positions[:, None].double() * position.frequencies(8)  # (t, d/2)
    cos, sin = torch.cos(angles).float(), torch.sin(angles).float()
    even, odd = x[..., 0::2], x[..., 1::2]
    backwards = torch.stack([even * cos + odd * sin, -even * sin + odd * cos], dim=-1).flatten(-2)
    half1, half2 = x[..., :4], x[..., 4:]
    neox = torch.cat([half1 * cos - half2 * sin, half1 * sin + half2 * cos], dim=-1)
    slow = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 8)  # θ_i = base^(-i/d)
    a2 = positions[:, None].double() * slow
    c2, s2 = torch.cos(a2).float(), torch.sin(a2).float()
    wrong_freq = torch.stack([even * c2 - odd * s2, even * s2 + odd * c2], dim=-1).flatten(-2)
    check_tensor(answer, expected, "my_rope(x, positions)", {
        "the rotation goes the wrong way: the new even feature is x_2i cos − x_2i+1 sin, the new odd one "
        "x_2i sin + x_2i+1 cos.": backwards,
        "you paired feature i with feature i + d/2 (the GPT-NeoX layout); this exercise pairs neighbours "
        "(2i, 2i+1), as in the RoFormer paper.": neox,
        "the frequencies are θ_i = 10000^(−2i/d) for pair i, not 10000^(−i/d).": wrong_freq,
        "x is unchanged: rotate every pair by the angle p θ_i.": x,
        "you ignored the positions argument and used 0, 1, …, t-1.": position.rope(x),
        "you measured the positions from the first one; rotate each row by its position as given.":
            position.rope(x, positions - positions[0]),
        "you measured the positions from the smallest one; rotate each row by its position as given.":
            position.rope(x, positions - positions.min()),
    }, atol=1e-4)
    x2 = torch.randn(3, 4, 6, generator=gen)  # other sizes: (b, t, d) = (3, 4, 6)
    positions2 = torch.tensor([9, 3, 5, 0])
    other_sizes = ("my_rope", "x of shape (3, 4, 6)", "take d from the last dimension of x and t from the positions.")
    with on_other_sizes(*other_sizes), Watch([position.rope]) as watch:
        answer2 = call(fn, x2.clone(), positions2.clone(), name="my_rope")
    if watch.called:
        raise CheckFailed(message)
    with on_other_sizes(*other_sizes):
        check_tensor(answer2, position.rope(x2, positions2), "my_rope on x of shape (3, 4, 6)", atol=1e-4)


def _circuit_mistakes(model: circuits.AttentionOnly) -> dict[str, torch.Tensor]:
    E = model.embed.weight.detach()
    prev, head = model.layers[0], model.layers[1]
    Wq, Wk = head.W_q.weight.detach(), head.W_k.weight.detach()
    written = E @ prev.W_v.weight.detach().T @ prev.W_o.weight.detach().T
    scale = math.sqrt(head.d_k)
    right = (E @ Wq.T) @ (written @ Wk.T).T / scale
    return {
        "the keys come from the token embedding itself; an induction head's key is the *previous* token, "
        "which layer 1 writes into the key position: E W_V1ᵀ W_O1ᵀ.": (E @ Wq.T) @ (E @ Wk.T).T / scale,
        "you forgot the scale 1/√d_k.": right * scale,
        "you left out layer 1's output projection W_O: what it writes is E W_Vᵀ W_Oᵀ.":
            (E @ Wq.T) @ (E @ prev.W_v.weight.detach().T @ Wk.T).T / scale,
        "rows and columns are swapped: rows are the query's token, columns the key's previous token.": right.T,
        "you used layer 1's W_Q and W_K; the induction head is layer 2, the second of the model's layers.":
            (E @ prev.W_q.weight.detach().T) @ (written @ prev.W_k.weight.detach().T).T / scale,
    }


def qk_circuit_function(fn: Callable[[circuits.AttentionOnly], torch.Tensor], model: circuits.AttentionOnly) -> None:
    """Exercise ex-ch08-circuit: ``fn(model)`` returns layer 2's QK circuit (V, V), computed from the weights."""
    if not isinstance(model, circuits.AttentionOnly) or len(model.layers) < 2:
        raise CheckFailed("pass the chapter's two-layer model, `two_layer`, as the second argument.")
    with torch.random.fork_rng(devices=[]):  # leave the learner's random state alone
        torch.manual_seed(803)
        fresh = circuits.AttentionOnly(model.vocab_size, model.seq_len, model.d_model, 2)  # catches hard-coded answers
    message = "the exercise asks you to compute the circuit yourself; do not call circuits.qk_circuit."
    for name, m in (("the chapter's model", model), ("a freshly initialised model", fresh)):
        with Watch([circuits.qk_circuit]) as watch, torch.no_grad():
            answer = call(fn, copy.deepcopy(m), name="qk_circuit", given=name)  # a copy: fn cannot change the model
        if watch.called:
            raise CheckFailed(message)
        if isinstance(answer, torch.Tensor) and answer.shape == (m.vocab_size, m.vocab_size):
            answer = answer.detach()
        mistakes = _circuit_mistakes(m)
        if m is fresh:  # the right circuit, of the wrong model: the function read a global, not its argument
            global_model = ("this is the circuit of the chapter's model, not of the model your function was given: "
                            "read the weights from its argument, `model`, not from the global `two_layer`.")
            mistakes[global_model] = circuits.qk_circuit(model)
        check_tensor(answer, circuits.qk_circuit(m), f"the circuit of {name}", mistakes)
