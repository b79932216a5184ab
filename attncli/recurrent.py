"""GRU and LSTM cells split into an input projection and a recurrent step.

A recurrent layer's input term `x_t W` does not depend on the state, so it is computed
for every time step in one large matrix product (`project_inputs`) and only the
recurrent term `h_{t-1} U` stays inside the loop (`step`). `keras.layers.GRU` computes
both inside its loop on CPU; this split is what makes our encoder and decoder faster.
Weights have the layout of `keras.layers.GRUCell` / `LSTMCell` (gates `z, r, h` and
`i, f, c, o`), so results can be checked against Keras with the same weights.
"""

import keras
import tensorflow as tf
from keras import ops


class _SplitCell(keras.layers.Layer):
    """Shared weights and loop of the split cells; subclasses define `gates` and `step`."""

    gates = 0

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        if units < 1:
            raise ValueError(f"`units` must be a positive integer. Received: units={units}")
        self.units = units

    def build(self, input_shape):
        input_dim = input_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(input_dim, self.gates * self.units),
            initializer="glorot_uniform",
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.units, self.gates * self.units),
            initializer="orthogonal",
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.gates * self.units,), initializer=self._bias_initializer(),
        )

    def _bias_initializer(self):
        return "zeros"

    def project_inputs(self, inputs, offset=0, use_bias=True):
        """`inputs @ kernel[offset : offset + d] (+ bias)`, for any leading dims.

        `offset` selects the kernel rows of one part of a concatenated input
        `[a; b]`: `project(a) + project(b, offset=dim(a), use_bias=False)` equals
        `project([a; b])`.
        """
        kernel = self.kernel[offset : offset + inputs.shape[-1]]
        projected = ops.matmul(inputs, kernel)
        return projected + self.bias if use_bias else projected

    def initial_state(self, batch_size):
        """Zero states, a tuple with one `(batch_size, units)` tensor per state."""
        return tuple(ops.zeros((batch_size, self.units)) for _ in range(self.num_states))

    def run(self, projected_inputs, initial_state, mask=None, reverse=False):
        """Run the cell over a sequence whose inputs are already projected.

        Where `mask` is False the state is carried over unchanged and the output is
        zero, so right-padding never changes the final state, in either direction.

        Args:
            projected_inputs: `(batch_size, T, gates * units)`, from `project_inputs`.
            initial_state: tuple of `(batch_size, units)` tensors.
            mask: boolean `(batch_size, T)` or None.
            reverse: bool, read the sequence from its last step to its first.

        Returns:
            `(outputs, final_state)`: outputs `(batch_size, T, units)` in the
            original time order, and the tuple of final states.
        """
        # time-major: T x batch x features
        inputs = tf.transpose(projected_inputs, (1, 0, 2))
        zero_output = tf.zeros_like(initial_state[0])
        if mask is None:

            def scan_step(carry, gates_x):
                return self.step(gates_x, carry[1])

            elems = inputs
        else:

            def scan_step(carry, elems):
                states = carry[1]
                gates_x, keep = elems
                output, new_states = self.step(gates_x, states)
                keep = keep[:, None]
                new_states = tuple(
                    tf.where(keep, new, old) for new, old in zip(new_states, states)
                )
                return tf.where(keep, output, zero_output), new_states

            elems = (inputs, tf.transpose(tf.cast(mask, "bool"), (1, 0)))
        outputs, states = tf.scan(
            scan_step, elems, initializer=(zero_output, tuple(initial_state)), reverse=reverse
        )
        final_state = tuple(state[0 if reverse else -1] for state in states)
        return tf.transpose(outputs, (1, 0, 2)), final_state

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config


@keras.saving.register_keras_serializable(package="attncli")
class GRUCell(_SplitCell):
    """Gated recurrent unit (Cho et al. 2014), reset gate applied after the product.

        z = sigmoid(x W_z + h U_z + b_z)
        r = sigmoid(x W_r + h U_r + b_r)
        n = tanh(x W_n + b_n + r * (h U_n + b^h_n))
        h' = z * h + (1 - z) * n

    the `reset_after=True` form of `keras.layers.GRUCell` (and cuDNN). The state is
    the tuple `(h,)`.

    Args:
        units: int, size of the state.

    Call arguments (of `step`):
        projected_inputs: `(batch_size, 3 * units)`, `project_inputs(x_t)`.
        states: tuple `(h,)`, `h` of shape `(batch_size, units)`.

    Returns:
        `(h', (h',))`.
    """

    gates = 3
    num_states = 1

    def build(self, input_shape):
        super().build(input_shape)
        self.recurrent_bias = self.add_weight(
            name="recurrent_bias", shape=(3 * self.units,), initializer="zeros"
        )

    def step(self, projected_inputs, states):
        (h,) = states
        x_z, x_r, x_n = ops.split(projected_inputs, 3, axis=-1)
        recurrent = ops.matmul(h, self.recurrent_kernel) + self.recurrent_bias
        h_z, h_r, h_n = ops.split(recurrent, 3, axis=-1)
        z = ops.sigmoid(x_z + h_z)
        r = ops.sigmoid(x_r + h_r)
        n = ops.tanh(x_n + r * h_n)
        h = z * h + (1.0 - z) * n
        return h, (h,)


@keras.saving.register_keras_serializable(package="attncli")
class LSTMCell(_SplitCell):
    """Long short-term memory (Hochreiter & Schmidhuber 1997), gates `i, f, c, o`.

        [i, f, g, o] = x W + h U + b
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h' = sigmoid(o) * tanh(c')

    the form of `keras.layers.LSTMCell`, forget-gate bias initialised to 1. The
    state is the tuple `(h, c)`.

    Args:
        units: int, size of `h` and `c`.

    Call arguments (of `step`):
        projected_inputs: `(batch_size, 4 * units)`, `project_inputs(x_t)`.
        states: tuple `(h, c)`, each `(batch_size, units)`.

    Returns:
        `(h', (h', c'))`.
    """

    gates = 4
    num_states = 2

    def _bias_initializer(self):
        units = self.units

        def initializer(shape, dtype=None):
            return ops.concatenate(
                [ops.zeros((units,)), ops.ones((units,)), ops.zeros((2 * units,))]
            )

        return initializer

    def step(self, projected_inputs, states):
        h, c = states
        gates = projected_inputs + ops.matmul(h, self.recurrent_kernel)
        i, f, g, o = ops.split(gates, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.sigmoid(o) * ops.tanh(c)
        return h, (h, c)


def make_cell(kind, units, name):
    """A `GRUCell` (`kind="gru"`) or `LSTMCell` (`kind="lstm"`)."""
    cells = {"gru": GRUCell, "lstm": LSTMCell}
    if kind not in cells:
        raise ValueError(f"`kind` must be 'gru' or 'lstm'. Received: kind={kind!r}")
    return cells[kind](units, name=name)
