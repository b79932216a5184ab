"""The recurrence's hand-written gradient against NumPy finite differences and TF autodiff.

The NumPy reference runs the GRU (reset-after) and LSTM equations of the cells'
docstrings step by step in float64, on stacked cells, updating at step `t` only the
leading rows up to the last one with `length > t` (the other rows keep their state);
its gradients are central finite differences of `sum(states * cotangent)`, with a
cotangent on every position, padding included. The TF reference is autodiff of a
plain `tf.scan` over the same steps.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.model import recurrent
from attncli.model.cells import GRUCell, make_cell
from recurrence_reference import (
    BATCH, CELLS, T, UNITS, autodiff_states, finite_differences, numpy_running, numpy_states,
    ours, random_problem,
)


def our_gradients(kind, inputs, initial, weights, cotangents, lengths):
    arrays = [tf.constant(a) for a in [inputs, *initial, *weights]]
    with tf.GradientTape() as tape:
        tape.watch(arrays)
        states = ours(kind, arrays[0], arrays[1:1 + len(initial)],
                      arrays[1 + len(initial):], lengths)
        loss = tf.add_n([tf.reduce_sum(s * c) for s, c in zip(states, cotangents)])
    return [s.numpy() for s in states], [g.numpy() for g in tape.gradient(loss, arrays)]


LENGTHS = [None, [4, 3, 1], [4, 4, 4], [2, 0, 3], [0, 0, 0]]


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_gradient_equals_numpy_finite_differences(kind, lengths):
    inputs, initial, weights, cotangents = random_problem(kind, seed=len(str(lengths)))

    def loss(inputs, *rest):
        states = numpy_states(kind, inputs, rest[:len(initial)], rest[len(initial):], lengths)
        return sum(np.sum(s * c) for s, c in zip(states, cotangents))

    expected_states = numpy_states(kind, inputs, initial, weights, lengths)
    expected = finite_differences(loss, [inputs, *initial, *weights])
    states, gradients = our_gradients(kind, inputs, initial, weights, cotangents, lengths)
    for state, reference in zip(states, expected_states):
        np.testing.assert_allclose(state, reference, rtol=1e-12, atol=1e-12)
    for gradient, reference in zip(gradients, expected):
        np.testing.assert_allclose(gradient, reference, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_gradient_equals_autodiff_of_the_plain_loop(kind, lengths, compiled):
    inputs, initial, weights, cotangents = random_problem(kind, seed=7)
    arrays = [tf.constant(a, tf.float32) for a in [inputs, *initial, *weights]]
    running = tf.constant(numpy_running(lengths or [T] * BATCH, T), tf.int32)
    count = len(initial)
    results = []
    for run in (lambda a: ours(kind, a[0], a[1:1 + count], a[1 + count:], lengths),
                lambda a: autodiff_states(kind, a[0], a[1:1 + count], a[1 + count:], running)):
        def gradients(arrays, run=run):
            with tf.GradientTape() as tape:
                tape.watch(arrays)
                states = run(arrays)
                loss = tf.add_n([tf.reduce_sum(s * c) for s, c in zip(states, cotangents)])
            return tape.gradient(loss, arrays)

        results.append((tf.function(gradients) if compiled else gradients)(arrays))
    for gradient, reference in zip(*results):
        np.testing.assert_allclose(gradient, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_run_of_two_cells_with_lengths_equals_numpy(kind):
    """`recurrent.run` on batch-first inputs, both cells stacked, against the reference."""
    keras.utils.set_random_seed(3)
    cells = [make_cell(kind, UNITS, name=f"cell_{i}") for i in range(CELLS)]
    for cell in cells:
        cell.build((None, 5))
        for weight in cell.trainable_variables:
            weight.assign(np.random.default_rng(4).normal(size=weight.shape))
    inputs, initial, _, cotangents = random_problem(kind, seed=5)
    lengths = [3, 4, 1]
    projected = [tf.constant(inputs[:, c].transpose(1, 0, 2), tf.float32) for c in range(CELLS)]
    states_in = [tuple(tf.constant(s[c], tf.float32) for s in initial) for c in range(CELLS)]
    variables = [w for cell in cells for w in cell.recurrent_weights()]
    with tf.GradientTape() as tape:
        tape.watch(projected)
        states = recurrent.run(cells, projected, states_in, lengths=tf.constant(lengths))
        loss = tf.add_n([
            tf.reduce_sum(s * cotangents[k][:, c].transpose(1, 0, 2))
            for c in range(CELLS) for k, s in enumerate(states[c])
        ])
    d_projected, d_weights = tape.gradient(loss, [projected, variables])

    weights = [np.stack([w.numpy() for w in same]).astype("float64")
               for same in zip(*(cell.recurrent_weights() for cell in cells))]
    if kind == "gru":
        weights[1] = weights[1][:, None, :]

    def reference_loss(inputs, *weights):
        history = numpy_states(kind, inputs, initial, weights, lengths)
        return sum(np.sum(s * c) for s, c in zip(history, cotangents))

    expected = finite_differences(reference_loss, [inputs, *weights])
    for c in range(CELLS):
        np.testing.assert_allclose(d_projected[c], expected[0][:, c].transpose(1, 0, 2),
                                   rtol=1e-3, atol=1e-4)
    # d_weights: per cell, its recurrent weights in order
    count = len(weights)
    for index, reference in enumerate(expected[1:]):
        for c in range(CELLS):
            gradient = d_weights[c * count + index].numpy()
            np.testing.assert_allclose(gradient, reference[c].reshape(gradient.shape),
                                       rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("lengths", [[11, 11], [11, 10], [6, 3]],
                         ids=["no padding", "padding below the packing share", "packed"])
def test_project_tokens_is_the_input_projection_zero_at_padding(lengths):
    """Both of its paths (every position, packed tokens) against `x W + b`."""
    keras.utils.set_random_seed(6)
    cells = [GRUCell(3, name="a"), GRUCell(3, name="b")]
    rng = np.random.default_rng(8)
    for cell in cells:
        cell.build((None, 4))
        cell.bias.assign(rng.normal(size=cell.bias.shape))
    inputs = rng.normal(size=(2, 11, 4)).astype("float32")
    mask = np.arange(11)[None, :] < np.array(lengths)[:, None]
    projected = recurrent.project_tokens(cells, tf.constant(inputs), tf.constant(mask))
    for cell, result in zip(cells, projected):
        expected = (inputs @ cell.kernel.numpy() + cell.bias.numpy()) * mask[:, :, None]
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)


def test_project_tokens_and_run_take_a_batch_of_no_rows():
    """A replica's share of a one-sentence batch is empty; shapes stay whole."""
    cells = [GRUCell(4, name="a"), GRUCell(4, name="b")]
    for cell in cells:
        cell.build((None, 3))

    @tf.function(input_signature=[
        tf.TensorSpec((None, None, 3)), tf.TensorSpec((None, None), tf.bool),
    ])
    def states(inputs, mask):
        projected = recurrent.project_tokens(cells, inputs, mask)
        lengths = tf.reduce_sum(tf.cast(mask, "int32"), axis=1)
        initial = [cell.initial_state(tf.shape(inputs)[0]) for cell in cells]
        return projected[0], recurrent.run(cells, projected, initial, lengths)[1][0]

    projected, backward = states(tf.zeros((0, 5, 3)), tf.zeros((0, 5), bool))
    assert projected.shape == (0, 5, 12) and backward.shape == (0, 5, 4)
