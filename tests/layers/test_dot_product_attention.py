import math

import keras
import numpy as np
import pytest
from keras import ops

from layers import DotProductAttention
from numpy_attention import lengths_to_mask, reference_attention


def random_inputs(batch=3, num_queries=4, num_keys=6, dim=8, value_dim=5, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, num_queries, dim)).astype("float32")
    keys = rng.normal(size=(batch, num_keys, dim)).astype("float32")
    values = rng.normal(size=(batch, num_keys, value_dim)).astype("float32")
    return query, keys, values


def numpy_of(tensor):
    return ops.convert_to_numpy(ops.cast(tensor, "float32"))


# The worked example of design note 002: one decoder state, four encoder states.
EXAMPLE_QUERY = np.array([[[10.0, 5.0, 10.0]]], "float32")
EXAMPLE_KEYS = np.array([[[0, 1, 1], [5, 0, 1], [1, 1, 0], [0, 5, 1]]], "float32")


def test_worked_example_scores_weights_context():
    layer = DotProductAttention(use_scale=False)
    scores = numpy_of(layer.score(EXAMPLE_QUERY, EXAMPLE_KEYS))
    np.testing.assert_array_equal(scores, [[[15.0, 60.0, 15.0, 35.0]]])
    context, weights = layer([EXAMPLE_QUERY, EXAMPLE_KEYS], return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(weights), [[[0.0, 1.0, 0.0, 0.0]]], atol=1e-7)
    np.testing.assert_allclose(numpy_of(context), [[[5.0, 0.0, 1.0]]], atol=1e-6)


@pytest.mark.parametrize("use_scale", [True, False])
def test_matches_numpy_with_ragged_valid_lengths(use_scale):
    query, keys, values = random_inputs()
    valid_lengths = np.array([6, 1, 4])
    layer = DotProductAttention(use_scale=use_scale)
    context, weights = layer(
        [query, values, keys], valid_lengths=valid_lengths, return_attention_scores=True
    )
    expected_context, expected_weights = reference_attention(
        query, keys, values, value_mask=lengths_to_mask(valid_lengths, 6),
        scale=1 / math.sqrt(8) if use_scale else None,
    )
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-6)
    np.testing.assert_allclose(numpy_of(context), expected_context, atol=1e-5)


def test_padded_queries_output_zero():
    query, keys, values = random_inputs()
    query_mask = lengths_to_mask([4, 2, 1], 4)
    context = numpy_of(DotProductAttention()([query, values, keys], mask=[query_mask, None]))
    np.testing.assert_array_equal(context[~query_mask], 0.0)
    expected, _ = reference_attention(
        query, keys, values, query_mask=query_mask, scale=1 / math.sqrt(8)
    )
    np.testing.assert_allclose(context, expected, atol=1e-5)


def test_causal_mask_matches_numpy():
    query, keys, values = random_inputs(num_queries=6, num_keys=6)
    value_mask = lengths_to_mask([6, 4, 5], 6)
    context, weights = DotProductAttention()(
        [query, values, keys], mask=[None, value_mask], use_causal_mask=True,
        return_attention_scores=True,
    )
    expected_context, expected_weights = reference_attention(
        query, keys, values, value_mask=value_mask, causal=True, scale=1 / math.sqrt(8)
    )
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-6)
    np.testing.assert_allclose(numpy_of(context), expected_context, atol=1e-5)
    assert np.all(np.triu(numpy_of(weights)[0], k=1) == 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_scores_of_plus_minus_1e4_stay_finite(dtype):
    # One-dimensional queries and keys so that the scores are exactly +-1e4.
    query = np.array([[[100.0], [-100.0]]], "float32")
    keys = np.array([[[100.0], [-100.0], [99.0], [100.0]]], "float32")
    values = np.eye(4, dtype="float32")[None]
    layer = DotProductAttention(use_scale=False, dtype=dtype)
    context, weights = layer(
        [ops.cast(query, dtype), ops.cast(values, dtype), ops.cast(keys, dtype)],
        valid_lengths=np.array([3]),
        return_attention_scores=True,
    )
    expected_context, expected_weights = reference_attention(
        query, keys, values, value_mask=lengths_to_mask([3], 4)
    )
    assert np.all(np.isfinite(numpy_of(weights)))
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-3)
    np.testing.assert_allclose(numpy_of(context), expected_context, atol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_unscaled_matches_keras_attention(causal):
    query, keys, values = random_inputs(num_queries=6, num_keys=6)
    masks = [lengths_to_mask([6, 3, 2], 6), lengths_to_mask([6, 4, 1], 6)]
    ours, our_weights = DotProductAttention(use_scale=False)(
        [query, values, keys], mask=masks, use_causal_mask=causal,
        return_attention_scores=True,
    )
    theirs, their_weights = keras.layers.Attention()(
        [query, values, keys], mask=masks, use_causal_mask=causal,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(numpy_of(ours), numpy_of(theirs), atol=1e-5)
    np.testing.assert_allclose(numpy_of(our_weights), numpy_of(their_weights), atol=1e-6)


def test_scaled_matches_keras_attention_with_scale_one_over_sqrt_d():
    query, keys, values = random_inputs()
    value_mask = lengths_to_mask([6, 4, 1], 6)
    keras_attention = keras.layers.Attention(use_scale=True)
    keras_attention.build([query.shape, values.shape, keys.shape])
    keras_attention.scale.assign(1 / math.sqrt(8))
    theirs = keras_attention([query, values, keys], mask=[None, value_mask])
    ours = DotProductAttention()([query, values, keys], mask=[None, value_mask])
    np.testing.assert_allclose(numpy_of(ours), numpy_of(theirs), atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_matches_keras_ops_dot_product_attention(causal):
    query, keys, values = random_inputs(num_queries=6, num_keys=6, value_dim=8)
    value_mask = lengths_to_mask([6, 4, 1], 6)
    ours = DotProductAttention()(
        [query, values, keys], mask=[None, value_mask], use_causal_mask=causal
    )
    # keras.ops wants (batch, T, heads, dim) and a (batch, heads, Tq, Tv) mask.
    theirs = ops.dot_product_attention(
        query[:, :, None], keys[:, :, None], values[:, :, None],
        mask=value_mask[:, None, None, :], is_causal=causal,
    )
    np.testing.assert_allclose(numpy_of(ours), numpy_of(theirs)[:, :, 0], atol=1e-5)


def test_rejects_dropout_out_of_range():
    with pytest.raises(ValueError, match="dropout=1.5"):
        DotProductAttention(dropout=1.5)


def test_output_shapes():
    layer = DotProductAttention()
    assert layer.compute_output_shape([(2, 3, 8), (2, 5, 4), (2, 5, 8)]) == (2, 3, 4)
    query = keras.Input((3, 8))
    values = keras.Input((5, 4))
    keys = keras.Input((5, 8))
    context, weights = layer([query, values, keys], return_attention_scores=True)
    assert context.shape == (None, 3, 4)
    assert weights.shape == (None, 3, 5)


# Near each half type's largest finite number (float16 65,504, bfloat16 3.39e38) with
# d = 4: the raw product <q, k> = 4 m^2 overflows, the scaled score <q, k>/2 = 2 m^2
# does not. The scaled score must be computed without passing through the raw one.
HALF_LIMITS = [("float16", 150.0), ("bfloat16", 1.0e19)]


@pytest.mark.parametrize("dtype, magnitude", HALF_LIMITS)
def test_scaled_scores_near_the_half_limit_do_not_overflow(dtype, magnitude):
    signs = np.array([1.0, 1.0, -1.0, 0.5])
    keys = np.repeat(magnitude * signs[None, :, None], 4, axis=-1)  # (1, 4, 4)
    query = np.stack([np.full(4, magnitude), np.full(4, -magnitude)])[None]  # (1, 2, 4)
    values = np.eye(4)[None]
    layer = DotProductAttention(dtype=dtype)
    context, weights = layer(
        [ops.cast(query, dtype), ops.cast(values, dtype), ops.cast(keys, dtype)],
        return_attention_scores=True,
    )
    assert np.all(np.isfinite(numpy_of(weights))) and np.all(np.isfinite(numpy_of(context)))
    expected_context, expected_weights = reference_attention(query, keys, values, scale=0.5)
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-2)
    np.testing.assert_allclose(numpy_of(context), expected_context, atol=1e-2)


def test_key_mask_is_honoured_and_combined_with_the_value_mask():
    query, keys, values = random_inputs()
    value_mask = lengths_to_mask([6, 4, 5], 6)
    key_mask = np.ones((3, 6), bool)
    key_mask[:, 1] = False
    layer = DotProductAttention()
    for masks, allowed in [
        ([None, None, key_mask], key_mask),
        ([None, value_mask, key_mask], value_mask & key_mask),
    ]:
        context, weights = layer(
            [query, values, keys], mask=masks, return_attention_scores=True
        )
        expected_context, expected_weights = reference_attention(
            query, keys, values, value_mask=allowed, scale=1 / math.sqrt(8)
        )
        np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-6)
        np.testing.assert_allclose(numpy_of(context), expected_context, atol=1e-5)
