"""FusedAdam against Adam written in NumPy from Kingma & Ba (2015) and against Keras's Adam."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.config.training import TrainingConfig
from attncli.training.optimizers import FusedAdam
from attncli.training.optimizer_setup import make_optimizer


def numpy_adam(weights, gradients, learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """Weights after one Adam update per entry of `gradients` (Keras's epsilon placement)."""
    w = weights.astype("float64")
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(gradients, start=1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        alpha = learning_rate * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
        w = w - alpha * m / (np.sqrt(v) + epsilon)
    return w


def run(optimizer, initial, gradients, sparse_rows=None):
    variable = keras.Variable(initial)
    optimizer.build([variable])
    for gradient in gradients:
        if sparse_rows is not None:
            gradient = tf.IndexedSlices(
                tf.constant(gradient[sparse_rows]), tf.constant(sparse_rows),
                tf.constant(gradient.shape),
            )
        optimizer.apply_gradients([(gradient, variable)])
    return keras.ops.convert_to_numpy(variable)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "embedding rows"])
def test_fused_adam_equals_numpy_and_keras(sparse):
    rng = np.random.default_rng(0)
    initial = rng.normal(size=(6, 4)).astype("float32")
    rows = np.array([1, 4, 1], "int64") if sparse else None
    gradients = []
    for _ in range(4):
        gradient = rng.normal(size=(6, 4)).astype("float32")
        if sparse:
            # rows not looked up get no gradient; row 1 twice gets the sum
            gradient[[0, 2, 3, 5]] = 0.0
        gradients.append(gradient)
    expected_gradients = gradients
    if sparse:
        expected_gradients = [g + np.where(np.arange(6)[:, None] == 1, g, 0) for g in gradients]
    fused = run(FusedAdam(learning_rate=0.01), initial, gradients, rows)
    np.testing.assert_allclose(fused, numpy_adam(initial, expected_gradients, 0.01),
                               rtol=1e-5, atol=1e-6)
    if not sparse:
        # Keras's Adam squares each slice of a sparse gradient (sum of squares over a
        # repeated row, not the square of the row's gradient), so it equals the paper's
        # only on dense gradients, or once clipping has made them dense.
        np.testing.assert_allclose(
            fused, run(keras.optimizers.Adam(learning_rate=0.01), initial, gradients),
            rtol=1e-5, atol=1e-6,
        )


def test_fused_adam_follows_a_schedule_and_clipping():
    rng = np.random.default_rng(1)
    initial = rng.normal(size=(5,)).astype("float32")
    gradients = [rng.normal(size=(5,)).astype("float32") * 10 for _ in range(3)]
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    options = dict(learning_rate=schedule, global_clipnorm=1.0)
    np.testing.assert_allclose(
        run(FusedAdam(**options), initial, gradients),
        run(keras.optimizers.Adam(**options), initial, gradients),
        rtol=1e-5, atol=1e-6,
    )


@pytest.mark.parametrize("average_decay", [None, 0.9], ids=["plain", "averaged"])
def test_the_configs_betas_and_epsilon_reach_adam(average_decay):
    # Every value moved from Keras's default, each far enough to change the weights by
    # itself (an epsilon as small as Vaswani et al.'s 1e-9 would not show beside sqrt(v)):
    # the raw weights equal the paper's Adam with these values.
    rng = np.random.default_rng(2)
    initial = rng.normal(size=(3, 4)).astype("float32")
    gradients = [rng.normal(size=(3, 4)).astype("float32") for _ in range(5)]
    moved = dict(beta_1=0.8, beta_2=0.98, epsilon=0.05)
    config = TrainingConfig(learning_rate=0.01, clip_norm=None, average_decay=average_decay,
                            **{f"adam_{name}": value for name, value in moved.items()})
    expected = numpy_adam(initial, gradients, 0.01, **moved)
    np.testing.assert_allclose(run(make_optimizer(config), initial, gradients), expected,
                               rtol=1e-5, atol=1e-6)
    for name in moved:
        left_at_default = numpy_adam(initial, gradients, 0.01,
                                     **{key: v for key, v in moved.items() if key != name})
        assert not np.allclose(expected, left_at_default, rtol=1e-5, atol=1e-6), name
