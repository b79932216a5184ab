import keras
import numpy as np
import pytest
from keras import ops

from numpy_attention import layer_outputs as run
from numpy_luong import luong_attention
from layers import LuongAttention

SCORES = ["dot", "general", "concat"]
ALIGNMENTS = ["global", "local-m", "local-p"]
BATCH, TQ, TV = 3, 4, 7
QUERY_DIM, KEY_DIM, VALUE_DIM = 5, 6, 3


def make_inputs(score, seed=0, lengths=(7, 4, 1), query_lengths=(4, 2, 3)):
    rng = np.random.default_rng(seed)
    key_dim = QUERY_DIM if score == "dot" else KEY_DIM
    query = rng.normal(size=(BATCH, TQ, QUERY_DIM)).astype("float32")
    values = rng.normal(size=(BATCH, TV, VALUE_DIM)).astype("float32")
    keys = rng.normal(size=(BATCH, TV, key_dim)).astype("float32")
    value_mask = np.arange(TV)[None, :] < np.array(lengths)[:, None]
    query_mask = np.arange(TQ)[None, :] < np.array(query_lengths)[:, None]
    return query, values, keys, query_mask, value_mask


def reference_luong(layer, query, values, keys, query_mask, value_mask, query_positions=None):
    """`(context, weights, centres)` of `tests/numpy_luong.py` with this layer's
    settings and weights, turned into the paper's orientation (Keras stores the
    transposes)."""
    matrices = {v.name: ops.convert_to_numpy(v).astype("float64") for v in layer.weights}
    for name in ("W_a", "W_p"):
        if name in matrices:
            matrices[name] = matrices[name].T
    return luong_attention(
        query, keys, values, score=layer.score_name, alignment=layer.alignment,
        window=layer.window, matrices=matrices, value_mask=value_mask,
        query_mask=query_mask, query_positions=query_positions,
    )


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("alignment", ALIGNMENTS)
@pytest.mark.parametrize("score", SCORES)
def test_matches_numpy_reference(score, alignment, window):
    query, values, keys, query_mask, value_mask = make_inputs(score)
    layer = LuongAttention(score=score, alignment=alignment, window=window)
    context, weights = run(layer, query, values, keys, query_mask, value_mask)
    ref_context, ref_weights, _ = reference_luong(
        layer, query, values, keys, query_mask, value_mask
    )
    np.testing.assert_allclose(weights, ref_weights, atol=1e-5)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)
    mask = np.broadcast_to(value_mask[:, None, :], weights.shape)
    assert np.all(weights[~mask] == 0.0)


def test_units_sets_the_hidden_size():
    layer = LuongAttention(score="concat", units=9, alignment="local-p", window=2)
    query, values, keys, query_mask, value_mask = make_inputs("concat")
    context, weights = run(layer, query, values, keys, query_mask, value_mask)
    shapes = {v.name: tuple(v.shape) for v in layer.weights}
    assert shapes == {
        "W_a": (QUERY_DIM + KEY_DIM, 9),
        "v_a": (9,),
        "W_p": (QUERY_DIM, 9),
        "v_p": (9,),
    }
    ref_context, ref_weights, _ = reference_luong(
        layer, query, values, keys, query_mask, value_mask
    )
    np.testing.assert_allclose(weights, ref_weights, atol=1e-5)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)


def test_weight_names_and_shapes():
    query, values, keys, _, _ = make_inputs("general")
    shapes = {}
    for score in ("general", "concat"):
        layer = LuongAttention(score=score)
        layer([query, values, keys])
        shapes[score] = {v.name: tuple(v.shape) for v in layer.weights}
    assert shapes["general"] == {"W_a": (KEY_DIM, QUERY_DIM)}
    assert shapes["concat"] == {"W_a": (QUERY_DIM + KEY_DIM, QUERY_DIM), "v_a": (QUERY_DIM,)}
    layer = LuongAttention(score="dot")
    layer([query, query])
    assert layer.weights == []


def large_score_weights(layer, score, magnitude):
    """Weights under which every score is about ±magnitude (keys ±1-hot)."""
    if score == "general":
        layer.W_a.assign(np.eye(KEY_DIM, QUERY_DIM, dtype="float32"))
    if score == "concat":
        kernel = np.zeros((QUERY_DIM + KEY_DIM, QUERY_DIM), "float32")
        kernel[QUERY_DIM:, :] = 50.0 * np.eye(KEY_DIM, QUERY_DIM)
        layer.W_a.assign(kernel)
        layer.v_a.assign(np.full((QUERY_DIM,), magnitude, "float32"))


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16", "bfloat16"])
@pytest.mark.parametrize("alignment", ["global", "local-p"])
@pytest.mark.parametrize("score", SCORES)
def test_finite_for_large_scores_in_every_precision(score, alignment, policy):
    magnitude = 1e4
    key_dim = QUERY_DIM if score == "dot" else KEY_DIM
    # query 100·e0, keys ±e0 scaled so the winning key scores +1e4, the others -1e4.
    query = np.zeros((2, 2, QUERY_DIM), "float32")
    query[..., 0] = 100.0
    signs = np.array([-1, 1, -1, -1, -1, -1, -1], "float32")
    keys = np.zeros((2, TV, key_dim), "float32")
    keys[..., 0] = (signs * (100.0 if score != "concat" else 1.0))[None, :]
    values = np.arange(2 * TV * VALUE_DIM, dtype="float32").reshape(2, TV, VALUE_DIM)
    layer = LuongAttention(score=score, alignment=alignment, window=10, dtype=policy)
    layer.build([query.shape, values.shape, keys.shape])
    large_score_weights(layer, score, magnitude)
    lengths = np.array([5, 0])
    context, weights = layer(
        [query, values, keys], valid_lengths=lengths, return_attention_scores=True
    )
    assert keras.backend.standardize_dtype(weights.dtype) == layer.compute_dtype
    context = ops.convert_to_numpy(ops.cast(context, "float32"))
    weights = ops.convert_to_numpy(ops.cast(weights, "float32"))
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    assert np.all(weights[:, :, 5:] == 0.0) and np.all(weights[1] == 0.0)
    # Key 1 wins outright; local-p's Gaussian scales it by at most 1.
    assert np.all(np.argmax(weights[0], axis=-1) == 1)
    assert np.all(weights[0, :, 1] > 0.0) and np.all(weights[0, :, 1] <= 1.0 + 1e-3)


@pytest.mark.parametrize("alignment", ["local-m", "local-p"])
@pytest.mark.parametrize("score", SCORES)
def test_zero_weight_outside_the_window(score, alignment):
    query, values, keys, _, value_mask = make_inputs(score, seed=3, lengths=(7, 6, 5))
    layer = LuongAttention(score=score, alignment=alignment, window=1)
    _, weights = run(layer, query, values, keys, value_mask=value_mask)
    _, _, centres = reference_luong(layer, query, values, keys, None, value_mask)
    outside = np.abs(np.arange(TV)[None, None, :] - centres[..., None]) > 1
    assert outside.any()
    assert np.all(weights[outside] == 0.0)
    inside_valid = ~outside & value_mask[:, None, :]
    assert np.all(weights[inside_valid] > 0.0)


def local_p_weights_by_hand(v_p, length, window=2, padded_length=8):
    """Weights of one query on `padded_length` equal keys (`length` of them valid)
    with W_p = 50 I, so that tanh(W_p h_t) = 1 and eq. 9 gives
    p_t = S · sigmoid(sum(v_p))."""
    layer = LuongAttention(score="dot", alignment="local-p", window=window)
    query = np.ones((1, 1, 2), "float32")
    keys = np.ones((1, padded_length, 2), "float32")
    layer.build([query.shape, keys.shape])
    layer.W_p.assign(50.0 * np.eye(2, dtype="float32"))
    layer.v_p.assign(np.asarray(v_p, "float32"))
    _, weights = layer(
        [query, keys], valid_lengths=np.array([length]), return_attention_scores=True
    )
    return ops.convert_to_numpy(weights)[0, 0]


def test_local_p_gaussian_factor_by_hand():
    # v_p = 0: sigmoid(0) = 1/2, so p_t = S / 2 = 2.5 for S = 5. Equal keys make the
    # softmax uniform over the window |s - 2.5| <= D = 2, s in {1, 2, 3, 4}, and
    # eq. 10 multiplies by exp(-(s - 2.5)² / 2) (σ = D / 2 = 1).
    weights = local_p_weights_by_hand([0.0, 0.0], length=5)
    offsets = np.arange(1, 5) - 2.5
    np.testing.assert_allclose(weights[1:5], np.exp(-(offsets**2) / 2.0) / 4.0, atol=1e-7)
    assert weights[0] == 0.0 and np.all(weights[5:] == 0.0)


def test_local_p_centre_spans_zero_to_the_source_length():
    # sigmoid(±100) saturates: p_t = S = 5 past the last word (s = 4), whose window
    # keeps s in {3, 4}; p_t = 0 on the first word, whose window keeps s in {0, 1, 2}.
    at_end = local_p_weights_by_hand([50.0, 50.0], length=5)
    np.testing.assert_allclose(at_end[3:5], np.exp(-np.array([4.0, 1.0]) / 2.0) / 2.0,
                               atol=1e-7)
    assert np.all(at_end[:3] == 0.0) and np.all(at_end[5:] == 0.0)
    at_start = local_p_weights_by_hand([-50.0, -50.0], length=5)
    np.testing.assert_allclose(at_start[:3], np.exp(-np.array([0.0, 1.0, 4.0]) / 2.0) / 3.0,
                               atol=1e-7)
    assert np.all(at_start[3:] == 0.0)


@pytest.mark.parametrize("where", ["append", "prepend"])
@pytest.mark.parametrize("alignment", ["local-m", "local-p"])
@pytest.mark.parametrize("score", SCORES)
def test_local_padding_invariance(score, alignment, where):
    query, values, keys, _, value_mask = make_inputs(score, seed=7, lengths=(7, 7, 7))
    layer = LuongAttention(score=score, alignment=alignment, window=2)
    context, weights = run(layer, query, values, keys)
    rng = np.random.default_rng(1)
    pad = 4
    padded_values = rng.normal(size=(BATCH, TV + pad, VALUE_DIM)).astype("float32")
    padded_keys = rng.normal(size=(BATCH, TV + pad, keys.shape[-1])).astype("float32")
    real = slice(0, TV) if where == "append" else slice(pad, TV + pad)
    padded_values[:, real], padded_keys[:, real] = values, keys
    padded_mask = np.zeros((BATCH, TV + pad), bool)
    padded_mask[:, real] = True
    padded_context, padded_weights = run(
        layer, query, padded_values, padded_keys, value_mask=padded_mask
    )
    np.testing.assert_allclose(padded_weights[:, :, real], weights, atol=1e-6)
    assert np.all(padded_weights[:, :, ~padded_mask[0]] == 0.0)
    np.testing.assert_allclose(padded_context, context, atol=1e-5)


# The one-word source alone has a softmax over one key, which Keras warns about.
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")
@pytest.mark.parametrize("alignment", ALIGNMENTS)
@pytest.mark.parametrize("score", SCORES)
def test_a_sentence_alone_equals_it_inside_a_padded_batch(score, alignment):
    query, values, keys, _, value_mask = make_inputs(score, seed=8)
    layer = LuongAttention(score=score, alignment=alignment, window=2)
    context, weights = run(layer, query, values, keys, value_mask=value_mask)
    for b, length in enumerate(value_mask.sum(-1)):
        alone = run(layer, query[b : b + 1], values[b : b + 1, :length], keys[b : b + 1, :length])
        np.testing.assert_allclose(alone[1][0], weights[b, :, :length], atol=1e-6)
        np.testing.assert_allclose(alone[0][0], context[b], atol=1e-6)


@pytest.mark.parametrize("alignment", ALIGNMENTS)
@pytest.mark.parametrize("score", SCORES)
def test_step_by_step_equals_full_sequence(score, alignment):
    query, values, keys, _, value_mask = make_inputs(score)
    layer = LuongAttention(score=score, alignment=alignment, window=2)
    context, weights = run(layer, query, values, keys, value_mask=value_mask)
    projected_keys = layer.project_keys(keys)
    for t in range(TQ):
        step_context, step_weights = layer.attend(
            query[:, t : t + 1],
            values,
            keys,
            value_mask=value_mask,
            return_attention_scores=True,
            query_positions=np.full((BATCH, 1), t),
            projected_keys=projected_keys,
        )
        np.testing.assert_allclose(step_weights[:, 0], weights[:, t], atol=1e-6)
        np.testing.assert_allclose(step_context[:, 0], context[:, t], atol=1e-6)


def test_local_m_query_positions_shift_the_window():
    query, values, keys, _, _ = make_inputs("dot")
    layer = LuongAttention(score="dot", alignment="local-m", window=1)
    positions = np.array([[6, 0, 3, 3]] * BATCH)
    _, weights = layer.attend(
        query, values, keys, return_attention_scores=True, query_positions=positions
    )
    weights = ops.convert_to_numpy(weights)
    for t, p in enumerate(positions[0]):
        outside = np.abs(np.arange(TV) - p) > 1
        assert np.all(weights[:, t, outside] == 0.0)
        np.testing.assert_allclose(weights[:, t].sum(-1), 1.0, atol=1e-6)


def test_dot_matches_keras_attention():
    query, values, _, query_mask, value_mask = make_inputs("dot")
    keys = np.random.default_rng(4).normal(size=(BATCH, TV, QUERY_DIM)).astype("float32")
    ours = run(LuongAttention(score="dot"), query, values, keys, query_mask, value_mask)
    theirs = keras.layers.Attention()(
        [query, values, keys], mask=[query_mask, value_mask], return_attention_scores=True
    )
    np.testing.assert_allclose(ours[1], ops.convert_to_numpy(theirs[1]), atol=1e-6)
    np.testing.assert_allclose(ours[0], ops.convert_to_numpy(theirs[0]), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"score": "bilinear"}, "Received: score=bilinear"),
        ({"alignment": "local"}, "Received: alignment=local"),
        ({"window": 0, "alignment": "local-m"}, "Received: window=0"),
        ({"window": 2.5}, "Received: window=2.5"),
        ({"units": 0, "score": "concat"}, "Received: units=0"),
        ({"units": 8, "score": "general"}, "Received: units=8 with score=general"),
        ({"dropout": 1.0}, "Received: dropout=1.0"),
    ],
)
def test_invalid_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LuongAttention(**kwargs)


def test_dot_needs_equal_query_and_key_dimensions():
    query, values, keys, _, _ = make_inputs("general")
    with pytest.raises(ValueError, match="query_dim=5, key_dim=6"):
        LuongAttention(score="dot")([query, values, keys])


def test_global_attention_has_no_window_centres():
    query, _, keys, _, _ = make_inputs("dot")
    with pytest.raises(ValueError, match="Received: alignment=global"):
        LuongAttention().aligned_positions(query, keys)
