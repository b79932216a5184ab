import math

import keras
import numpy as np
import pytest
from keras import ops

from layers import ScaledDotSelfAttention
from numpy_attention import lengths_to_mask, reference_attention


def numpy_of(tensor):
    return ops.convert_to_numpy(ops.cast(tensor, "float32"))


# The "Illustrated Self-Attention" worked example of design note 002.
X = np.array([[[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]], "float32")
W_K = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], "float32")
W_Q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], "float32")
W_V = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], "float32")


def layer_with_weights(w_q, w_k, w_v, biases=None, **kwargs):
    layer = ScaledDotSelfAttention(key_dim=w_q.shape[1], value_dim=w_v.shape[1],
                                   use_bias=biases is not None, **kwargs)
    layer.build((None, None, w_q.shape[0]))
    layer.W_q.assign(w_q)
    layer.W_k.assign(w_k)
    layer.W_v.assign(w_v)
    if biases is not None:
        layer.b_q.assign(biases[0])
        layer.b_k.assign(biases[1])
        layer.b_v.assign(biases[2])
    return layer


def test_worked_example_unscaled():
    layer = layer_with_weights(W_Q, W_K, W_V, use_scale=False)
    queries, keys, values = (numpy_of(t) for t in layer.project(X))
    np.testing.assert_array_equal(keys[0], [[0, 1, 1], [4, 4, 0], [2, 3, 1]])
    np.testing.assert_array_equal(queries[0], [[1, 0, 2], [2, 2, 2], [2, 1, 3]])
    np.testing.assert_array_equal(values[0], [[1, 2, 3], [2, 8, 0], [2, 6, 3]])
    scores = numpy_of(layer.score(queries, keys))
    np.testing.assert_array_equal(scores[0, 0], [2, 4, 4])
    output, weights = layer(X, return_attention_scores=True)
    # The note rounds softmax([2, 4, 4]) to [0, 0.5, 0.5] and output 1 to
    # [2, 7, 1.5]; the exact values are these.
    np.testing.assert_allclose(numpy_of(weights)[0, 0], [0.0634, 0.4683, 0.4683], atol=1e-4)
    np.testing.assert_allclose(numpy_of(output)[0, 0], [1.9366, 6.6831, 1.5951], atol=1e-4)


def test_worked_example_scaled_divides_scores_by_sqrt_key_dim():
    layer = layer_with_weights(W_Q, W_K, W_V)
    _, weights = layer(X, return_attention_scores=True)
    scores = np.array([2.0, 4.0, 4.0]) / math.sqrt(3)
    expected = np.exp(scores) / np.exp(scores).sum()
    np.testing.assert_allclose(numpy_of(weights)[0, 0], expected, atol=1e-6)


def random_layer_and_inputs(use_bias, batch=3, length=5, dim=6, key_dim=4, value_dim=3):
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(dim, units)).astype("float32")
               for units in (key_dim, key_dim, value_dim)]
    biases = None
    if use_bias:
        biases = [rng.normal(size=(units,)).astype("float32")
                  for units in (key_dim, key_dim, value_dim)]
    inputs = rng.normal(size=(batch, length, dim)).astype("float32")
    return weights, biases, inputs


@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("use_scale", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_with_masks(use_bias, use_scale, causal):
    (w_q, w_k, w_v), biases, inputs = random_layer_and_inputs(use_bias)
    layer = layer_with_weights(w_q, w_k, w_v, biases, use_scale=use_scale)
    valid_lengths = np.array([5, 2, 0])
    output, weights = layer(inputs, valid_lengths=valid_lengths, use_causal_mask=causal,
                            return_attention_scores=True)
    b_q, b_k, b_v = biases if use_bias else (0.0, 0.0, 0.0)
    mask = lengths_to_mask(valid_lengths, 5)
    expected_output, expected_weights = reference_attention(
        inputs @ w_q + b_q, inputs @ w_k + b_k, inputs @ w_v + b_v,
        value_mask=mask, query_mask=mask, causal=causal,
        scale=1 / math.sqrt(4) if use_scale else None,
    )
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(numpy_of(output), expected_output, atol=1e-4)
    np.testing.assert_array_equal(numpy_of(output)[~mask], 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_one_head_keras_multi_head_attention_with_identity_output(causal):
    (w_q, w_k, w_v), biases, inputs = random_layer_and_inputs(True, value_dim=6)
    ours = layer_with_weights(w_q, w_k, w_v, biases)
    theirs = keras.layers.MultiHeadAttention(num_heads=1, key_dim=4, value_dim=6)
    theirs(inputs, inputs)
    # Keras keeps a heads axis: kernels (dim, 1, units), biases (1, units); its
    # output projection is made the identity so that only attention remains.
    theirs.set_weights([w_q[:, None], biases[0][None], w_k[:, None], biases[1][None],
                        w_v[:, None], biases[2][None], np.eye(6, dtype="float32")[None],
                        np.zeros(6, "float32")])
    mask = lengths_to_mask([5, 3, 1], 5)
    expected = numpy_of(theirs(inputs, inputs, query_mask=mask, value_mask=mask,
                               use_causal_mask=causal))
    got = numpy_of(ours(inputs, mask=mask, use_causal_mask=causal))
    np.testing.assert_allclose(got[mask], expected[mask], atol=1e-5)


def test_causal_output_at_each_step_equals_the_prefix_alone():
    (w_q, w_k, w_v), _, inputs = random_layer_and_inputs(True)
    layer = layer_with_weights(w_q, w_k, w_v)
    full = numpy_of(layer(inputs, use_causal_mask=True))
    for step in range(inputs.shape[1]):
        prefix = numpy_of(layer(inputs[:, : step + 1]))
        np.testing.assert_allclose(full[:, step], prefix[:, step], atol=1e-5)


def test_weight_shapes_and_value_dim_default():
    layer = ScaledDotSelfAttention(key_dim=4)
    layer.build((None, None, 6))
    assert [w.name for w in layer.weights] == ["W_q", "W_k", "W_v"]
    assert [tuple(w.shape) for w in layer.weights] == [(6, 4), (6, 4), (6, 4)]
    assert layer.compute_output_shape((2, 5, 6)) == (2, 5, 4)
    layer = ScaledDotSelfAttention(key_dim=4, value_dim=7, use_bias=True)
    output, weights = layer(keras.Input((5, 6)), return_attention_scores=True)
    assert output.shape == (None, 5, 7)
    assert weights.shape == (None, 5, 5)
    assert [w.name for w in layer.weights] == ["W_q", "W_k", "W_v", "b_q", "b_k", "b_v"]
    assert [tuple(w.shape) for w in layer.weights] == [
        (6, 4), (6, 4), (6, 7), (4,), (4,), (7,)]


@pytest.mark.parametrize("key_dim", [0, -3, 2.5, None, True])
def test_rejects_bad_key_dim(key_dim):
    with pytest.raises(ValueError, match=f"key_dim={key_dim}"):
        ScaledDotSelfAttention(key_dim=key_dim)


def test_rejects_bad_value_dim():
    with pytest.raises(ValueError, match="value_dim=0"):
        ScaledDotSelfAttention(key_dim=4, value_dim=0)


# The scaled score near each half type's largest finite number (float16 65,504,
# bfloat16 3.39e38): with identity projections and key_dim 4, <q, k> = 4 m^2
# overflows where <q, k>/2 = 2 m^2 does not.
@pytest.mark.parametrize("dtype, magnitude", [("float16", 150.0), ("bfloat16", 1.0e19)])
def test_scaled_scores_near_the_half_limit_do_not_overflow(dtype, magnitude):
    identity = np.eye(4, dtype="float32")
    layer = layer_with_weights(identity, identity, identity, dtype=dtype)
    inputs = magnitude * np.array([[[1.0] * 4, [1.0] * 4, [-1.0] * 4]])
    output, weights = layer(ops.cast(inputs, dtype), return_attention_scores=True)
    assert np.all(np.isfinite(numpy_of(weights))) and np.all(np.isfinite(numpy_of(output)))
    expected_output, expected_weights = reference_attention(inputs, inputs, inputs, scale=0.5)
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-2)
    np.testing.assert_allclose(numpy_of(output), expected_output, rtol=1e-2)
