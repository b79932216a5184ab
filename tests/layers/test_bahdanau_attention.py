import keras
import numpy as np
import pytest
from keras import ops

from numpy_attention import layer_outputs as run
from layers import BahdanauAttention

BATCH, TQ, TV = 3, 4, 7
QUERY_DIM, KEY_DIM, VALUE_DIM, UNITS = 5, 6, 3, 8


def make_inputs(seed=0, lengths=(7, 4, 1), query_lengths=(4, 2, 3)):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, TQ, QUERY_DIM)).astype("float32")
    values = rng.normal(size=(BATCH, TV, VALUE_DIM)).astype("float32")
    keys = rng.normal(size=(BATCH, TV, KEY_DIM)).astype("float32")
    value_mask = np.arange(TV)[None, :] < np.array(lengths)[:, None]
    query_mask = np.arange(TQ)[None, :] < np.array(query_lengths)[:, None]
    return query, values, keys, query_mask, value_mask


def make_layer(normalize, **kwargs):
    """A built layer; g and b get random values so the test sees where they act."""
    layer = BahdanauAttention(UNITS, normalize=normalize, **kwargs)
    layer.build([(None, None, QUERY_DIM), (None, None, VALUE_DIM), (None, None, KEY_DIM)])
    if normalize:
        rng = np.random.default_rng(100)
        layer.g.assign(1.7)
        layer.b.assign(rng.normal(size=(UNITS,)).astype("float32"))
    return layer


def reference_bahdanau(layer, query, values, keys, query_mask, value_mask):
    """Bahdanau et al. 2015 (A.1.2) and its weight-normalised form, one query
    and one key at a time, in column-vector notation (the layer stores the
    transposed matrices)."""
    w = {v.name: ops.convert_to_numpy(v).astype("float64") for v in layer.weights}
    v = w["v"]
    bias = np.zeros(layer.units)
    if layer.normalize:
        v = w["g"] * v / np.sqrt(np.sum(v**2))
        bias = w["b"]
    batch, num_queries, _ = query.shape
    num_keys = keys.shape[1]
    weights = np.zeros((batch, num_queries, num_keys))
    for b in range(batch):
        valid = [s for s in range(num_keys) if value_mask is None or value_mask[b, s]]
        if not valid:
            continue
        for t in range(num_queries):
            scores = np.array(
                [
                    v @ np.tanh(w["W_q"].T @ query[b, t] + w["W_k"].T @ keys[b, s] + bias)
                    for s in valid
                ]
            )
            e = np.exp(scores - scores.max())
            weights[b, t, valid] = e / e.sum()
    context = weights @ values.astype("float64")
    if query_mask is not None:
        context = context * query_mask[..., None]
    return context, weights


@pytest.mark.parametrize("normalize", [False, True])
def test_matches_numpy_reference(normalize):
    query, values, keys, query_mask, value_mask = make_inputs()
    layer = make_layer(normalize)
    context, weights = run(layer, query, values, keys, query_mask, value_mask)
    ref_context, ref_weights = reference_bahdanau(
        layer, query, values, keys, query_mask, value_mask
    )
    np.testing.assert_allclose(weights, ref_weights, atol=1e-5)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)
    mask = np.broadcast_to(value_mask[:, None, :], weights.shape)
    assert np.all(weights[~mask] == 0.0)


@pytest.mark.parametrize("normalize", [False, True])
def test_weight_names_and_shapes(normalize):
    layer = BahdanauAttention(UNITS, normalize=normalize)
    query, values, keys, _, _ = make_inputs()
    layer([query, values, keys])
    shapes = {v.name: tuple(v.shape) for v in layer.weights}
    expected = {"W_q": (QUERY_DIM, UNITS), "W_k": (KEY_DIM, UNITS), "v": (UNITS,)}
    if normalize:
        expected.update({"g": (), "b": (UNITS,)})
        np.testing.assert_allclose(ops.convert_to_numpy(layer.g), np.sqrt(1.0 / UNITS))
        assert np.all(ops.convert_to_numpy(layer.b) == 0.0)
    assert shapes == expected


def test_normalized_score_ignores_the_scale_of_v():
    query, values, keys, _, value_mask = make_inputs()
    layer = make_layer(normalize=True)
    _, before = run(layer, query, values, keys, value_mask=value_mask)
    layer.v.assign(40.0 * ops.convert_to_numpy(layer.v))
    _, after = run(layer, query, values, keys, value_mask=value_mask)
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_normalized_with_g_equal_to_norm_of_v_and_zero_b_is_plain():
    query, values, keys, _, value_mask = make_inputs()
    plain = make_layer(normalize=False)
    normed = make_layer(normalize=True)
    plain_weights = plain.get_weights()
    normed.set_weights(
        plain_weights + [np.linalg.norm(plain_weights[2]), np.zeros(UNITS, "float32")]
    )
    np.testing.assert_allclose(
        run(normed, query, values, keys, value_mask=value_mask)[1],
        run(plain, query, values, keys, value_mask=value_mask)[1],
        atol=1e-6,
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16", "bfloat16"])
@pytest.mark.parametrize("normalize", [False, True])
def test_finite_for_large_scores_in_every_precision(normalize, policy):
    # W_q = 0 and W_k e0 = 50 e0, so tanh(.) is ±1 in unit 0 and 0 elsewhere; v
    # (or g v / ‖v‖) is 1e4 in unit 0: key 1 scores +1e4, the others -1e4.
    query = np.ones((2, 2, QUERY_DIM), "float32")
    keys = np.zeros((2, TV, KEY_DIM), "float32")
    keys[..., 0] = np.array([-1, 1, -1, -1, -1, -1, -1], "float32")
    values = np.arange(2 * TV * VALUE_DIM, dtype="float32").reshape(2, TV, VALUE_DIM)
    layer = BahdanauAttention(UNITS, normalize=normalize, dtype=policy)
    layer.build([query.shape, values.shape, keys.shape])
    layer.W_q.assign(np.zeros((QUERY_DIM, UNITS), "float32"))
    layer.W_k.assign(50.0 * np.eye(KEY_DIM, UNITS, dtype="float32"))
    layer.v.assign(np.full((UNITS,), 1e4, "float32"))
    if normalize:
        layer.g.assign(1e4 * np.sqrt(UNITS))
    context, weights = layer(
        [query, values, keys], valid_lengths=np.array([5, 0]), return_attention_scores=True
    )
    assert keras.backend.standardize_dtype(weights.dtype) == layer.compute_dtype
    context = ops.convert_to_numpy(ops.cast(context, "float32"))
    weights = ops.convert_to_numpy(ops.cast(weights, "float32"))
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[0, :, 1], 1.0, atol=1e-3)
    assert np.all(weights[:, :, 5:] == 0.0) and np.all(weights[1] == 0.0)


# The one-word source alone has a softmax over one key, which Keras warns about.
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")
@pytest.mark.parametrize("normalize", [False, True])
def test_a_sentence_alone_equals_it_inside_a_padded_batch(normalize):
    query, values, keys, _, value_mask = make_inputs(seed=8)
    layer = make_layer(normalize)
    context, weights = run(layer, query, values, keys, value_mask=value_mask)
    for b, length in enumerate(value_mask.sum(-1)):
        alone = run(layer, query[b : b + 1], values[b : b + 1, :length], keys[b : b + 1, :length])
        np.testing.assert_allclose(alone[1][0], weights[b, :, :length], atol=1e-6)
        np.testing.assert_allclose(alone[0][0], context[b], atol=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_step_by_step_equals_full_sequence(normalize):
    query, values, keys, _, value_mask = make_inputs()
    layer = make_layer(normalize)
    context, weights = run(layer, query, values, keys, value_mask=value_mask)
    projected_keys = layer.project_keys(keys)
    np.testing.assert_allclose(
        ops.convert_to_numpy(projected_keys),
        keys @ ops.convert_to_numpy(layer.W_k),
        atol=1e-6,
    )
    for t in range(TQ):
        step_context, step_weights = layer.attend(
            query[:, t : t + 1],
            values,
            keys,
            value_mask=value_mask,
            return_attention_scores=True,
            projected_keys=projected_keys,
        )
        np.testing.assert_allclose(step_weights[:, 0], weights[:, t], atol=1e-6)
        np.testing.assert_allclose(step_context[:, 0], context[:, t], atol=1e-6)


def test_matches_keras_additive_attention_with_identity_projections():
    # Keras's AdditiveAttention scores sum(scale * tanh(q + k)): ours with
    # units = dim, W_q = W_k = I and v = scale. (Keras has no projections, so
    # the parity needs query and key of one dimension.)
    rng = np.random.default_rng(6)
    dim = 4
    query = rng.normal(size=(BATCH, TQ, dim)).astype("float32")
    keys = rng.normal(size=(BATCH, TV, dim)).astype("float32")
    values = rng.normal(size=(BATCH, TV, VALUE_DIM)).astype("float32")
    _, _, _, query_mask, value_mask = make_inputs()
    keras_layer = keras.layers.AdditiveAttention()
    theirs = keras_layer(
        [query, values, keys], mask=[query_mask, value_mask], return_attention_scores=True
    )
    ours = BahdanauAttention(dim)
    ours.build([query.shape, values.shape, keys.shape])
    ours.set_weights([np.eye(dim), np.eye(dim), ops.convert_to_numpy(keras_layer.scale)])
    context, weights = run(ours, query, values, keys, query_mask, value_mask)
    np.testing.assert_allclose(weights, ops.convert_to_numpy(theirs[1]), atol=1e-6)
    np.testing.assert_allclose(context, ops.convert_to_numpy(theirs[0]), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0}, "Received: units=0"),
        ({"units": None}, "Received: units=None"),
        ({"units": 4.0}, "Received: units=4.0"),
        ({"units": 4, "normalize": "yes"}, "Received: normalize=yes"),
        ({"units": 4, "dropout": -0.1}, "Received: dropout=-0.1"),
    ],
)
def test_invalid_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BahdanauAttention(**kwargs)
