"""The recurrences under mixed precision: half products, float32 states.

Under a mixed policy the cells hand the recurrence their projected inputs and weights
in the half type (bfloat16 or float16) and their states in float32; the products `h U`,
`d(gates) U^T` and the kernel's gradient run in the half type, the states, the gates
and the gradients carried over time in float32 (`attncli.model.recurrence`). Checked
here, for GRU and LSTM, with and without lengths:

- the states and the hand-written gradient against the NumPy float64 reference of
  `test_recurrence` (the equations step by step, central finite differences) on the
  inputs and weights as the recurrence received them, rounded to the half type,
  within the half type's precision;
- the same gradient against TensorFlow's autodiff of a plain `tf.scan` of the cells'
  `transition`, which rounds the same operands to the half type;
- a model's cells, encoder and decoders under `mixed_bfloat16` and `mixed_float16`:
  float32 weights and states, outputs in the half type, the search's step-by-step path
  equal to the training path.
"""

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from attncli.training.builder import dtype_policy
from small_models import REAL, SOURCE, small_model, step_by_step, teacher_forced
from recurrence_reference import (
    T,
    autodiff_states,
    finite_differences,
    numpy_running,
    numpy_states,
    ours,
    random_problem,
)

HALF = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
# The unit roundoff of each type: 2^-8 (an 8-bit significand) and 2^-11.
ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def rounded(array, half):
    return array.astype(HALF[half]).astype("float64")


def half_problem(kind, half, seed):
    """A random problem whose inputs and weights hold values of the half type."""
    inputs, initial, weights, cotangents = random_problem(kind, seed)
    return rounded(inputs, half), initial, [rounded(w, half) for w in weights], cotangents


def mixed_gradients(kind, half, inputs, initial, weights, cotangents, run):
    """States and gradients of `sum(states * cotangents)` with half inputs and
    weights and float32 states, as the mixed cells give them."""
    arrays = [tf.constant(inputs, half), *(tf.constant(s, "float32") for s in initial),
              *(tf.constant(w, half) for w in weights)]
    count = len(initial)
    with tf.GradientTape() as tape:
        tape.watch(arrays)
        states = run(arrays[0], arrays[1:1 + count], arrays[1 + count:])
        loss = tf.add_n([tf.reduce_sum(s * c) for s, c in zip(states, cotangents)])
    gradients = tape.gradient(loss, arrays)
    for gradient, array in zip(gradients, arrays):
        assert gradient.dtype == array.dtype
    return ([s.numpy().astype("float64") for s in states],
            [g.numpy().astype("float64") for g in gradients])


def assert_close(actual, expected, tolerance):
    """Within `tolerance` of the largest magnitude of `expected`, element by element."""
    np.testing.assert_allclose(actual, expected, rtol=0,
                               atol=tolerance * max(np.abs(expected).max(), 1.0))


LENGTHS = [None, [4, 3, 1], [2, 0, 3]]


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_half_products_against_numpy_float64(kind, lengths, half):
    inputs, initial, weights, cotangents = half_problem(kind, half, seed=11)

    def loss(inputs, *rest):
        states = numpy_states(kind, inputs, rest[:len(initial)], rest[len(initial):], lengths)
        return sum(np.sum(s * c) for s, c in zip(states, cotangents))

    expected_states = numpy_states(kind, inputs, initial, weights, lengths)
    expected = finite_differences(loss, [inputs, *initial, *weights])
    states, gradients = mixed_gradients(
        kind, half, inputs, initial, weights, cotangents,
        lambda x, s, w: ours(kind, x, s, w, lengths),
    )
    # measured: states within 0.5 roundoffs, gradients within 1.6
    for state, reference in zip(states, expected_states):
        assert_close(state, reference, 2 * ROUNDOFF[half])
    for gradient, reference in zip(gradients, expected):
        assert_close(gradient, reference, 4 * ROUNDOFF[half])


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_half_products_against_autodiff_of_the_plain_loop(kind, lengths, half):
    inputs, initial, weights, cotangents = half_problem(kind, half, seed=12)
    running = tf.constant(numpy_running(lengths or [T] * inputs.shape[2], T), tf.int32)
    results = [
        mixed_gradients(kind, half, inputs, initial, weights, cotangents, run)
        for run in (lambda x, s, w: ours(kind, x, s, w, lengths),
                    lambda x, s, w: autodiff_states(kind, x, s, w, running))
    ]
    (states, gradients), (reference_states, reference_gradients) = results
    # The same operations forward. Backward, autodiff sums the kernel's gradient
    # step by step in the half type, where ours is one product over all steps:
    # measured within 1.5 roundoffs.
    for state, reference in zip(states, reference_states):
        assert_close(state, reference, 1e-6)
    for gradient, reference in zip(gradients, reference_gradients):
        assert_close(gradient, reference, 4 * ROUNDOFF[half])


def matmul_dtypes(function, *args):
    """The dtype of every matrix product in `function`'s graph, loop bodies included."""
    graph = tf.function(function).get_concrete_function(*args).graph.as_graph_def()
    nodes = [*graph.node, *(node for f in graph.library.function for node in f.node_def)]
    return {tf.dtypes.as_dtype(node.attr["T"].type).name
            for node in nodes if node.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")}


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_every_product_forward_and_backward_runs_in_the_half_type(kind):
    inputs, initial, weights, cotangents = half_problem(kind, "bfloat16", seed=13)
    count = len(initial)

    @tf.function
    def gradients(arrays):
        with tf.GradientTape() as tape:
            tape.watch(arrays)
            states = ours(kind, arrays[0], arrays[1:1 + count], arrays[1 + count:], [3, 4, 1])
            loss = tf.add_n([tf.reduce_sum(s * c) for s, c in zip(states, cotangents)])
        return tape.gradient(loss, arrays)

    arrays = [tf.constant(inputs, "bfloat16"), *(tf.constant(s, "float32") for s in initial),
              *(tf.constant(w, "bfloat16") for w in weights)]
    graph = gradients.get_concrete_function(arrays).graph.as_graph_def()
    # loop bodies are functions of the graph's library
    nodes = [*graph.node, *(node for f in graph.library.function for node in f.node_def)]
    products = [tf.dtypes.as_dtype(node.attr["T"].type).name for node in nodes
                if node.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")]
    # forward h U, backward d(gates) U^T, the kernel's gradient
    assert len(products) >= 3 and set(products) == {"bfloat16"}


MODELS = [
    dict(score="general"),
    dict(cell="lstm", input_feeding=True, score="dot", encoder_layers=2),
    dict(decoder="bahdanau", score="additive", merge_mode="concat"),
    dict(cell="lstm", decoder="bahdanau", score="concat", bidirectional=False,
         alignment="local-p"),
]


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("options", MODELS, ids=["gru-luong", "lstm-feeding-2-layers",
                                                 "gru-bahdanau-concat", "lstm-bahdanau-local"])
def test_a_mixed_model_keeps_float32_states_and_computes_as_float32(options, policy):
    reference = small_model(**options)
    with dtype_policy(policy):
        model = small_model(**options)
    model.set_weights(reference.get_weights())
    half = policy.removeprefix("mixed_")
    assert {v.dtype for v in model.weights} == {"float32"}
    memory, state = model.encode(SOURCE)
    assert memory["values"].dtype == half
    cell_states = state[:model.decoder.cell.num_states]
    assert {s.dtype.name for s in cell_states} == {"float32"}

    logits, weights = teacher_forced(model)
    assert logits.dtype == half
    expected_logits, expected_weights = teacher_forced(reference)
    scale = np.abs(expected_logits[REAL]).max()
    # measured: logits within 3.9 roundoffs of the largest logit, weights within 0.2
    assert_close(logits[REAL] / scale, expected_logits[REAL] / scale, 8 * ROUNDOFF[half])
    assert_close(weights[REAL], expected_weights[REAL], ROUNDOFF[half])
    # The search's steps compute what training computes.
    step_logits, step_weights = step_by_step(model)
    assert_close(step_logits[REAL] / scale, logits[REAL] / scale, 8 * ROUNDOFF[half])
    assert_close(step_weights[REAL], weights[REAL], ROUNDOFF[half])
