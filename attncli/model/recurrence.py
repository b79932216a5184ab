"""The time loops of the split GRU and LSTM cells, with a hand-written gradient.

TensorFlow's gradient of a while loop keeps every step's intermediates on stacks
and, going backward, multiplies by the recurrent kernel twice per step: once for the
state's gradient, once for the kernel's. Here the forward loop keeps the states and
the recurrent products `h U (+ b^h)`; the backward loop runs in reverse computing only
each step's state gradient `dh_{t-1}`, and everything that does not carry over time
is computed outside the loops on all steps at once: the gate activations (from the
kept inputs and recurrent products, without another product), the gates' gradients,
the kernel's gradient `dU = sum_t h_{t-1}^T d(gates_t)` (one large product) and the
inputs' gradient.

Tensors are time-major with the cells stacked: inputs `(T, cells, batch, gates * units)`,
states `(T, cells, batch, units)`, recurrent kernels `(cells, units, gates * units)`.
`running`, int `(T,)` or None, is the number of leading rows step `t` updates; the
other rows keep their state, so their gradient passes through the step unchanged.

Precision: the states, the gates and every gradient carried over time are computed in
the initial state's dtype, the products with the recurrent kernel in the kernel's
(`product`). Under a mixed policy the states are float32 and the kernel bfloat16 or
float16: each step's `h U` and `d(gates) U^T` and the kernel's gradient run in the
half type (the operands rounded to it, the sums accumulated in float32 by the
matrix kernels), and nothing rounds the states from one step to the next.

Traced in a graph, `tf.custom_gradient` registers its gradient function in TensorFlow's
global gradient registry under a new name, for the life of the process, and that
function holds the graph it was traced in. Graphs that are never differentiated (a
server's searches, traced again for every setting asked) are traced under
`forward_only()`: the loops alone, no gradient function, so a graph dropped is freed.
"""

import contextlib
import threading

import tensorflow as tf

_tracing = threading.local()


@contextlib.contextmanager
def forward_only():
    """Within it, on this thread, `gru_states` and `lstm_states` run their forward loop
    alone, without the hand-written gradient (`tf.custom_gradient` registers nothing).

    For graphs traced only to be run, never differentiated. The result is the same
    states; a gradient taken of it anyway is TensorFlow's own, through the loop: right,
    only slower.
    """
    before = getattr(_tracing, "forward_only", False)
    _tracing.forward_only = True
    try:
        yield
    finally:
        _tracing.forward_only = before


def _differentiable():
    return not getattr(_tracing, "forward_only", False)


def gru_gates(projected_inputs, recurrent):
    """`(z, r, n, h U_n + b^h_n)` of the reset-after GRU (see `GRUCell`), any leading dims.

        z = sigmoid(x W_z + h U_z + b_z),  r = sigmoid(x W_r + h U_r + b_r)
        n = tanh(x W_n + b_n + r * (h U_n + b^h_n))

    from `projected_inputs = x W + b` and `recurrent = h U + b^h`.
    """
    x_z, x_r, x_n = tf.split(projected_inputs, 3, axis=-1)
    h_z, h_r, h_n = tf.split(recurrent, 3, axis=-1)
    z = tf.sigmoid(x_z + h_z)
    r = tf.sigmoid(x_r + h_r)
    n = tf.tanh(x_n + r * h_n)
    return z, r, n, h_n


def lstm_gates(projected_inputs, recurrent):
    """`(sigmoid(i), sigmoid(f), tanh(g), sigmoid(o))` of `[i, f, g, o] = x W + b + h U`.

    From `projected_inputs = x W + b` and `recurrent = h U`.
    """
    i, f, g, o = tf.split(projected_inputs + recurrent, 4, axis=-1)
    return tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)


def product(x, kernel):
    """`x @ kernel` computed in the kernel's dtype and returned in `x`'s."""
    return tf.cast(tf.matmul(tf.cast(x, kernel.dtype), kernel), x.dtype)


def _kernel_gradients(h_previous, gate_gradients, dtype):
    """`sum_t h_{t-1}^T d(gates_t)` per cell, `(cells, units, features)`, in one product
    in `dtype` (the kernel's); and `sum_t d(gates_t)` summed over the batch too,
    `(cells, features)`, in the gradients' own dtype."""
    def folded(x):
        # per cell: (T * batch) x features
        return tf.reshape(tf.transpose(x, (1, 0, 2, 3)), (tf.shape(x)[1], -1, x.shape[-1]))

    gate_gradients = folded(gate_gradients)
    return (tf.matmul(tf.cast(folded(h_previous), dtype), tf.cast(gate_gradients, dtype),
                      transpose_a=True),
            tf.reduce_sum(gate_gradients, axis=1))


def _step_mask(running, states):
    """float `(T, 1, batch, 1)`, 1 where step `t` updates the row; None if all rows run."""
    if running is None:
        return None
    rows = tf.range(tf.shape(states)[2])
    return tf.cast(rows[None, :] < running[:, None], states.dtype)[:, None, :, None]


def _join(head, full, n):
    """`head` for the first `n` rows (batch axis -2), `full`'s own rows after them."""
    joined = tf.concat([head, full[..., n:, :]], axis=-2)
    # a loop's carry keeps its static shape, which the concatenation loses
    joined.set_shape(full.shape)
    return joined


def _gru_transition(recurrent_kernel, recurrent_bias):
    """One step of the GRUs: `(h', h U + b^h)` from `x W + b` and the states `(h, ...)`."""
    def transition(x, states):
        h = states[0]
        recurrent = product(h, recurrent_kernel) + recurrent_bias
        z, _, n, _ = gru_gates(x, recurrent)
        return z * h + (1.0 - z) * n, recurrent

    return transition


def _lstm_transition(recurrent_kernel):
    """One step of the LSTMs: `(h', c', h U)` from `x W + b` and the states `(h, c, ...)`."""
    def transition(x, states):
        h, c = states[:2]
        recurrent = product(h, recurrent_kernel)
        i, f, g, o = lstm_gates(x, recurrent)
        c = f * c + i * g
        return o * tf.tanh(c), c, recurrent

    return transition


def _forward(transition, inputs, states, running):
    """The states after every step: a tuple of `(T, cells, batch, units)`."""
    if running is None:
        return tf.scan(lambda s, x: transition(x, s), inputs, initializer=states)

    def step(states, elems):
        x, n = elems
        head = transition(x[..., :n, :], tuple(s[..., :n, :] for s in states))
        return tuple(_join(new, s, n) for new, s in zip(head, states))

    return tf.scan(step, (inputs, running), initializer=states)


def _backward(step, elems, carry, running):
    """The carried gradients entering every step, from a reverse loop.

    `step(carry, elems_t)` returns `(carry for the rows it runs, carry passed through
    by the others)` from the carry after step `t` (the gradient of `h_t`, ...); the
    result's entry `t` is the gradient with respect to the state before step `t`.
    """
    if running is None:
        return tf.scan(lambda c, e: step(c, e)[0], elems, initializer=carry, reverse=True)

    def sliced_step(carry, elems_t):
        *elems_t, n = elems_t
        head, passed = step(carry, elems_t, n)
        return tuple(_join(h, p, n) for h, p in zip(head, passed))

    return tf.scan(sliced_step, (*elems, running), initializer=carry, reverse=True)


def _shifted(carries, initial):
    """The gradient each step's output receives from the later steps: `carries[t + 1]`."""
    return tf.concat([carries[1:], tf.zeros_like(initial)[None]], axis=0)


def _first(carries, initial):
    """`carries[0]`, the gradient of the initial state (zeros if there are no steps)."""
    return tf.reduce_sum(carries[:1], axis=0) + tf.zeros_like(initial)


def gru_states(inputs, h0, running, recurrent_kernel, recurrent_bias):
    """Every step's `h` of stacked reset-after GRUs, `(T, cells, batch, units)`.

    Args:
        inputs: `(T, cells, batch, 3 * units)`, the cells' `project_inputs(x_t)`,
            any float dtype (cast to `h0`'s).
        h0: `(cells, batch, units)`, in the dtype of the states.
        running: int `(T,)` or None.
        recurrent_kernel: `(cells, units, 3 * units)`, in the dtype of the products.
        recurrent_bias: `(cells, 1, 3 * units)`, any float dtype (cast to `h0`'s).

    The gradient, with `g_t = dL/dh_t` (the output's own gradient plus what step
    `t + 1` passes back) and `h = h_{t-1}`:

        dz~ = g (h - n) z (1 - z),   dn~ = g (1 - z) (1 - n^2),   dr~ = dn~ h_n r (1 - r)
        d(x W) = [dz~, dr~, dn~],    d(h U + b^h) = [dz~, dr~, r dn~]
        dL/dh_{t-1} = g z + d(h U + b^h) U^T
    """
    inputs, recurrent_bias = tf.cast(inputs, h0.dtype), tf.cast(recurrent_bias, h0.dtype)
    if not _differentiable():
        transition = _gru_transition(recurrent_kernel, recurrent_bias)
        (hs,) = _forward(lambda x, s: transition(x, s)[:1], inputs, (h0,), running)
        return hs

    @tf.custom_gradient
    def states(inputs, h0, recurrent_kernel, recurrent_bias):
        hs, recurrents = _forward(_gru_transition(recurrent_kernel, recurrent_bias), inputs,
                                  (h0, tf.zeros_like(inputs[0])), running)
        kernel_t = tf.transpose(recurrent_kernel, (0, 2, 1))

        def gradient(d_hs):
            d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
            h_previous = tf.concat([h0[None], hs[:-1]], axis=0)
            z, r, n, h_n = gru_gates(inputs, recurrents)
            d_z = (h_previous - n) * z * (1.0 - z)
            d_n = (1.0 - z) * (1.0 - n * n)
            d_r = d_n * h_n * r * (1.0 - r)
            # per unit of g: d(h U + b^h)
            d_recurrent = tf.concat([d_z, d_r, d_n * r], axis=-1)

            def step(carry, elems, n=None):
                (after,) = carry
                d_h, d_rec, z = elems
                g = d_h + after
                head = slice(None) if n is None else slice(None, n)
                g_head = g[..., head, :]
                d_gates = tf.concat([g_head] * 3, axis=-1) * d_rec[..., head, :]
                before = g_head * z[..., head, :] + product(d_gates, kernel_t)
                return (before,), (g,)

            (carries,) = _backward(step, (d_hs, d_recurrent, z), (tf.zeros_like(h0),), running)
            g = d_hs + _shifted(carries, h0)
            mask = _step_mask(running, hs)
            if mask is not None:
                g = g * mask
            d_gates = tf.concat([g, g, g], axis=-1) * d_recurrent
            d_kernel, d_bias = _kernel_gradients(h_previous, d_gates, kernel_t.dtype)
            d_bias = tf.reshape(d_bias, tf.shape(recurrent_bias))
            d_inputs = tf.concat([g * d_z, g * d_r, g * d_n], axis=-1)
            return d_inputs, _first(carries, h0), d_kernel, d_bias

        return hs, gradient

    return states(inputs, h0, recurrent_kernel, recurrent_bias)


def lstm_states(inputs, h0, c0, running, recurrent_kernel):
    """Every step's `(h, c)` of stacked LSTMs, each `(T, cells, batch, units)`.

    Args:
        inputs: `(T, cells, batch, 4 * units)`, the cells' `project_inputs(x_t)`,
            any float dtype (cast to `h0`'s).
        h0, c0: `(cells, batch, units)`, in the dtype of the states.
        running: int `(T,)` or None.
        recurrent_kernel: `(cells, units, 4 * units)`, in the dtype of the products.

    The gradient, with `g_h`, `g_c` the gradients of `h_t`, `c_t` (their own plus
    what step `t + 1` passes back), `c = c_{t-1}` and `s = sigmoid`:

        g = g_c + g_h s(o) (1 - tanh^2 c_t)
        d[i, f, g, o] = [g tanh(g~) s(i)(1 - s(i)), g c s(f)(1 - s(f)),
                         g s(i)(1 - tanh^2 g~), g_h tanh(c_t) s(o)(1 - s(o))]
        dL/dh_{t-1} = d[i, f, g, o] U^T,   dL/dc_{t-1} = g s(f)
    """
    inputs = tf.cast(inputs, h0.dtype)
    if not _differentiable():
        transition = _lstm_transition(recurrent_kernel)
        return _forward(lambda x, s: transition(x, s)[:2], inputs, (h0, c0), running)

    @tf.custom_gradient
    def states(inputs, h0, c0, recurrent_kernel):
        hs, cs, recurrents = _forward(_lstm_transition(recurrent_kernel), inputs,
                                      (h0, c0, tf.zeros_like(inputs[0])), running)
        kernel_t = tf.transpose(recurrent_kernel, (0, 2, 1))

        def gradient(d_hs, d_cs):
            d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
            d_cs = tf.zeros_like(cs) if d_cs is None else d_cs
            h_previous = tf.concat([h0[None], hs[:-1]], axis=0)
            c_previous = tf.concat([c0[None], cs[:-1]], axis=0)
            i, f, g, o = lstm_gates(inputs, recurrents)
            tanh_c = tf.tanh(cs)
            # g_c += g_h * through_c
            through_c = o * (1.0 - tanh_c * tanh_c)
            # d[i, f, g] per unit of g_c, d[o] per unit of g_h
            d_activations = tf.concat([
                g * i * (1.0 - i), c_previous * f * (1.0 - f), i * (1.0 - g * g),
                tanh_c * o * (1.0 - o),
            ], axis=-1)

            def step(carry, elems, n=None):
                h_after, c_after = carry
                d_h, d_c, through, d_act, forget = elems
                g_h = d_h + h_after
                g_c = d_c + c_after + g_h * through
                head = slice(None) if n is None else slice(None, n)
                g_h_head, g_c_head = g_h[..., head, :], g_c[..., head, :]
                d_gates = tf.concat([g_c_head] * 3 + [g_h_head], axis=-1) * d_act[..., head, :]
                before = (product(d_gates, kernel_t), g_c_head * forget[..., head, :])
                # a row not run passes its gradients through: c's without the h term
                return before, (g_h, d_c + c_after)

            h_carries, c_carries = _backward(
                step, (d_hs, d_cs, through_c, d_activations, f),
                (tf.zeros_like(h0), tf.zeros_like(c0)), running,
            )
            g_h = d_hs + _shifted(h_carries, h0)
            g_c = d_cs + _shifted(c_carries, c0) + g_h * through_c
            mask = _step_mask(running, hs)
            if mask is not None:
                g_h, g_c = g_h * mask, g_c * mask
            d_gates = tf.concat([g_c, g_c, g_c, g_h], axis=-1) * d_activations
            d_kernel, _ = _kernel_gradients(h_previous, d_gates, kernel_t.dtype)
            return d_gates, _first(h_carries, h0), _first(c_carries, c0), d_kernel

        return (hs, cs), gradient

    return states(inputs, h0, c0, recurrent_kernel)
