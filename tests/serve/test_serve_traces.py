"""A server's traced searches are bounded in number and in memory: a translator dropped
from the cache frees the graphs it traced.

The cause it guards against: traced in a graph, the recurrences' `tf.custom_gradient`
registers its gradient function in TensorFlow's global registry, which holds the graph
for as long as the process runs. A server differentiates nothing, so it traces under
`recurrence.forward_only()`, where the recurrences run their forward loop alone (the
same states; a gradient taken anyway is TensorFlow's own, equal to the hand-written one).
"""

import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf
from attncli_process import FIXTURE_RUN
from recurrence_reference import random_problem

from attncli.model import recurrence
from attncli.serve import tensorflow_model
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

T, CELLS, BATCH, UNITS = 5, 2, 3, 4
RUNNING = [3, 3, 2, 2, 1]  # rows 3, 2, 1 of the batch stop after steps 5, 4 and 2


def problem(kind, seed=0):
    """Inputs, initial states and recurrent weights of `gru_states` or `lstm_states`."""
    inputs, states, weights, _ = random_problem(kind, seed, (T, CELLS, BATCH, UNITS))
    return [tf.constant(a, tf.float32) for a in (inputs, *states, *weights)]


def states_of(kind, arrays, running):
    """Every step's states, a tuple, whichever way the recurrence runs."""
    if kind == "gru":
        inputs, h0, kernel, bias = arrays
        return (recurrence.gru_states(inputs, h0, running, kernel, bias),)
    inputs, h0, c0, kernel = arrays
    return tuple(recurrence.lstm_states(inputs, h0, c0, running, kernel))


def states_and_gradients(kind, arrays, running):
    """`states_of` and the gradients of `sum(states * cotangents)` for every input, in a
    traced function, and a weak reference to its graph."""
    cotangents = [tf.constant(np.random.default_rng(9).normal(size=(T, CELLS, BATCH, UNITS)),
                              tf.float32) for _ in arrays[1:-1 if kind == "gru" else -1]]

    @tf.function
    def traced(arrays):
        with tf.GradientTape() as tape:
            tape.watch(arrays)
            states = states_of(kind, arrays, running)
            loss = tf.add_n([tf.reduce_sum(s * c) for s, c in zip(states, cotangents)])
        return states, tape.gradient(loss, arrays)

    states, gradients = traced(arrays)
    return states, gradients, weakref.ref(traced.get_concrete_function(arrays).graph)


@pytest.mark.parametrize("running", [None, RUNNING], ids=["all rows", "rows stopping"])
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_forward_only_gives_the_same_states_and_frees_its_graph(kind, running):
    arrays = problem(kind)
    if running is not None:
        running = tf.constant(running, tf.int32)
    states, gradients, graph = states_and_gradients(kind, arrays, running)
    with recurrence.forward_only():
        plain_states, plain_gradients, plain_graph = states_and_gradients(kind, arrays, running)
    for state, plain in zip(states, plain_states):
        np.testing.assert_array_equal(plain, state)
    # TensorFlow's gradient through the loop is the hand-written one's.
    for gradient, plain in zip(gradients, plain_gradients):
        np.testing.assert_allclose(plain, gradient, rtol=1e-5, atol=1e-5)
    gc.collect()
    assert plain_graph() is None
    # The hand-written gradient's registration holds its graph: why a server traces under
    # forward_only (if TensorFlow ever lets it go, forward_only is no longer needed).
    assert graph() is not None


@pytest.mark.slow
def test_a_dropped_translator_frees_its_traced_graphs(monkeypatch):
    monkeypatch.setattr(tensorflow_model, "KEPT_TRANSLATORS", 1)
    served = Registry([("run", [FIXTURE_RUN / "model"])], Limits())
    served.load()
    model = served.models["run"]
    first = model.translator(model.decoding(3), True)
    [translation] = first.translate(["tom is here."])
    graph = weakref.ref(first.search.get_concrete_function().graph)
    del first
    second = model.translator(model.decoding(4), True)  # the first is dropped
    gc.collect()
    assert graph() is None
    # The second stays while it is kept, and answers.
    [again] = model.translator(model.decoding(4), True).translate(["tom is here."])
    assert again.hypotheses[0].text == second.translate(["tom is here."])[0].hypotheses[0].text
    assert translation.hypotheses[0].text
