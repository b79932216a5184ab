"""One attention computation, step by step, computed by the layers of `layers/`.

Every figure `attncli score-demo` prints comes from a layer: its `project_keys` and
`score_projected` give the scores, its `score_mask` the keys each query may see,
`masked_softmax` and its `reweight` the weights, and its call (with
`return_attention_scores=True`) the weights and the context. Only the weighted values
`weights[t, s] * values[s]`, the terms of the context's sum, are multiplied out here.

Each query of a `Walk` is an `AttentionStep` (`Walk.step`), the record of one attention
step that `inspect-weights` renders from a trained model.
"""

from dataclasses import dataclass, field

import keras
import numpy as np

from attncli.cli.demo_inputs import (
    SELF_ATTENTION,
    SEQ2SEQ,
    ArticleFigures,
    DemoInputs,
    score_and_alignment,
)
from attncli.errors import AttncliError
from attncli.model.trace import AttentionStep
from attncli.scores import ALIGNMENTS, SCORES, make_attention
from layers import ScaledDotSelfAttention, masked_softmax, sequence_mask

# The half-width of the local window when --window is not given: small enough that
# the window leaves keys out of the worked example's four.
DEFAULT_WINDOW = 1


def formula(name):
    """The demo score `name` written out: its score function, then the keys its
    alignment keeps (`attncli.scores`)."""
    score, alignment = score_and_alignment(name)
    return " ".join(filter(None, (SCORES[score].formula, ALIGNMENTS[alignment].window)))


@dataclass(frozen=True)
class Walk:
    """The inputs, every intermediate value and the result of one attention computation.

    Arrays have no batch axis: `Tq` queries attend to `Tv` keys.

    Attributes:
        example: `"seq2seq"` or `"self-attention"`.
        score: the score function's name (`"dot"`, `"general"`, ...).
        formula: the score function, written out.
        inputs: query `(Tq, d_q)`, keys `(Tv, d_k)`, values `(Tv, d_v)`, valid length.
        parameters: the layer's weights by name (`W_a`, `v_a`, ...), as it used them.
        projected_keys: `project_keys(keys)` `(Tv, ...)`, or None where the score has no
            term in the keys alone.
        projection: what `projected_keys` is (`"k W_a"`), or None.
        scores: raw scores `(Tq, Tv)`.
        allowed: booleans `(Tq, Tv)`, the keys each query may attend to.
        softmax: the masked softmax of the scores `(Tq, Tv)`.
        weights: the attention weights the layer returned `(Tq, Tv)`; they differ from
            `softmax` only for local-p, which multiplies it by a Gaussian.
        weighted_values: `weights[t, s] * values[s]`, `(Tq, Tv, d_v)`.
        context: the layer's output `(Tq, d_v)`, the sum of the weighted values.
        window: local attention's half-width `D`, or None.
        window_centres: local attention's `p_t` `(Tq,)`, or None.
        gaussian: local-p's factors `exp(-(s - p_t)² / (2σ²))` `(Tq, Tv)`, or None.
        source: self-attention's inputs `(T, d)`, whose products with `W_q`, `W_k`,
            `W_v` are the queries, keys and values; None otherwise.
        article: the `ArticleFigures` of the article whose worked example this walk
            is, else None.
        inputs_name: where the inputs come from, in words.
    """

    example: str
    score: str
    formula: str
    inputs: DemoInputs
    parameters: dict
    scores: np.ndarray
    allowed: np.ndarray
    softmax: np.ndarray
    weights: np.ndarray
    weighted_values: np.ndarray
    context: np.ndarray
    projected_keys: np.ndarray | None = None
    projection: str | None = None
    window: int | None = None
    window_centres: np.ndarray | None = None
    gaussian: np.ndarray | None = None
    source: np.ndarray | None = None
    article: ArticleFigures | None = None
    inputs_name: str = "your inputs"

    def step(self, t):
        """Query `t` (0-based) as an `AttentionStep`, the record of one attention step
        that `inspect-weights` renders too: its query, the keys and values, its scores
        (-inf where the key is masked), weights and context `weights @ values`."""
        values = np.asarray(self.inputs.values, "float64")
        weights = np.asarray(self.weights[t], "float64")
        source = None if self.source is None else np.asarray(self.source, "float64")
        return AttentionStep(
            attention="cross" if source is None else "encoder",
            layer=1,
            head=None,
            step=t + 1,
            score=self.score,
            formula=self.formula,
            query_token=f"query {t + 1}" if source is None else f"Input {t + 1}",
            key_tokens=[str(s + 1) for s in range(len(values))],
            query=np.asarray(self.inputs.query[t], "float64"),
            keys=np.asarray(self.inputs.keys, "float64"),
            values=values,
            scores=np.where(self.allowed[t], np.asarray(self.scores[t], "float64"), -np.inf),
            weights=weights,
            context=weights @ values,
            inputs=source,
            x=None if source is None else source[t],
        )


def walk(request):
    """The `Walk` of a checked `DemoRequest`."""
    if request.example == "self-attention":
        return walk_self_attention()
    return walk_score(request.score, request.inputs, seed=request.seed,
                      units=request.units, window=request.window)


def walk_score(score, inputs, seed=0, units=None, window=None):
    """Attend from `inputs.query` to `inputs.keys` with the layer of `score`.

    The layer's weights not given in `inputs.parameters` are initialised after
    `keras.utils.set_random_seed(seed)`. `units` and `window` go to the layers that
    take them; local attention's window defaults to `DEFAULT_WINDOW`.
    """
    score_function, alignment = score_and_alignment(score)
    if ALIGNMENTS[alignment].local:
        window = window or DEFAULT_WINDOW
    if score_function == "additive":
        # BahdanauAttention has no default hidden size; the demo's is the query's.
        units = units or inputs.query.shape[1]
    # A global alignment ignores the window; the layer still wants a valid one.
    layer = make_attention(score_function, alignment, window=window or DEFAULT_WINDOW,
                           units=units)
    query, keys, values = (
        keras.ops.convert_to_tensor(array[None])
        for array in (inputs.query, inputs.keys, inputs.values)
    )
    value_mask = (
        None if inputs.valid_length is None
        else sequence_mask([inputs.valid_length], inputs.keys.shape[0])
    )
    keras.utils.set_random_seed(seed)
    layer([query, values, keys], mask=[None, value_mask])  # creates the weights
    parameters = _use_parameters(layer, score, inputs.parameters)

    context, weights = layer(
        [query, values, keys], mask=[None, value_mask], return_attention_scores=True
    )
    projected_keys = layer.project_keys(keys)
    scores = layer.score_projected(query, projected_keys)
    allowed = layer.score_mask(query, keys, value_mask)
    if allowed is None:
        allowed = keras.ops.ones_like(scores, dtype="bool")
    allowed = keras.ops.broadcast_to(allowed, keras.ops.shape(scores))
    softmax = masked_softmax(scores, allowed)

    window_centres = gaussian = None
    if ALIGNMENTS[alignment].local:
        window_centres = _first(layer.aligned_positions(query, keys, value_mask))
    if alignment == "local-p":
        gaussian = _first(layer.reweight(keras.ops.ones_like(softmax), query, keys, value_mask))
    weights = _first(weights)
    projection = SCORES[score_function].projection
    from_example = _same_inputs(inputs, SEQ2SEQ.inputs)
    matches_article = from_example and score == "dot" and inputs.valid_length is None
    return Walk(
        example="seq2seq",
        score=score,
        formula=formula(score),
        inputs=inputs,
        parameters=parameters,
        scores=_first(scores),
        allowed=_first(allowed),
        softmax=_first(softmax),
        weights=weights,
        weighted_values=weights[:, :, None] * inputs.values[None, :, :],
        context=_first(context),
        projected_keys=_first(projected_keys) if projection is not None else None,
        projection=projection,
        window=window,
        window_centres=window_centres,
        gaussian=gaussian,
        article=SEQ2SEQ.article if matches_article else None,
        inputs_name=(f"the seq2seq example of {SEQ2SEQ.article.source}" if from_example
                     else "your inputs"),
    )


def walk_self_attention():
    """The self-attention example: `ScaledDotSelfAttention` without scaling, with the
    article's `W_q`, `W_k`, `W_v`; every input is a query."""
    example = SELF_ATTENTION
    layer = ScaledDotSelfAttention(key_dim=example.parameters["W_q"].shape[1], use_scale=False)
    source = keras.ops.convert_to_tensor(example.inputs[None])
    layer(source)  # creates the weights
    parameters = _use_parameters(layer, "self-attention", example.parameters)
    queries, keys, values = layer.project(source)
    outputs, weights = layer(source, return_attention_scores=True)
    scores = layer.score(queries, keys)
    softmax = masked_softmax(scores)
    weights = _first(weights)
    values = _first(values)
    return Walk(
        example="self-attention",
        score="dot",
        formula=SCORES["dot"].formula,
        inputs=DemoInputs(query=_first(queries), keys=_first(keys), values=values),
        parameters=parameters,
        scores=_first(scores),
        allowed=np.ones(weights.shape, dtype=bool),
        softmax=_first(softmax),
        weights=weights,
        weighted_values=weights[:, :, None] * values[None, :, :],
        context=_first(outputs),
        source=example.inputs,
        article=example.article,
        inputs_name=f"the self-attention example of {example.article.source}",
    )


def _use_parameters(layer, score, given):
    """Give the layer's weights the values of `given`; return all of them by name."""
    variables = {variable.name: variable for variable in layer.weights}
    for name, value in given.items():
        if name not in variables:
            known = ", ".join(variables) if variables else "none"
            raise AttncliError(
                f"parameters: the {score} score has no weight '{name}' (its weights: {known})"
            )
        expected = tuple(variables[name].shape)
        if value.shape != expected:
            raise AttncliError(
                f"parameters: {name} has shape {value.shape} but the {score} score needs "
                f"{expected} for these inputs"
            )
        variables[name].assign(value)
    return {name: np.asarray(variable) for name, variable in variables.items()}


def _first(tensor):
    """The first (only) batch entry, as a NumPy array."""
    return np.asarray(keras.ops.convert_to_numpy(tensor))[0]


def _same_inputs(inputs, other):
    return all(
        np.array_equal(getattr(inputs, name), getattr(other, name))
        for name in ("query", "keys", "values")
    )
