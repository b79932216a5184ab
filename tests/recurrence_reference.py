"""The recurrence's references, shared by the gradient and precision tests: the GRU
(reset-after) and LSTM equations of the cells' docstrings run step by step in NumPy
float64 on stacked cells (at step `t` only the leading rows up to the last one with
`length > t` update; the others keep their state), central finite differences, random
problems, and the two TensorFlow runs compared with them: ours (`ours`) and autodiff of
a plain `tf.scan` (`autodiff_states`)."""

import numpy as np
import tensorflow as tf

from attncli.model import recurrence
from attncli.model.cells import GRUCell, LSTMCell

T, CELLS, BATCH, UNITS = 4, 2, 3, 2


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_gru_step(x, h, kernel, bias):
    u = h.shape[-1]
    recurrent_term = h @ kernel + bias
    z = sigmoid(x[:, :u] + recurrent_term[:, :u])
    r = sigmoid(x[:, u:2 * u] + recurrent_term[:, u:2 * u])
    n = np.tanh(x[:, 2 * u:] + r * recurrent_term[:, 2 * u:])
    return (z * h + (1 - z) * n,)


def numpy_lstm_step(x, h, c, kernel):
    u = h.shape[-1]
    gates = x + h @ kernel
    i, f, g, o = (gates[:, k * u:(k + 1) * u] for k in range(4))
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def numpy_running(lengths, steps):
    """Per step, one past the last row with `length > t` (0 if none)."""
    return [max([row + 1 for row, length in enumerate(lengths) if length > t], default=0)
            for t in range(steps)]


def numpy_states(kind, inputs, initial, weights, lengths):
    """Every step's states, `(T, cells, batch, units)` each, from the equations."""
    step = numpy_gru_step if kind == "gru" else numpy_lstm_step
    running = numpy_running(lengths, inputs.shape[0]) if lengths is not None else None
    states = [s.copy() for s in initial]
    history = []
    for t in range(inputs.shape[0]):
        n = BATCH if running is None else running[t]
        for cell in range(inputs.shape[1]):
            cell_weights = [w[cell] for w in weights]
            if kind == "gru":
                cell_weights[1] = cell_weights[1].reshape(-1)
            new = step(inputs[t, cell, :n], *(s[cell, :n] for s in states), *cell_weights)
            for s, value in zip(states, new):
                s[cell, :n] = value
        history.append([s.copy() for s in states])
    return [np.stack([h[k] for h in history]) for k in range(len(states))]


def finite_differences(function, arrays, epsilon=1e-6):
    """Central differences of the scalar `function(*arrays)` with respect to every array."""
    gradients = []
    for array in arrays:
        gradient = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + epsilon
            up = function(*arrays)
            array[index] = saved - epsilon
            down = function(*arrays)
            array[index] = saved
            gradient[index] = (up - down) / (2 * epsilon)
        gradients.append(gradient)
    return gradients


def random_problem(kind, seed, sizes=(T, CELLS, BATCH, UNITS)):
    """`(inputs, initial states, recurrent weights, cotangents)` of `gru_states` or
    `lstm_states`, float64, for `sizes` = (steps, cells, batch, units)."""
    steps, cells, batch, units = sizes
    rng = np.random.default_rng(seed)
    gates = 3 if kind == "gru" else 4
    inputs = rng.normal(size=(steps, cells, batch, gates * units))
    initial = [rng.normal(size=(cells, batch, units)) for _ in range(1 if kind == "gru" else 2)]
    weights = [rng.normal(size=(cells, units, gates * units))]
    if kind == "gru":
        weights.append(rng.normal(size=(cells, 1, gates * units)))
    cotangents = [rng.normal(size=(steps, cells, batch, units)) for _ in initial]
    return inputs, initial, weights, cotangents


def ours(kind, inputs, initial, weights, lengths):
    running = None
    if lengths is not None:
        running = tf.constant(numpy_running(lengths, T), tf.int32)
    if kind == "gru":
        return (recurrence.gru_states(inputs, *initial, running, *weights),)
    return recurrence.lstm_states(inputs, *initial, running, *weights)


def autodiff_states(kind, inputs, initial, weights, running):
    """A plain `tf.scan` of the cells' `transition`, differentiated by TensorFlow."""
    transition = GRUCell.transition if kind == "gru" else LSTMCell.transition

    def step(states, elems):
        x, n = elems
        _, head = transition(x[..., :n, :], tuple(s[..., :n, :] for s in states), *weights)
        return tuple(tf.ensure_shape(tf.concat([a, s[..., n:, :]], axis=-2), s.shape)
                     for a, s in zip(head, states))

    return tf.scan(step, (inputs, running), initializer=tuple(initial))
