"""One attention computation, step by step, computed by the layers of `layers/`.

Every figure `attncli score-demo` prints comes from a layer: its `project_keys` and
`score_projected` give the scores, its `score_mask` the keys each query may see,
`masked_softmax` and its `reweight` the weights, and its call (with
`return_attention_scores=True`) the weights and the context. Only the weighted values
`weights[t, s] * values[s]`, the terms of the context's sum, are multiplied out here.
"""

from dataclasses import dataclass, field

import keras
import numpy as np

from attncli.demo_inputs import SELF_ATTENTION, SEQ2SEQ, DemoInputs, check_sizes
from attncli.errors import AttncliError
from layers import BaseAttention, DotProductAttention, masked_softmax, sequence_mask

FORMULAS = {
    "dot": "score(q, k) = qᵀk",
    "scaled-dot": "score(q, k) = qᵀk / √d",
}


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
        scores: raw scores `(Tq, Tv)`.
        allowed: booleans `(Tq, Tv)`, the keys each query may attend to.
        softmax: the masked softmax of the scores `(Tq, Tv)`.
        weights: the attention weights the layer returned `(Tq, Tv)`.
        weighted_values: `weights[t, s] * values[s]`, `(Tq, Tv, d_v)`.
        context: the layer's output `(Tq, d_v)`, the sum of the weighted values.
        window: local attention's half-width `D`, or None.
        source: self-attention's inputs `(T, d)`, whose products with `W_q`, `W_k`,
            `W_v` are the query, keys and values; None otherwise.
        article: what the design note printed, when this walk is its worked example.
    """

    example: str
    score: str
    formula: str
    inputs: DemoInputs
    parameters: dict
    projected_keys: np.ndarray | None
    scores: np.ndarray
    allowed: np.ndarray
    softmax: np.ndarray
    weights: np.ndarray
    weighted_values: np.ndarray
    context: np.ndarray
    window: int | None = None
    source: np.ndarray | None = None
    article: object = None
    extras: dict = field(default_factory=dict)


def walk_score(score, inputs, seed=0, units=None, window=None):
    """Attend with the layer of `score` from `inputs.query` to `inputs.keys`."""
    check_sizes(score, inputs)
    layer = _make_layer(score, units, window)
    query, keys, values = (
        keras.ops.convert_to_tensor(array[None]) for array in
        (inputs.query, inputs.keys, inputs.values)
    )
    num_keys = inputs.keys.shape[0]
    value_mask = (
        None if inputs.valid_length is None
        else sequence_mask([inputs.valid_length], num_keys)
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

    weights = np.asarray(weights)[0]
    has_projection = type(layer).project_keys is not BaseAttention.project_keys
    matches_article = (
        score == "dot" and inputs.valid_length is None and not inputs.parameters
        and _same_inputs(inputs, SEQ2SEQ.inputs)
    )
    return Walk(
        example="seq2seq",
        score=score,
        formula=FORMULAS[score],
        inputs=inputs,
        parameters=parameters,
        projected_keys=np.asarray(projected_keys)[0] if has_projection else None,
        scores=np.asarray(scores)[0],
        allowed=np.asarray(allowed)[0],
        softmax=np.asarray(softmax)[0],
        weights=weights,
        weighted_values=weights[:, :, None] * inputs.values[None, :, :],
        context=np.asarray(context)[0],
        window=window,
        article=SEQ2SEQ.article if matches_article else None,
    )


def _make_layer(score, units, window):
    if score == "dot":
        return DotProductAttention(use_scale=False)
    if score == "scaled-dot":
        return DotProductAttention(use_scale=True)
    raise AttncliError(f"the {score} score is not available")


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


def _same_inputs(inputs, other):
    return all(
        np.array_equal(getattr(inputs, name), getattr(other, name))
        for name in ("query", "keys", "values")
    )
