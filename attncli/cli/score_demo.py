"""One attention computation, step by step, computed by the layers of `layers/`.

Every figure `attncli score-demo` prints is the layer's own: called with
`return_steps=True`, it returns the `layers.AttentionRecord` of the call (the scores,
the keys each query may see, the softmax, local attention's window centres and
Gaussian, the weights, the context). Only the weighted values `weights[t, s] *
values[s]`, the terms of the context's sum, are multiplied out (by the record).

Each query of a `Walk` is an `AttentionStep` (`Walk.steps`), as `inspect-weights`
shows a trained model's, through the same table (`attncli.cli.step_table.step_section`).
"""

from dataclasses import dataclass

import keras
import numpy as np

from attncli.cli.demo_examples import SELF_ATTENTION, SEQ2SEQ, ArticleFigures, DemoInputs
from attncli.cli.demo_inputs import score_and_alignment
from attncli.errors import AttncliError
from attncli.model.trace import ScoreKind, labelled_step
from attncli.scores import ALIGNMENTS, SCORES, make_attention
from layers import ScaledDotSelfAttention, sequence_mask

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
    """One attention computation: the layer's record of it, and what the example says.

    Attributes:
        example: `"seq2seq"` or `"self-attention"`.
        score: the demo's score name (`"dot"`, `"general"`, ..., `"local-p"`).
        formula: the score function, written out.
        inputs: the query `(Tq, d_q)`, keys `(Tv, d_k)`, values `(Tv, d_v)` and valid
            length given (`DemoInputs`); None for the self-attention example.
        parameters: the layer's weights by name (`W_a`, `v_a`, ...), as it used them.
        record: the layer's `layers.AttentionRecord` of the call, NumPy arrays
            without the batch axis: `Tq` queries attend to `Tv` keys (`scores`
            `(Tq, Tv)`, ...). Its `weights` differ from its `softmax` only for
            local-p, which multiplies it by a Gaussian.
        window: local attention's half-width `D`, or None.
        source: self-attention's inputs `(T, d)`, whose products with `W_q`, `W_k`,
            `W_v` are the queries, keys and values; None otherwise.
        article: the `ArticleFigures` of the article whose worked example this walk
            is, else None.
        inputs_name: where the inputs come from, in words.
    """

    example: str
    score: str
    formula: str
    inputs: DemoInputs | None
    parameters: dict
    record: object
    window: int | None = None
    source: np.ndarray | None = None
    article: ArticleFigures | None = None
    inputs_name: str = "your inputs"

    @property
    def kind(self):
        """The `ScoreKind` of the demo's score: `local-p` is the dot score, local-p."""
        score, alignment = score_and_alignment(self.score)
        return ScoreKind(score, alignment, self.window)

    def steps(self):
        """Each query as an `AttentionStep`, the record of one step that
        `inspect-weights` shows too (`attncli.model.trace.labelled_step`)."""
        queries = len(self.record.query)
        tokens = ([f"query {t + 1}" for t in range(queries)] if self.source is None
                  else [f"Input {t + 1}" for t in range(queries)])
        return [labelled_step(self.record, attention="cross" if self.source is None
                              else "encoder", layer=1, head=None, step=t + 1,
                              kind=self.kind, query_tokens=tokens)
                for t in range(queries)]


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
    _, record = layer([query, values, keys], mask=[None, value_mask], return_steps=True)
    from_example = _same_inputs(inputs, SEQ2SEQ.inputs)
    matches_article = from_example and score == "dot" and inputs.valid_length is None
    return Walk(
        example="seq2seq",
        score=score,
        formula=formula(score),
        inputs=inputs,
        parameters=parameters,
        record=record.map(_first),
        window=window,
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
    _, record = layer(source, return_steps=True)
    return Walk(
        example="self-attention",
        score="dot",
        formula=SCORES["dot"].formula,
        inputs=None,
        parameters=parameters,
        record=record.map(_first),
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
