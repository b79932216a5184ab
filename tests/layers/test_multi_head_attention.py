import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_roundtrip import outputs_in_fresh_process
from layers import MultiHeadAttention, PositionalEmbedding, ScaledDotSelfAttention
from numpy_attention import lengths_to_mask, reference_softmax

SCORES = ["scaled_dot", "dot", "general", "concat", "additive"]
KEY_DIM, VALUE_DIM = 4, 3


def numpy_of(tensor):
    return ops.convert_to_numpy(ops.cast(tensor, "float32"))


def make_layer(score, num_heads, query_dim, value_input_dim, key_input_dim=None,
               **kwargs):
    """A built layer whose every weight, biases included, is random and nonzero."""
    layer = MultiHeadAttention(num_heads, KEY_DIM, VALUE_DIM, score=score, **kwargs)
    shapes = [(None, None, query_dim), (None, None, value_input_dim)]
    if key_input_dim is not None:
        shapes.append((None, None, key_input_dim))
    layer.build(shapes)
    rng = np.random.default_rng(0)
    for weight in layer.weights:
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    return layer


def parameters_of(layer):
    """The layer's weights by name: `W_q`, ..., `score/W_a`, as float64 arrays."""
    prefix = layer.name + "/"
    return {weight.path.removeprefix(prefix): ops.convert_to_numpy(weight).astype("float64")
            for weight in layer.weights}


# The scores, from the papers' formulas, for one head: q (B, Tq, d), k (B, Tv, d).
# Weights are in Keras's (input, output) layout, so the papers' matrices are their
# transposes.
def reference_scores(score, q, k, p):
    if score == "dot":
        return np.einsum("bqd,bkd->bqk", q, k)
    if score == "scaled_dot":
        return np.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    if score == "general":  # h_tᵀ W h̄_s with W = W_aᵀ
        return np.einsum("bqd,de,bke->bqk", q, p["score/W_a"].T, k)
    pairs_q = np.broadcast_to(q[:, :, None], q.shape[:2] + (k.shape[1], q.shape[2]))
    pairs_k = np.broadcast_to(k[:, None], (k.shape[0], q.shape[1]) + k.shape[1:])
    if score == "concat":  # v_aᵀ tanh(W [h_t; h̄_s])
        stacked = np.concatenate([pairs_q, pairs_k], axis=-1)
        return np.tanh(stacked @ p["score/W_a"]) @ p["score/v_a"]
    # additive: vᵀ tanh(W_q q + W_k k)
    return np.tanh(pairs_q @ p["score/W_q"] + pairs_k @ p["score/W_k"]) @ p["score/v"]


def reference_multi_head(layer, query, value, key=None, query_mask=None, value_mask=None,
                         causal=False):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_o + b_o, head_i =
    Attention(Q W_q^i, K W_k^i, V W_v^i) (Vaswani et al. 2017, 3.2.2), a loop over
    heads. Returns `(output, weights)`, weights `(B, h, Tq, Tv)`."""
    p = parameters_of(layer)
    key = value if key is None else key
    query, value, key = (np.asarray(a, "float64") for a in (query, value, key))
    batch, num_queries, num_keys = query.shape[0], query.shape[1], key.shape[1]
    allowed = np.ones((batch, num_queries, num_keys), bool)
    if value_mask is not None:
        allowed &= np.asarray(value_mask, bool)[:, None, :]
    if causal:
        allowed &= np.tril(np.ones((num_queries, num_keys), bool))[None]
    def bias(name, columns):
        return p[name][columns] if name in p else 0.0

    key_dim = layer.key_dim
    value_dim = layer.value_dim or key_dim
    heads, all_weights = [], []
    for i in range(layer.num_heads):
        k_cols = slice(i * key_dim, (i + 1) * key_dim)
        v_cols = slice(i * value_dim, (i + 1) * value_dim)
        q_i = query @ p["W_q"][:, k_cols] + bias("b_q", k_cols)
        k_i = key @ p["W_k"][:, k_cols] + bias("b_k", k_cols)
        v_i = value @ p["W_v"][:, v_cols] + bias("b_v", v_cols)
        weights = reference_softmax(reference_scores(layer.score_name, q_i, k_i, p), allowed)
        heads.append(weights @ v_i)
        all_weights.append(weights)
    output = np.concatenate(heads, axis=-1)
    if "W_o" in p:
        output = output @ p["W_o"] + p.get("b_o", 0.0)
    if query_mask is not None:
        output = output * np.asarray(query_mask, bool)[:, :, None]
    return output, np.stack(all_weights, axis=1)


def random_array(rng, *shape):
    return rng.normal(size=shape).astype("float32")


@pytest.mark.parametrize("attention", ["self", "self-causal", "cross"])
@pytest.mark.parametrize("num_heads", [1, 3])
@pytest.mark.parametrize("score", SCORES)
def test_matches_numpy_reference(score, num_heads, attention):
    rng = np.random.default_rng(1)
    if attention == "cross":
        # Target queries of size 6 attend to a source of 7 positions whose keys
        # (size 3) and values (size 5) differ.
        query, value, key = (random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5),
                             random_array(rng, 3, 7, 3))
        query_mask = lengths_to_mask([4, 2, 3], 4)
        value_mask = lengths_to_mask([7, 4, 1], 7)
        layer = make_layer(score, num_heads, 6, 5, 3)
        inputs = [query, value, key]
    else:
        query = value = key = random_array(rng, 3, 5, 6)
        query_mask = value_mask = lengths_to_mask([5, 3, 1], 5)
        layer = make_layer(score, num_heads, 6, 6)
        inputs = [query, query]
    causal = attention == "self-causal"
    output, weights = layer(inputs, mask=[query_mask, value_mask], use_causal_mask=causal,
                            return_attention_scores=True)
    expected_output, expected_weights = reference_multi_head(
        layer, query, value, key, query_mask, value_mask, causal)
    assert weights.shape == (3, num_heads) + query_mask.shape[1:] + value_mask.shape[1:]
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(numpy_of(output), expected_output, atol=1e-4)
    np.testing.assert_array_equal(numpy_of(output)[~query_mask], 0.0)
    np.testing.assert_array_equal(
        numpy_of(weights)[np.broadcast_to(~value_mask[:, None, None], weights.shape)], 0.0)


@pytest.mark.parametrize("score", ["scaled_dot", "general"])
def test_without_output_projection_or_biases(score):
    rng = np.random.default_rng(2)
    query, value = random_array(rng, 2, 3, 6), random_array(rng, 2, 5, 4)
    layer = make_layer(score, 3, 6, 4, use_output_projection=False, use_bias=False)
    assert [w.name for w in layer.weights][:3] == ["W_q", "W_k", "W_v"]
    assert "W_o" not in [w.name for w in layer.weights]
    output = numpy_of(layer([query, value], valid_lengths=np.array([5, 2])))
    assert output.shape == (2, 3, 3 * VALUE_DIM)
    expected, _ = reference_multi_head(layer, query, value,
                                       value_mask=lengths_to_mask([5, 2], 5))
    np.testing.assert_allclose(output, expected, atol=1e-4)


def test_scaled_dot_matches_keras_multi_head_attention():
    rng = np.random.default_rng(3)
    query, value = random_array(rng, 2, 4, 6), random_array(rng, 2, 5, 8)
    ours = make_layer("scaled_dot", 3, 6, 8)
    theirs = keras.layers.MultiHeadAttention(num_heads=3, key_dim=KEY_DIM,
                                             value_dim=VALUE_DIM)
    theirs(query, value)
    p = parameters_of(ours)
    # Keras keeps a heads axis: kernels (dim, heads, units), biases (heads, units),
    # the output kernel (heads, value_dim, output_dim).
    theirs.set_weights([
        p["W_q"].reshape(6, 3, KEY_DIM), p["b_q"].reshape(3, KEY_DIM),
        p["W_k"].reshape(8, 3, KEY_DIM), p["b_k"].reshape(3, KEY_DIM),
        p["W_v"].reshape(8, 3, VALUE_DIM), p["b_v"].reshape(3, VALUE_DIM),
        p["W_o"].reshape(3, VALUE_DIM, 6), p["b_o"],
    ])
    value_mask = lengths_to_mask([5, 2], 5)
    expected, expected_weights = theirs(query, value, value_mask=value_mask,
                                        return_attention_scores=True)
    got, weights = ours([query, value], mask=[None, value_mask], return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(got), numpy_of(expected), atol=1e-5)
    np.testing.assert_allclose(numpy_of(weights), numpy_of(expected_weights), atol=1e-6)


# The "Illustrated Self-Attention" worked example of design note 002, as in
# tests/layers/test_scaled_dot_self_attention.py.
X = np.array([[[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]], "float32")
W_K = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], "float32")
W_Q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], "float32")
W_V = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], "float32")


def one_head_worked_example(score):
    layer = MultiHeadAttention(num_heads=1, key_dim=3, score=score,
                               use_output_projection=False, use_bias=False)
    layer.build([X.shape, X.shape])
    layer.W_q.assign(W_Q)
    layer.W_k.assign(W_K)
    layer.W_v.assign(W_V)
    return layer


def test_one_head_reproduces_the_worked_example():
    layer = one_head_worked_example("dot")
    keys, values = (numpy_of(t) for t in layer.project_key_value(X))
    np.testing.assert_array_equal(keys[0, 0], [[0, 1, 1], [4, 4, 0], [2, 3, 1]])
    np.testing.assert_array_equal(values[0, 0], [[1, 2, 3], [2, 8, 0], [2, 6, 3]])
    np.testing.assert_array_equal(numpy_of(layer.score(X, X))[0, 0, 0], [2, 4, 4])
    output, weights = layer([X, X], return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(weights)[0, 0, 0], [0.0634, 0.4683, 0.4683],
                               atol=1e-4)
    np.testing.assert_allclose(numpy_of(output)[0, 0], [1.9366, 6.6831, 1.5951], atol=1e-4)


@pytest.mark.parametrize("score, use_scale", [("scaled_dot", True), ("dot", False)])
def test_one_head_equals_scaled_dot_self_attention(score, use_scale):
    layer = one_head_worked_example(score)
    single = ScaledDotSelfAttention(key_dim=3, use_scale=use_scale)
    single.build(X.shape)
    single.W_q.assign(W_Q)
    single.W_k.assign(W_K)
    single.W_v.assign(W_V)
    output, weights = layer([X, X], return_attention_scores=True)
    expected_output, expected_weights = single(X, return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(weights)[:, 0], numpy_of(expected_weights),
                               rtol=1e-6)
    np.testing.assert_allclose(numpy_of(output), numpy_of(expected_output), rtol=1e-6)
    if use_scale:
        scores = np.array([2.0, 4.0, 4.0]) / math.sqrt(3)
        np.testing.assert_allclose(numpy_of(weights)[0, 0, 0],
                                   np.exp(scores) / np.exp(scores).sum(), atol=1e-6)


@pytest.mark.parametrize("score", SCORES)
def test_causal_output_ignores_later_inputs(score):
    rng = np.random.default_rng(4)
    layer = make_layer(score, 3, 6, 6)
    x = random_array(rng, 2, 6, 6)
    full = numpy_of(layer([x, x], use_causal_mask=True))
    for step in range(6):
        changed = x.copy()
        changed[:, step + 1:] = random_array(rng, 2, 5 - step, 6) * 10
        np.testing.assert_allclose(
            numpy_of(layer([changed, changed], use_causal_mask=True))[:, : step + 1],
            full[:, : step + 1], atol=1e-5)


def append(cache, new):
    return new if cache is None else ops.concatenate([cache, new], axis=2)


@pytest.mark.parametrize("score", SCORES)
def test_cached_steps_equal_the_full_causal_call(score):
    """A decoder's self-attention one step at a time, keys and values cached."""
    rng = np.random.default_rng(5)
    layer = make_layer(score, 3, 6, 6)
    x = random_array(rng, 2, 5, 6)
    full = numpy_of(layer([x, x], use_causal_mask=True))
    cached_keys = cached_values = None
    for step in range(5):
        step_input = x[:, step : step + 1]
        keys, values = layer.project_key_value(step_input)
        cached_keys, cached_values = append(cached_keys, keys), append(cached_values, values)
        assert tuple(cached_keys.shape)[:3] == (2, 3, step + 1)
        output = layer.attend_projected(step_input, cached_keys, cached_values,
                                        use_causal_mask=True)
        np.testing.assert_allclose(numpy_of(output)[:, 0], full[:, step], atol=1e-5)
    # Three new steps at once against a cache that holds their two-step prefix.
    chunk = layer.attend_projected(x[:, 2:], cached_keys, cached_values,
                                   use_causal_mask=True)
    np.testing.assert_allclose(numpy_of(chunk), full[:, 2:], atol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_cross_attention_steps_against_keys_projected_once(score):
    rng = np.random.default_rng(6)
    layer = make_layer(score, 3, 6, 5)
    target, source = random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5)
    valid_lengths = np.array([7, 4, 1])
    full, full_weights = layer([target, source], valid_lengths=valid_lengths,
                               return_attention_scores=True)
    keys, values = layer.project_key_value(source)
    source_mask = lengths_to_mask(valid_lengths, 7)
    for step in range(4):
        output, weights = layer.attend_projected(
            target[:, step : step + 1], keys, values, value_mask=source_mask,
            return_attention_scores=True)
        np.testing.assert_allclose(numpy_of(output)[:, 0], numpy_of(full)[:, step], atol=1e-5)
        np.testing.assert_allclose(numpy_of(weights)[:, :, 0],
                                   numpy_of(full_weights)[:, :, step], atol=1e-6)


@pytest.mark.parametrize("attention", ["self-causal", "cross"])
@pytest.mark.parametrize("score", SCORES)
def test_a_sentence_alone_equals_it_inside_a_padded_batch(score, attention):
    rng = np.random.default_rng(7)
    query_lengths, value_lengths = [4, 2, 3], [7, 4, 1]
    if attention == "cross":
        layer = make_layer(score, 3, 6, 5)
        query, value = random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5)
    else:
        layer = make_layer(score, 3, 6, 6)
        query = value = random_array(rng, 3, 4, 6)
        value_lengths = query_lengths
    causal = attention == "self-causal"
    query_mask = lengths_to_mask(query_lengths, query.shape[1])
    value_mask = lengths_to_mask(value_lengths, value.shape[1])
    batch = numpy_of(layer([query, value], mask=[query_mask, value_mask],
                           use_causal_mask=causal))
    for b, (num_queries, num_keys) in enumerate(zip(query_lengths, value_lengths)):
        alone = numpy_of(layer([query[b : b + 1, :num_queries], value[b : b + 1, :num_keys]],
                               use_causal_mask=causal))
        np.testing.assert_allclose(batch[b, :num_queries], alone[0], atol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_gradients_reach_every_weight(score):
    rng = np.random.default_rng(8)
    layer = make_layer(score, 3, 6, 5)
    query, value = random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5)
    with tf.GradientTape() as tape:
        output = layer([query, value], valid_lengths=np.array([7, 4, 1]))
        loss = ops.sum(ops.square(output))
    gradients = tape.gradient(loss, layer.trainable_weights)
    names = [weight.path.removeprefix(layer.name + "/") for weight in layer.trainable_weights]
    assert names[:8] == ["W_q", "W_k", "W_v", "b_q", "b_k", "b_v", "W_o", "b_o"]
    assert len(names) > 8 or score in ("scaled_dot", "dot")
    for name, gradient in zip(names, gradients):
        assert gradient is not None, name
        assert np.all(np.isfinite(numpy_of(gradient))), name
        assert np.any(numpy_of(gradient) != 0.0), name


@pytest.mark.parametrize("policy", ["float16", "bfloat16", "mixed_float16"])
def test_large_scaled_dot_scores_stay_finite_in_half_precision(policy):
    """Queries are scaled before the product: `<q, k>` here is 102,400, beyond
    float16's 65,504, while `<q, k> / 8` is 12,800."""
    depth = 64
    layer = MultiHeadAttention(num_heads=1, key_dim=depth, use_bias=False,
                               use_output_projection=False, dtype=policy)
    layer.build([(None, None, depth), (None, None, depth)])
    for kernel in (layer.W_q, layer.W_k, layer.W_v):
        kernel.assign(np.eye(depth, dtype="float32"))
    rng = np.random.default_rng(9)
    x = 40.0 * np.sign(random_array(rng, 3, 4, depth))
    x[:, 0] = 40.0
    assert 40.0 * 40.0 * depth > float(np.finfo("float16").max)
    valid_lengths = np.array([4, 1, 0])
    output, weights = layer([ops.cast(x, layer.compute_dtype)] * 2,
                            valid_lengths=valid_lengths, return_attention_scores=True)
    assert keras.backend.standardize_dtype(output.dtype) == layer.compute_dtype
    assert np.all(np.isfinite(numpy_of(output))) and np.all(np.isfinite(numpy_of(weights)))
    mask = lengths_to_mask(valid_lengths, 4)
    expected, expected_weights = reference_multi_head(layer, x, x, value_mask=mask)
    np.testing.assert_allclose(numpy_of(weights), expected_weights, atol=1e-2)
    np.testing.assert_allclose(numpy_of(output), expected, rtol=1e-2, atol=0.5)
    np.testing.assert_array_equal(numpy_of(weights)[2], 0.0)


@pytest.mark.parametrize("score", SCORES)
def test_every_score_in_float16_with_a_fully_masked_row(score):
    rng = np.random.default_rng(10)
    layer = make_layer(score, 3, 6, 5, dtype="mixed_float16")
    query, value = random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5)
    valid_lengths = np.array([7, 2, 0])
    output, weights = layer([query, value], valid_lengths=valid_lengths,
                            use_causal_mask=False, return_attention_scores=True)
    expected, _ = reference_multi_head(layer, query, value,
                                       value_mask=lengths_to_mask(valid_lengths, 7))
    assert np.all(np.isfinite(numpy_of(output)))
    np.testing.assert_array_equal(numpy_of(weights)[2], 0.0)
    np.testing.assert_allclose(numpy_of(output), expected, atol=0.05)


def test_keras_masks_flow_in_and_out():
    ids = np.array([[5, 6, 7, 0], [8, 0, 0, 0]])
    embedded = keras.layers.Embedding(10, 6, mask_zero=True)(ids)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    output = layer([embedded, embedded], use_causal_mask=True)
    np.testing.assert_array_equal(ops.convert_to_numpy(output._keras_mask), ids != 0)
    explicit = layer([embedded, embedded], mask=[ids != 0, ids != 0], use_causal_mask=True)
    np.testing.assert_array_equal(numpy_of(output), numpy_of(explicit))
    np.testing.assert_array_equal(numpy_of(output)[ids == 0], 0.0)


def test_valid_lengths_equal_value_mask():
    rng = np.random.default_rng(11)
    layer = make_layer("additive", 2, 6, 5)
    query, value = random_array(rng, 3, 4, 6), random_array(rng, 3, 7, 5)
    by_lengths = numpy_of(layer([query, value], valid_lengths=np.array([7, 4, 1])))
    by_mask = numpy_of(layer([query, value], mask=[None, lengths_to_mask([7, 4, 1], 7)]))
    np.testing.assert_array_equal(by_lengths, by_mask)


def test_output_shapes_symbolic_and_computed():
    layer = MultiHeadAttention(num_heads=4, key_dim=8, value_dim=5, score="concat", units=6)
    query, value = keras.Input((3, 16)), keras.Input((None, 12))
    output, weights = layer([query, value], return_attention_scores=True)
    assert output.shape == (None, 3, 16)
    assert weights.shape == (None, 4, 3, None)
    assert layer.compute_output_shape([(2, 3, 16), (2, 9, 12)]) == (2, 3, 16)
    assert MultiHeadAttention(2, 8, output_dim=7).compute_output_shape(
        [(2, 3, 16), (2, 9, 12)]) == (2, 3, 7)
    assert MultiHeadAttention(2, 8, value_dim=5, use_output_projection=False
                              ).compute_output_shape([(2, 3, 16), (2, 9, 12)]) == (2, 3, 10)
    keys, values = layer.project_key_value(np.zeros((2, 9, 12), "float32"))
    assert tuple(keys.shape) == (2, 4, 9, 6) and tuple(values.shape) == (2, 4, 9, 5)


def test_dropout_only_while_training_and_seeded():
    rng = np.random.default_rng(12)
    query, value = random_array(rng, 2, 4, 6), random_array(rng, 2, 7, 5)
    clean = make_layer("scaled_dot", 2, 6, 5)
    dropped = [make_layer("scaled_dot", 2, 6, 5, dropout=0.5, seed=3) for _ in range(2)]
    np.testing.assert_array_equal(numpy_of(dropped[0]([query, value])),
                                  numpy_of(clean([query, value])))
    first, second = (numpy_of(layer([query, value], training=True)) for layer in dropped)
    assert not np.allclose(first, numpy_of(clean([query, value])))
    np.testing.assert_array_equal(first, second)


def test_get_config_round_trip():
    layer = MultiHeadAttention(num_heads=3, key_dim=4, value_dim=2, score="additive", units=5,
                               use_output_projection=True, output_dim=7, use_bias=False,
                               dropout=0.1, seed=4, name="cross_attention")
    config = layer.get_config()
    assert {"num_heads": 3, "key_dim": 4, "value_dim": 2, "score": "additive", "units": 5,
            "use_output_projection": True, "output_dim": 7, "use_bias": False,
            "dropout": 0.1, "seed": 4}.items() <= config.items()
    assert MultiHeadAttention.from_config(config).get_config() == config


@pytest.mark.parametrize("kwargs, message", [
    ({"num_heads": 0, "key_dim": 4}, "num_heads=0"),
    ({"num_heads": 2, "key_dim": 2.5}, "key_dim=2.5"),
    ({"num_heads": 2, "key_dim": 4, "value_dim": True}, "value_dim=True"),
    ({"num_heads": 2, "key_dim": 4, "score": "cosine"}, "score=cosine"),
    ({"num_heads": 2, "key_dim": 4, "units": 8}, "units=8 with score=scaled_dot"),
    ({"num_heads": 2, "key_dim": 4, "output_dim": 8, "use_output_projection": False},
     "output_dim=8"),
    ({"num_heads": 2, "key_dim": 4, "dropout": 1.0}, "dropout=1.0"),
])
def test_invalid_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


@pytest.mark.slow
def test_keras_file_reloads_in_a_fresh_process(tmp_path):
    target_ids = keras.Input((None,), dtype="int32")
    source_ids = keras.Input((None,), dtype="int32")
    target = PositionalEmbedding(30, 8, mask_zero=True)(target_ids)
    source = PositionalEmbedding(30, 8, mask_zero=True)(source_ids)
    attended = MultiHeadAttention(2, 4, score="general", name="self_attention")(
        [target, target], use_causal_mask=True)
    crossed = MultiHeadAttention(2, 4, value_dim=3, score="additive", units=5, dropout=0.1,
                                 seed=2, name="cross_attention")([attended, source])
    model = keras.Model([target_ids, source_ids], crossed)
    inputs = [np.array([[4, 9, 12, 3], [7, 3, 0, 0]], "int32"),
              np.array([[5, 6, 7, 8, 2], [9, 0, 0, 0, 0]], "int32")]
    expected = numpy_of(model(inputs, training=False))
    ((reloaded,),) = outputs_in_fresh_process({"model": (model, inputs)}, tmp_path).values()
    np.testing.assert_array_equal(reloaded, expected)
    np.testing.assert_array_equal(reloaded[inputs[0] == 0], 0.0)
