"""The split cells of `attncli.model.cells` run over whole sequences.

The input projections of every time step are one large matrix product
(`project_tokens`, which skips the padding), and only the recurrent term stays inside
the loop (`run`, which runs several cells side by side and, given the lengths, skips
the padding too). `keras.layers.GRU` computes both inside its loop on CPU; the split,
and running both directions of a layer in one loop, is what makes our encoder and
decoder faster. `run_keras` runs a cell by Keras's own layer instead, cuDNN's kernels
on a GPU (`uses_keras_layers` says when).
"""

import keras
import tensorflow as tf
from keras import ops

from attncli.model.cells import GRUCell


IMPLEMENTATIONS = ("auto", "loop", "keras")


def uses_keras_layers(implementation, training, compute_dtype="float32"):
    """Whether a layer runs its recurrences with `run_keras` rather than `run`.

    `"keras"` always, `"loop"` never; `"auto"` while training in float32 or float16
    where TensorFlow sees a GPU (Keras's own test for cuDNN), so that training gets
    cuDNN's kernels. Everything else runs the loop: validation, search and the
    export, whose graph must run on any device (one traced with cuDNN's kernels
    does not run without a GPU), and bfloat16, which cuDNN's RNN kernels are not
    known here to take (no GPU has run them; `"keras"` forces them).
    """
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"`implementation` must be one of {IMPLEMENTATIONS}. "
            f"Received: implementation={implementation!r}"
        )
    if implementation == "auto":
        return (bool(training) and compute_dtype in ("float32", "float16")
                and bool(tf.config.list_logical_devices("GPU")))
    return implementation == "keras"


def keras_layer(cell):
    """A `keras.layers.GRU` or `keras.layers.LSTM` computing with `cell`'s weights.

    With cuDNN's settings (Keras's defaults: tanh and sigmoid, biases, the GRU's
    `reset_after=True`, no recurrent dropout, not unrolled), so that the layer's
    TensorFlow backend runs cuDNN's kernel where a GPU is present and Keras's generic
    loop, the same equations, elsewhere. Its cell has no weights of its own: it reads
    `cell`'s variables, the GRU's two biases stacked as Keras keeps them, `(2, 3 *
    units)`. Made anew for every call (the stacked biases are a tensor of the graph
    being traced), it is not one of the model's layers.
    """
    options = dict(return_sequences=True, return_state=True, dtype=cell.dtype_policy,
                   name=f"{cell.name}_keras")
    if isinstance(cell, GRUCell):
        layer = keras.layers.GRU(cell.units, reset_after=True, **options)
        # bias: 2 x 3*units, the input bias then the recurrent bias
        bias = ops.stack([cell.computed(cell.bias), cell.computed(cell.recurrent_bias)])
    else:
        layer = keras.layers.LSTM(cell.units, **options)
        bias = cell.bias
    layer.cell.kernel = cell.kernel
    layer.cell.recurrent_kernel = cell.recurrent_kernel
    layer.cell.bias = bias
    layer.cell.built = True
    return layer


def run_keras(cell, inputs, initial_state, mask):
    """`run` of one cell by `keras_layer(cell)`, from the inputs before projection.

    cuDNN reads the mask as lengths: it must be right-padded. A row with no real step
    stops cuDNN (Keras asserts against it), so such a row is given one step and then
    its initial state.

    Args:
        cell: a `GRUCell` or `LSTMCell`.
        inputs: `(batch_size, T, d)`, the sequences the cell reads (not projected).
        initial_state: tuple of `(batch_size, units)`.
        mask: boolean `(batch_size, T)`, True at the real steps, right-padded.

    Returns:
        `(outputs, final_state)`: `h` after every step `(batch_size, T, units)`
        (past a row's length unspecified) and the state after each row's last real
        step (`initial_state` for a row of none), in the cell's `state_dtype`.
        Under a mixed policy Keras computes the states in the compute dtype.
    """
    empty = ops.logical_not(ops.any(mask, axis=1))
    first = ops.arange(ops.shape(mask)[1])[None, :] == 0
    mask = ops.logical_or(mask, ops.logical_and(empty[:, None], first))
    outputs, *final = keras_layer(cell)(inputs, initial_state=list(initial_state), mask=mask)
    final = tuple(
        ops.where(empty[:, None], initial, ops.cast(state, cell.state_dtype))
        for state, initial in zip(final, initial_state)
    )
    return ops.cast(outputs, cell.state_dtype), final


# Below this share of padding `project_tokens` multiplies every position: packing and
# scattering the tokens costs more than the padding's share of the product (bucketed
# batches have 1% padding, random ones about half).
PACKING_PADDING = 0.1


def project_tokens(cells, inputs, mask):
    """Every cell's `project_inputs(inputs)` at the real positions, in one product.

    Padding positions are left out of the product (their projections are 0): if the
    batch is at least `PACKING_PADDING` padding, the real tokens are packed,
    multiplied by the cells' kernels side by side and scattered back; otherwise every
    position is multiplied and the padding's projections are zeroed.

    Args:
        cells: list of cells reading the same `inputs`.
        inputs: `(batch_size, T, d)`.
        mask: boolean `(batch_size, T)`, True at real positions.

    Returns:
        list, per cell, of `(batch_size, T, gates * units)`, in the cells' compute
        dtype.
    """
    kernel = tf.concat([cell.computed(cell.kernel) for cell in cells], axis=1)
    bias = tf.concat([cell.computed(cell.bias) for cell in cells], axis=0)
    inputs = tf.cast(inputs, kernel.dtype)

    def packed():
        positions = tf.where(mask)
        # packed: tokens x d
        projected = tf.matmul(tf.gather_nd(inputs, positions), kernel) + bias
        shape = tf.concat(
            [tf.shape(mask, out_type="int64"), tf.shape(bias, out_type="int64")], 0
        )
        return tf.scatter_nd(positions, projected, shape)

    def every_position():
        # one 2-D product: a 3-D one broadcasts the kernel, and its gradient sums
        # a product per sentence
        flat = tf.reshape(inputs, (-1, inputs.shape[-1]))
        # the shape in full: with no rows (a replica's share of a tiny batch) -1 is undefined
        shape = tf.concat([tf.shape(mask), tf.shape(bias)], 0)
        projected = tf.reshape(tf.matmul(flat, kernel) + bias, shape)
        return projected * tf.cast(mask, projected.dtype)[:, :, None]

    padding = 1.0 - tf.reduce_mean(tf.cast(mask, "float32"))
    projected = tf.cond(padding >= PACKING_PADDING, packed, every_position)
    return tf.split(projected, len(cells), axis=-1)


def run(cells, projected_inputs, initial_states, lengths=None):
    """Run cells of one kind side by side over time, in a single graph loop.

    Several cells (the two directions of a bidirectional layer) share the loop: their
    states are stacked and their recurrent products batched, so each step costs one
    batched matmul instead of one per cell. Nothing is masked: with right-padded
    sequences the padding comes after every real step, and `final_state` picks the
    state of each sequence's last real step. The gradient is hand-written
    (`attncli.model.recurrence`): the backward loop computes only each step's state
    gradient, the kernels' gradients are one product over all steps.

    With `lengths`, step `t` updates only the rows up to the last one still running
    (`length > t`); the rows after it keep their state. Whatever the order this is
    exact; with rows sorted by decreasing length it skips all of the padding.

    Args:
        cells: list of `GRUCell` or `LSTMCell` of the same class and units.
        projected_inputs: list, per cell, of `(batch_size, T, gates * units)`.
        initial_states: list, per cell, of state tuples.
        lengths: int `(batch_size,)` or None, the real steps of each row.

    Returns:
        list, per cell, of the states after every step: a tuple with one
        `(batch_size, T, units)` tensor per state (the first, `h`, is the output),
        in the initial states' dtype. Past a row's length its values are unspecified.
    """
    kind = type(cells[0])
    weights = [
        tf.stack([cell.computed(weight) for cell, weight in zip(cells, same)])
        for same in zip(*(cell.recurrent_weights() for cell in cells))
    ]
    # biases: cells x 1 x features, to broadcast over the batch
    weights = [w if len(w.shape) == 3 else w[:, None, :] for w in weights]
    # time-major, cells stacked: T x cells x batch x features
    inputs = tf.transpose(tf.stack(projected_inputs), (2, 0, 1, 3))
    initializer = tuple(tf.stack(states) for states in zip(*initial_states))
    running = None
    if lengths is not None:
        steps = tf.range(tf.shape(inputs)[0])
        rows = tf.range(1, tf.shape(lengths)[0] + 1)
        # running: T, the number of leading rows step t must update
        running = tf.reduce_max(
            tf.where(lengths[None, :] > steps[:, None], rows[None, :], 0), axis=1
        )
    states = kind.sequence(inputs, initializer, running, *weights)
    # per cell, batch-major; unstacked, as slicing each cell out costs a gradient
    # that writes a zero-filled copy of all cells' states per cell
    per_cell = zip(*(tf.unstack(s, axis=1) for s in states))
    return [tuple(tf.transpose(s, (1, 0, 2)) for s in cell_states) for cell_states in per_cell]


def final_state(states, lengths, initial_state):
    """Each sequence's state after its last real step (`initial_state` if empty).

    Args:
        states: tuple of `(batch_size, T, units)`, from `run`.
        lengths: int `(batch_size,)`, the number of real steps.
        initial_state: tuple of `(batch_size, units)`.
    """
    last = tf.maximum(lengths - 1, 0)
    empty = (lengths == 0)[:, None]
    return tuple(
        tf.where(empty, initial, tf.gather(state, last, axis=1, batch_dims=1))
        for state, initial in zip(states, initial_state)
    )
