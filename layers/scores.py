"""The registry of score functions and alignments: each name, its formula, its layer.

`SCORES` maps a score's name to a `Score`: the formula, the paper, the facts the model
configuration and the demo read (`projection`, `takes_units`, `local`, `same_size`) and
the function that builds the layer computing it. `MultiHeadAttention` builds its
per-head score from it, `LuongAttention` checks its names against it, and attncli's
recurrent decoder, configuration and `score-demo` read it through `attncli.scores`.

A new score is one function that builds its layer and one `Score(...)` line in
`SCORES`; both attentions then take its name.

This module imports no Keras: the command line checks configurations by these names
before TensorFlow loads. The functions that build layers import them when called.

Matrices are in Keras's `(input, output)` layout, as the layers store them: `k W_a` is
the paper's `W_a h̄_s`.
"""

import dataclasses
import typing


@dataclasses.dataclass(frozen=True)
class Score:
    """One score function `score(q, k)` and the layer that computes it.

    Attributes:
        name: what layers, configurations and the command line call it.
        formula: the score written out, as `score-demo` prints it.
        paper: where it comes from.
        make_layer: `make_layer(units, alignment, window, **kwargs)` -> the attention
            layer computing the score (a `BaseAttention`); `units` is None unless the
            score or the alignment takes it, `alignment` a name of `ALIGNMENTS` (only
            `"global"` unless `local`), `kwargs` the Keras layer's (`name`, `dtype`).
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
    make_layer: typing.Callable = dataclasses.field(repr=False, compare=False)
    projection: str | None = None
    takes_units: bool = False
    local: bool = False
    same_size: bool = False


@dataclasses.dataclass(frozen=True)
class Alignment:
    """Which keys a query attends to (Luong et al. 2015, section 3.2).

    Attributes:
        name: what layers, configurations and the command line call it.
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


# The layers import Keras, so each builder imports its layer when called.


def _dot(units, alignment, window, **kwargs):
    if alignment == "global":
        from layers.dot_product_attention import DotProductAttention

        return DotProductAttention(use_scale=False, **kwargs)
    return _luong("dot", units, alignment, window, **kwargs)


def _scaled_dot(units, alignment, window, **kwargs):
    from layers.dot_product_attention import DotProductAttention

    return DotProductAttention(use_scale=True, **kwargs)


def _general(units, alignment, window, **kwargs):
    return _luong("general", units, alignment, window, **kwargs)


def _concat(units, alignment, window, **kwargs):
    return _luong("concat", units, alignment, window, **kwargs)


def _additive(units, alignment, window, **kwargs):
    from layers.bahdanau_attention import BahdanauAttention

    return BahdanauAttention(units, **kwargs)


def _luong(score, units, alignment, window, **kwargs):
    from layers.luong_attention import LuongAttention

    return LuongAttention(score=score, units=units, alignment=alignment, window=window,
                          **kwargs)


SCORES = {
    score.name: score
    for score in (
        Score("dot", "score(q, k) = q · k", "Luong et al. 2015, eq. 8", _dot,
              local=True, same_size=True),
        Score("scaled_dot", "score(q, k) = q · k / √d", "Vaswani et al. 2017, eq. 1",
              _scaled_dot, same_size=True),
        Score("general", "score(q, k) = q · (k W_a)", "Luong et al. 2015, eq. 8",
              _general, projection="k W_a", local=True),
        Score("concat", "score(q, k) = v_a · tanh(q W_a[:d_q] + k W_a[d_q:])",
              "Luong et al. 2015, eq. 8", _concat, projection="k W_a[d_q:]",
              takes_units=True, local=True),
        Score("additive", "score(q, k) = v · tanh(q W_q + k W_k)",
              "Bahdanau et al. 2015, A.1.2", _additive, projection="k W_k",
              takes_units=True),
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


def local_scores():
    """The names of the scores that take a local alignment (`Score.local`)."""
    return tuple(name for name, score in SCORES.items() if score.local)


def make_attention(score, alignment="global", window=10, units=None, **kwargs):
    """The attention layer that computes `score` with `alignment`, from `SCORES`.

    Args:
        score: a name of `SCORES`.
        alignment: a name of `ALIGNMENTS`; a local one needs a score of
            `local_scores()`.
        window: int, the half-width `D` of a local alignment.
        units: int or None, the hidden size of the score or alignment that takes it
            (`takes_units`); ignored by the others. None means the query's size,
            where the layer allows it (`BahdanauAttention` needs a size).
        **kwargs: passed to the layer (`name`, `dtype`, ...).

    Raises:
        ValueError: for an unknown name, or a local alignment of a score without one.
    """
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {', '.join(SCORES)}. Received: score={score}")
    if alignment not in ALIGNMENTS:
        raise ValueError(
            f"`alignment` must be one of {', '.join(ALIGNMENTS)}. Received: alignment={alignment}"
        )
    if ALIGNMENTS[alignment].local and not SCORES[score].local:
        raise ValueError(
            f"A local alignment needs one of the scores {', '.join(local_scores())}. "
            f"Received: score={score}, alignment={alignment}"
        )
    takes_units = SCORES[score].takes_units or ALIGNMENTS[alignment].takes_units
    return SCORES[score].make_layer(units if takes_units else None, alignment, window,
                                    **kwargs)
