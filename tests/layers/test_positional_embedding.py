import math

import keras
import numpy as np
import pytest
from keras import ops

from layers import PositionalEmbedding, ScaledDotSelfAttention
from layers.positional_embedding import sinusoidal_encoding


def numpy_of(tensor):
    return ops.convert_to_numpy(ops.cast(tensor, "float32"))


def reference_encoding(length, depth):
    encoding = np.zeros((length, depth))
    for pos in range(length):
        for column in range(depth):
            i = column // 2
            angle = pos / 10000 ** (2 * i / depth)
            encoding[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return encoding


@pytest.mark.parametrize("depth", [8, 7, 64])
def test_sinusoidal_encoding_matches_the_formula(depth):
    got = numpy_of(sinusoidal_encoding(np.arange(50), depth))
    np.testing.assert_allclose(got, reference_encoding(50, depth), atol=1e-5)


def test_first_position_is_sin_zero_cos_zero():
    np.testing.assert_array_equal(numpy_of(sinusoidal_encoding(np.arange(1), 6)),
                                  [[0, 1, 0, 1, 0, 1]])


def test_output_is_scaled_embedding_plus_encoding():
    layer = PositionalEmbedding(vocab_size=20, output_dim=6)
    ids = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    output = numpy_of(layer(ids))
    table = numpy_of(layer.token_embedding.embeddings)
    expected = table[ids] * math.sqrt(6) + reference_encoding(5, 6)[None]
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_positions_argument_gives_each_step_its_own_encoding():
    layer = PositionalEmbedding(vocab_size=20, output_dim=6)
    ids = np.array([[3, 1, 4, 1, 5]])
    full = numpy_of(layer(ids))
    for step in range(5):
        one = numpy_of(layer(ids[:, step:step + 1], positions=np.array([[step]])))
        np.testing.assert_allclose(one[:, 0], full[:, step], atol=1e-6)


def test_a_mask_only_with_mask_zero():
    # That the mask reaches the next layer is part of tests/layers/test_layer_contract.py.
    ids = np.array([[3, 4, 0], [5, 0, 0]])
    masked = PositionalEmbedding(vocab_size=10, output_dim=4, mask_zero=True)
    np.testing.assert_array_equal(ops.convert_to_numpy(masked.compute_mask(ids)), ids != 0)
    assert PositionalEmbedding(vocab_size=10, output_dim=4).compute_mask(ids) is None


def self_attention_outputs(embed, ids, permutation):
    attention = ScaledDotSelfAttention(key_dim=8)
    return numpy_of(attention(embed(ids))), numpy_of(attention(embed(ids[:, permutation])))


def test_self_attention_alone_is_blind_to_order():
    ids = np.array([[3, 7, 1, 9, 4]])
    permutation = np.array([2, 0, 4, 1, 3])
    embedding = keras.layers.Embedding(12, 8)
    output, permuted = self_attention_outputs(embedding, ids, permutation)
    # Permuting the tokens only permutes the outputs.
    np.testing.assert_allclose(permuted, output[:, permutation], atol=1e-5)


def test_self_attention_with_positions_sees_order():
    ids = np.array([[3, 7, 1, 9, 4]])
    permutation = np.array([2, 0, 4, 1, 3])
    embedding = PositionalEmbedding(12, 8)
    output, permuted = self_attention_outputs(embedding, ids, permutation)
    assert not np.allclose(permuted, output[:, permutation], atol=1e-3)


def test_mixed_precision_output_is_float16_and_finite():
    layer = PositionalEmbedding(vocab_size=10, output_dim=8, dtype="mixed_float16")
    output = layer(np.array([[1, 2, 3] * 100]))
    assert keras.backend.standardize_dtype(output.dtype) == "float16"
    assert np.all(np.isfinite(numpy_of(output)))


def test_output_shape():
    layer = PositionalEmbedding(vocab_size=15, output_dim=4)
    assert layer.compute_output_shape((2, 7)) == (2, 7, 4)
    assert layer(keras.Input((7,), dtype="int32")).shape == (None, 7, 4)


def test_learned_encoding_adds_its_table_row_and_reuses_the_last_row_past_the_end():
    layer = PositionalEmbedding(vocab_size=20, output_dim=6, encoding="learned", max_length=4)
    ids = np.array([[3, 1, 4, 1, 5, 9]])
    output = numpy_of(layer(ids))
    table = numpy_of(layer.token_embedding.embeddings)
    positions = numpy_of(layer.position_table)
    rows = [0, 1, 2, 3, 3, 3]
    np.testing.assert_allclose(output, table[ids] * math.sqrt(6) + positions[rows][None],
                               atol=1e-6)
    one = numpy_of(layer(ids[:, 2:3], positions=np.array([[2]])))
    np.testing.assert_allclose(one[:, 0], output[:, 2], atol=1e-6)


@pytest.mark.parametrize("arguments", [dict(encoding="learned"),
                                       dict(encoding="learned", max_length=0),
                                       dict(encoding="rotary")])
def test_bad_encoding_arguments_are_rejected(arguments):
    with pytest.raises(ValueError, match="Received"):
        PositionalEmbedding(vocab_size=10, output_dim=4, **arguments)


def test_learned_encoding_round_trips_through_a_keras_file(tmp_path):
    layer = PositionalEmbedding(vocab_size=15, output_dim=4, encoding="learned", max_length=5)
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, layer(ids))
    model.save(tmp_path / "learned.keras")
    reloaded = keras.saving.load_model(tmp_path / "learned.keras")
    token_ids = np.array([[1, 2, 3, 4, 5, 6, 0]])
    np.testing.assert_array_equal(numpy_of(reloaded(token_ids)), numpy_of(model(token_ids)))
