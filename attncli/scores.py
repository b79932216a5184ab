"""The score functions of attncli: every name, its formula, which options it takes, its layer.

One table read by the model configuration (`model.score`, `model.alignment`), by the
model (`make_attention`) and by `attncli score-demo`, so a score is spelled one way
everywhere. Nothing here imports Keras at import time: the configuration is checked
with these names before TensorFlow loads; `make_attention` imports `layers` when it
builds one.

Matrices are in Keras's `(input, output)` layout, as the layers store them: `k W_a` is
the paper's `W_a h̄_s`.
"""

import dataclasses
import typing


@dataclasses.dataclass(frozen=True)
class Score:
    """One score function `score(q, k)` and how attncli computes it.

    Attributes:
        name: what configurations and the command line call it.
        formula: the score written out, as `score-demo` prints it.
        paper: where it comes from.
        projection: what the layer's `project_keys(k)` computes, or None where the
            keys enter the score as they are.
        takes_units: whether it has a hidden layer whose size `units` sets.
        local: whether Luong's local alignments (`local-m`, `local-p`) apply to it:
            the scores `LuongAttention` implements.
        same_size: whether it takes the inner product of query and key, so both must
            have the same size.
    """

    name: str
    formula: str
    paper: str
    projection: str | None = None
    takes_units: bool = False
    local: bool = False
    same_size: bool = False


@dataclasses.dataclass(frozen=True)
class Alignment:
    """Which keys a query attends to (Luong et al. 2015, section 3.2).

    Attributes:
        name: what configurations and the command line call it.
        window: the keys it keeps, written out (`""` for all of them).
        takes_units: whether it has a hidden layer whose size `units` sets
            (local-p's position predictor).
    """

    name: str
    window: str = ""
    takes_units: bool = False

    @property
    def local(self):
        """Whether it keeps a window of `2D + 1` keys, whose half-width is `window`."""
        return bool(self.window)


SCORES = {
    score.name: score
    for score in (
        Score("dot", "score(q, k) = q · k", "Luong et al. 2015, eq. 8",
              local=True, same_size=True),
        Score("scaled_dot", "score(q, k) = q · k / √d", "Vaswani et al. 2017, eq. 1",
              same_size=True),
        Score("general", "score(q, k) = q · (k W_a)", "Luong et al. 2015, eq. 8",
              projection="k W_a", local=True),
        Score("concat", "score(q, k) = v_a · tanh(q W_a[:d_q] + k W_a[d_q:])",
              "Luong et al. 2015, eq. 8", projection="k W_a[d_q:]", takes_units=True,
              local=True),
        Score("additive", "score(q, k) = v · tanh(q W_q + k W_k)",
              "Bahdanau et al. 2015, A.1.2", projection="k W_k", takes_units=True),
    )
}

ALIGNMENTS = {
    alignment.name: alignment
    for alignment in (
        Alignment("global"),
        Alignment("local-m", "for the keys with |s - p_t| <= D, p_t = t"),
        Alignment(
            "local-p",
            "for the keys with |s - p_t| <= D, p_t = S sigmoid(v_p · tanh(q W_p)); "
            "weight = softmax × exp(-(s - p_t)² / (2σ²)), σ = D / 2",
            takes_units=True,
        ),
    )
}

# The types of the configuration fields, built from the tables so that each name is
# written once: `typing.Literal["dot", "scaled_dot", ...]`.
ScoreName = typing.Literal[tuple(SCORES)]
AlignmentName = typing.Literal[tuple(ALIGNMENTS)]

LOCAL_SCORES = tuple(name for name, score in SCORES.items() if score.local)

# What `attncli score-demo --score` takes: every score function, then Luong's local
# alignments, which the demo computes on the dot score.
DEMO_SCORES = (*SCORES, *(name for name, alignment in ALIGNMENTS.items() if alignment.local))


def make_attention(score, alignment="global", window=10, units=None, name=None):
    """The attention layer of `layers/` that computes `score` with `alignment`.

    `dot` (global) and `scaled_dot` are `DotProductAttention`; `dot` with a local
    alignment, `general` and `concat` are `LuongAttention`; `additive` is
    `BahdanauAttention`, whose `units` are required.

    Args:
        score: a name of `SCORES`.
        alignment: a name of `ALIGNMENTS`; local ones need a score of `LOCAL_SCORES`.
        window: int, the half-width `D` of a local alignment.
        units: int or None, the hidden size of the scores and alignments that take
            it (`takes_units`); ignored by the others. None means the query's size.
        name: the layer's name, or None for Keras's default.
    """
    import layers

    if score == "scaled_dot" or (score == "dot" and alignment == "global"):
        return layers.DotProductAttention(use_scale=score == "scaled_dot", name=name)
    if score == "additive":
        return layers.BahdanauAttention(units, name=name)
    hidden = units if SCORES[score].takes_units or ALIGNMENTS[alignment].takes_units else None
    return layers.LuongAttention(
        score=score, units=hidden, alignment=alignment, window=window, name=name
    )
