"""GRU and LSTM cells split into an input projection and a recurrent step.

A recurrent layer's input term `x_t W` does not depend on the state, so it is computed
for every time step in one large matrix product (`project_inputs`) and only the
recurrent term `h_{t-1} U` stays inside the loop (`step`, or
`attncli.model.recurrent.run` for a whole sequence). Weights have the layout of
`keras.layers.GRUCell` / `LSTMCell` (gates `z, r, h` and `i, f, c, o`), so results can
be checked against Keras with the same weights.

Under a mixed dtype policy the cells read their weights in the compute dtype
(bfloat16 or float16), as every Keras layer does, and compute the products in it;
the states and the gates stay in the variables' dtype, float32
(`attncli.model.recurrence`), so that rounding does not build up over the steps.
"""

import keras
from keras import ops

from attncli.model import recurrence


class _SplitCell(keras.layers.Layer):
    """Weights and projection of the split cells.

    Subclasses set `gates` and `num_states` and define `recurrent_weights` and
    `transition(projected_inputs, states, *recurrent_weights)`.

    `project_inputs` returns the compute dtype; states are in `state_dtype`, the
    variables' dtype (float32 under a mixed policy).
    """

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
        kernel = self.computed(self.kernel)[offset : offset + inputs.shape[-1]]
        projected = ops.matmul(ops.cast(inputs, self.compute_dtype), kernel)
        return projected + self.computed(self.bias) if use_bias else projected

    def computed(self, weight):
        """`weight` in the compute dtype, inside a parent's `__call__` or not."""
        return ops.cast(weight, self.compute_dtype)

    @property
    def state_dtype(self):
        return self.variable_dtype

    def initial_state(self, batch_size):
        """Zero states, a tuple with one `(batch_size, units)` tensor per state."""
        return tuple(
            ops.zeros((batch_size, self.units), dtype=self.state_dtype)
            for _ in range(self.num_states)
        )

    def step(self, projected_inputs, states):
        """One time step: `(output, new_states)` from `project_inputs(x_t)` and states
        (`state_dtype`; the output is `h`, in `state_dtype` too)."""
        weights = [self.computed(weight) for weight in self.recurrent_weights()]
        return self.transition(projected_inputs, states, *weights)

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

    Call arguments (of `step`; `transition` is the same function of explicit
    weights, which `run` stacks to run several cells side by side; it computes in
    the states' dtype, the product `h U` in the kernel's):
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

    def recurrent_weights(self):
        return self.recurrent_kernel, self.recurrent_bias

    @staticmethod
    def transition(projected_inputs, states, recurrent_kernel, recurrent_bias):
        (h,) = states
        recurrent = recurrence.product(h, recurrent_kernel) + ops.cast(recurrent_bias, h.dtype)
        z, _, n, _ = recurrence.gru_gates(ops.cast(projected_inputs, h.dtype), recurrent)
        h = z * h + (1.0 - z) * n
        return h, (h,)

    @staticmethod
    def sequence(projected_inputs, states, running, recurrent_kernel, recurrent_bias):
        return (recurrence.gru_states(
            projected_inputs, states[0], running, recurrent_kernel, recurrent_bias
        ),)


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

    Call arguments (of `step`, or `transition` with explicit weights):
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

    def recurrent_weights(self):
        return (self.recurrent_kernel,)

    @staticmethod
    def transition(projected_inputs, states, recurrent_kernel):
        h, c = states
        i, f, g, o = recurrence.lstm_gates(
            ops.cast(projected_inputs, h.dtype), recurrence.product(h, recurrent_kernel)
        )
        c = f * c + i * g
        h = o * ops.tanh(c)
        return h, (h, c)

    @staticmethod
    def sequence(projected_inputs, states, running, recurrent_kernel):
        return recurrence.lstm_states(projected_inputs, *states, running, recurrent_kernel)


def make_cell(kind, units, name, dtype=None):
    """A `GRUCell` (`kind="gru"`) or `LSTMCell` (`kind="lstm"`)."""
    cells = {"gru": GRUCell, "lstm": LSTMCell}
    if kind not in cells:
        raise ValueError(f"`kind` must be 'gru' or 'lstm'. Received: kind={kind!r}")
    return cells[kind](units, name=name, dtype=dtype)
