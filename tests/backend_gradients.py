"""Gradients on whichever Keras backend the tests run on (TensorFlow, JAX, PyTorch).

Each backend's own autodiff is imported only when that backend is the one running, so
a test module using this helper runs without TensorFlow on the others.
"""

import keras
from keras import ops


def gradients(loss, variables=(), inputs=()):
    """Gradients of the scalar `loss(*inputs)` with respect to `variables` (Keras
    variables the loss reads, e.g. a layer's trainable weights) and `inputs`.

    Returns `(variable_gradients, input_gradients)`, lists of NumPy arrays (None
    where the loss does not depend on that variable or input).
    """
    variables = list(variables)
    inputs = [ops.convert_to_tensor(x) for x in inputs]
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(inputs)
            value = loss(*inputs)
        found = tape.gradient(value, variables + inputs)
    elif backend == "jax":
        import jax

        def loss_of(values, inputs):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss(*inputs)

        by_variable, by_input = jax.grad(loss_of, argnums=(0, 1))(
            [v.value for v in variables], inputs
        )
        found = list(by_variable) + list(by_input)
    elif backend == "torch":
        import torch

        inputs = [x.detach().requires_grad_(True) for x in inputs]
        value = loss(*inputs)
        found = torch.autograd.grad(
            value, [v.value for v in variables] + inputs, allow_unused=True
        )
    else:
        raise ValueError(f"No gradient helper for this backend. Received: backend={backend}")
    found = [None if g is None else ops.convert_to_numpy(g) for g in found]
    return found[: len(variables)], found[len(variables):]
