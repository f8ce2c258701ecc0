"""Chapter 12's explorer: speculative sampling's draft q moved towards the uniform distribution or towards the target
p, with min(p, q), the residual it resamples from, the acceptance rate α and the tokens a round emits for k drafts."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import altair as alt
import pandas as pd

from .. import validate
from ..speculative import expected_tokens, mixed_draft
from ._explorer import INK, Explorer, rounded

__all__ = ["speculative_view", "speculative_explorer"]

#: The sliders: the draft's mix (-1: uniform, 0: the chapter's q, 1: p itself), its step, and the most drafts k.
MIX_STEP, K_MAX = 0.05, 8
WIDTH = 260  # px: each panel, with its axis, fits a phone
P_COLOUR, Q_COLOUR, SHARED, RESIDUAL, LINE = "#1f77b4", "#ff7f0e", "#a1d99b", "#9467bd", "#7f7f7f"


def speculative_view(p: Sequence, q: Sequence, mix: float, k: int) -> dict:
    """What :func:`speculative_explorer` shows with the draft at ``mix`` and ``k`` drafts a round (chapter 12).

    ``p``, ``q``: the target's and the draft's next-token probabilities (n each, summing to 1; fractions or
    floats). The draft shown is ``ah.speculative.mixed_draft(p, q, mix)``. Returns, as floats, the ``draft``
    (n), the ``overlap`` min(p, draft) (n), the ``residual`` max(p − draft, 0) normalised (n; all 0 when the draft
    is p and nothing is ever rejected), the acceptance rate ``alpha`` = Σ overlap, and ``tokens``, the expected
    tokens a round for k = 0 … ``K_MAX`` drafts (``ah.speculative.expected_tokens``), and ``at_k`` = tokens[k].
    """
    k = validate.integer(k, "k", minimum=1, maximum=K_MAX, why="the drafts a round the explorer shows")
    p, draft = validate.probabilities(p, "p"), mixed_draft(p, q, mix)  # exact fractions
    overlap = [min(a, b) for a, b in zip(p, draft, strict=True)]
    excess = [max(Fraction(0), a - b) for a, b in zip(p, draft, strict=True)]
    total = sum(excess)
    residual = [e / total if total else Fraction(0) for e in excess]
    tokens = [float(expected_tokens(p, draft, j)) for j in range(K_MAX + 1)]
    return {"draft": [float(x) for x in draft], "overlap": [float(x) for x in overlap],
            "residual": [float(x) for x in residual], "alpha": float(sum(overlap)), "tokens": tokens,
            "at_k": tokens[k]}


def _vega_draft() -> list[dict]:
    """The draft at the slider's ``mix``, min(p, q), the residual and α, one token a datum: what
    :func:`speculative_view` computes."""
    return [
        {"calculate": "mix < 0 ? (1 + mix) * datum.q - mix * datum.u : (1 - mix) * datum.q + mix * datum.p",
         "as": "d"},
        {"calculate": "min(datum.p, datum.d)", "as": "shared"},
        {"calculate": "max(datum.p - datum.d, 0)", "as": "excess"},
        {"joinaggregate": [{"op": "sum", "field": "shared", "as": "alpha"},
                           {"op": "sum", "field": "excess", "as": "rejected"}]},
        {"calculate": "datum.rejected > 0 ? datum.excess / datum.rejected : 0", "as": "r"},
    ]


def _distributions(n: int) -> alt.LayerChart:
    """p (left, blue) and the draft (right, orange) as outlined bars over each token, min(p, q) shaded across
    both; each token's mark is labelled with its four numbers."""
    x = alt.X("left:Q", title="token", scale=alt.Scale(domain=[-0.5, n - 0.5]),
              axis=alt.Axis(values=list(range(n)), format="d"))
    y = alt.Y("low:Q", title="probability", scale=alt.Scale(domain=[0, 1]))
    base = alt.Chart().transform_calculate(low="0")
    shared = base.transform_calculate(
        left="datum.x - 0.4", right="datum.x + 0.4",
        label="'token ' + datum.x + ': p ' + format(datum.p, '.8f') + ', q ' + format(datum.d, '.8f') + ', min(p, q) '"
              " + format(datum.shared, '.8f') + ', residual ' + format(datum.r, '.8f')",
    ).mark_rect(color=SHARED).encode(x=x, x2="right:Q", y=y, y2="shared:Q", description=alt.Description("label:N"))
    p_bar = base.transform_calculate(left="datum.x - 0.36", right="datum.x - 0.02").mark_rect(
        fill=None, stroke=P_COLOUR, strokeWidth=2, aria=False).encode(x=x, x2="right:Q", y=y, y2="p:Q")
    q_bar = base.transform_calculate(left="datum.x + 0.02", right="datum.x + 0.36").mark_rect(
        fill=None, stroke=Q_COLOUR, strokeWidth=2, strokeDash=[4, 2], aria=False).encode(x=x, x2="right:Q", y=y,
                                                                                          y2="d:Q")
    title = (alt.Chart().transform_filter("datum.x == 0")
             .transform_calculate(text="'p solid, q dashed, min(p, q) shaded: α = ' + format(datum.alpha, '.3f')",
                                  label="'acceptance rate alpha ' + format(datum.alpha, '.8f')")
             .mark_text(align="left", baseline="bottom", x=0, y=-6, fontSize=12)
             .encode(text="text:N", description=alt.Description("label:N")))
    return alt.layer(shared, p_bar, q_bar, title).properties(width=WIDTH, height=120)


def _residual(n: int) -> alt.LayerChart:
    """The distribution a rejected draft is replaced from: max(p − q, 0), normalised."""
    x = alt.X("x:O", title="token", axis=alt.Axis(labelAngle=0))
    bars = alt.Chart().mark_bar(color=RESIDUAL, aria=False, size=WIDTH / n / 2).encode(
        x=x, y=alt.Y("r:Q", title="residual", scale=alt.Scale(domain=[0, 1])))
    title = (alt.Chart().transform_filter("datum.x == 0")
             .transform_calculate(text="datum.rejected > 0 ? 'rejected with probability 1 − α = ' + "
                                       "format(datum.rejected, '.3f') + ', replaced from:' : 'q = p: never rejected'")
             .mark_text(align="left", baseline="bottom", x=0, y=-6, fontSize=12, aria=False)
             .encode(text="text:N"))
    return alt.layer(bars, title).properties(width=WIDTH, height=80)


def _rounds() -> alt.LayerChart:
    """The expected tokens a round over k = 0 … K_MAX, (1 − α^(k+1)) / (1 − α), with the slider's k marked and the
    limit 1 / (1 − α) as a dashed line."""
    per_k = (alt.Chart().transform_filter("datum.x == 0")
             .transform_calculate(ks=f"sequence(0, {K_MAX + 1})")
             .transform_flatten(["ks"], as_=["k"])
             .transform_calculate(tokens="datum.alpha == 1 ? datum.k + 1 : "
                                         "(1 - pow(datum.alpha, datum.k + 1)) / (1 - datum.alpha)"))
    x = alt.X("k:Q", title="drafts k a round", scale=alt.Scale(domain=[0, K_MAX]), axis=alt.Axis(tickMinStep=1))
    y = alt.Y("tokens:Q", title="tokens a round", scale=alt.Scale(domain=[0, K_MAX + 1]))
    line = per_k.mark_line(color=LINE, aria=False).encode(x=x, y=y)  # a line with style=INK would be filled
    points = per_k.transform_calculate(
        label="'k = ' + datum.k + ': expected tokens a round ' + format(datum.tokens, '.8f')",
    ).mark_point(filled=True, size=30, style=INK).encode(x=x, y=y, description=alt.Description("label:N"))
    now = per_k.transform_filter("datum.k == drafts").transform_calculate(
        label="'drafts k = ' + datum.k + ' (the slider): expected tokens a round ' + format(datum.tokens, '.8f')",
    ).mark_point(filled=True, size=140, color="#d62728").encode(x=x, y=y, description=alt.Description("label:N"))
    limit = (per_k.transform_filter("datum.k == 0 && datum.alpha < 1")
             .transform_calculate(limit="1 / (1 - datum.alpha)")
             .mark_rule(strokeDash=[4, 3], color="#7f7f7f", aria=False).encode(y=alt.Y("limit:Q")))
    title = (per_k.transform_filter("datum.k == drafts")
             .transform_calculate(text="'k = ' + datum.k + ': ' + format(datum.tokens, '.2f') + ' tokens a round"
                                       "' + (datum.alpha < 1 ? ', never above ' + format(1 / (1 - datum.alpha), "
                                       "'.2f') : '')")
             .mark_text(align="left", baseline="bottom", x=0, y=-6, fontSize=12, aria=False)
             .encode(text="text:N"))
    return alt.layer(limit, line, points, now, title).properties(width=WIDTH, height=120)


def speculative_explorer(p: Sequence, q: Sequence, mix: float = 0.0, k: int = 4) -> Explorer:
    """Speculative sampling for a fixed target ``p`` and draft ``q`` (chapter 12), under two sliders: the draft,
    moved from the uniform distribution (-1) through ``q`` (0) to ``p`` (1), and the drafts k a round.

    Shows p and the draft with min(p, q) shaded and α = Σ min(p, q); the residual max(p − q, 0) normalised, from
    which a rejected draft is replaced; and the expected tokens a round over k, (1 − α^(k+1)) / (1 − α). The
    browser computes them as :func:`speculative_view` does in Python.
    """
    view = speculative_view(p, q, mix, k)  # checks the input
    mix = validate.real(mix, "mix", at_least=-1, at_most=1, why="the slider's range")
    p, q = validate.probabilities(p, "p"), validate.probabilities(q, "q")
    n = len(p)
    data = pd.DataFrame({"x": range(n), "p": [rounded(float(v)) for v in p], "q": [rounded(float(v)) for v in q],
                         "u": [rounded(1 / n)] * n})
    params = [
        alt.param(name="mix", value=mix,
                  bind=alt.binding_range(min=-1, max=1, step=MIX_STEP, name="draft: -1 uniform, 0 q, 1 p ")),
        alt.param(name="drafts", value=k, bind=alt.binding_range(min=1, max=K_MAX, step=1, name="drafts k ")),
    ]
    chart = alt.vconcat(_distributions(n), _residual(n), _rounds(), spacing=34, data=data,
                        transform=_vega_draft()).add_params(*params)
    description = (f"Speculative sampling with a target distribution p over {n} tokens and a draft q, under a slider "
                   f"that moves the draft from the uniform distribution through the chapter's q to p, and one for "
                   f"the drafts k a round: p and q as bars with min(p, q) shaded, the residual max(p − q, 0) "
                   f"normalised, and the expected tokens a round against k. At the start α = {view['alpha']:.3f} "
                   f"and a round of {k} drafts emits {view['at_k']:.2f} tokens on average.")
    return Explorer(chart, description, "Move the draft q and k: watch α and tokens")
