"""Seq2Seq: shapes, padding invariance, step-by-step = teacher forcing, every style x score."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.model.encoder_decoder import Seq2Seq
from attncli.config.model import ModelConfig
from attncli.model.cells import GRUCell, LSTMCell
from small_models import (
    REAL, SOURCE, TARGET_IN, as_numpy, small_model, step_by_step, teacher_forced,
)

# decoder style x score x alignment: every combination the config allows.
VARIANTS = [
    dict(decoder=decoder, input_feeding=feeding, score=score, alignment=alignment)
    for decoder, feeding in (("bahdanau", False), ("luong", False), ("luong", True))
    for score in ("dot", "scaled_dot", "general", "concat", "additive")
    for alignment in ("global", "local-m", "local-p")
    if alignment == "global" or score in ("dot", "general", "concat")
]


def variant_id(options):
    feeding = "+feeding" if options["input_feeding"] else ""
    return f"{options['decoder']}{feeding}-{options['score']}-{options['alignment']}"


@functools.lru_cache(maxsize=None)
def _cached_model(items):
    return small_model(**dict(items))


def variant_model(options):
    return _cached_model(tuple(sorted(options.items())))


def test_config_defaults_are_the_tutorial_size():
    config = ModelConfig(source_vocab_size=5000, target_vocab_size=5000)
    assert (config.embedding_dim, config.units, config.bidirectional) == (256, 256, True)
    assert config.memory_dim == 256


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(score="cosine"), "score must be one of"),
        (dict(alignment="local-m", score="additive"), "needs one of Luong's scores"),
        (dict(decoder="bahdanau", input_feeding=True), "luong decoder only"),
        (dict(merge_mode="concat", score="dot"), "same size"),
        (dict(merge_mode="concat", bridge="copy"), "bridge='copy'"),
        (dict(dropout=1.0), "dropout must be in"),
        (dict(units=0), "units must be a positive integer"),
    ],
)
def test_config_rejects_bad_values_with_the_value(options, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(source_vocab_size=20, target_vocab_size=20, **options)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_split_cells_equal_keras_cells_with_the_same_weights(kind):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(3, 4, 5)).astype("float32")
    if kind == "gru":
        reference = keras.layers.GRU(6, return_sequences=True, reset_after=True)
        cell = GRUCell(6)
    else:
        reference = keras.layers.LSTM(6, return_sequences=True)
        cell = LSTMCell(6)
    reference.build(inputs.shape)
    cell.build(inputs.shape)
    weights = [rng.normal(size=w.shape).astype("float32") * 0.3 for w in reference.weights]
    reference.set_weights(weights)
    if kind == "gru":
        kernel, recurrent_kernel, bias = weights
        cell.set_weights([kernel, recurrent_kernel, bias[0], bias[1]])
    else:
        cell.set_weights(weights)
    expected = as_numpy(reference(inputs))
    state = cell.initial_state(3)
    outputs = []
    for t in range(4):
        output, state = cell.step(cell.project_inputs(inputs[:, t]), state)
        outputs.append(as_numpy(output))
    np.testing.assert_allclose(np.stack(outputs, axis=1), expected, atol=1e-5)


def test_bidirectional_encoder_equals_keras_bidirectional_on_padded_input():
    model = small_model(score="general")
    encoder = model.encoder
    reference = keras.layers.Bidirectional(
        keras.layers.GRU(8, return_sequences=True, return_state=True), merge_mode="sum"
    )
    embedded = as_numpy(encoder.embedding(SOURCE))
    mask = SOURCE != 0
    reference.build(embedded.shape)
    forward, backward = encoder.forward_cells[0], encoder.backward_cells[0]
    reference.set_weights([
        as_numpy(w) for cell in (forward, backward)
        for w in (cell.kernel, cell.recurrent_kernel,
                  np.stack([as_numpy(cell.bias), as_numpy(cell.recurrent_bias)]))
    ])
    expected, forward_final, backward_final = reference(embedded, mask=mask)
    outputs, (final,), source_mask = encoder(SOURCE)
    np.testing.assert_array_equal(as_numpy(source_mask), mask)
    np.testing.assert_allclose(
        as_numpy(outputs)[mask], as_numpy(expected)[mask], atol=1e-5
    )
    np.testing.assert_array_equal(as_numpy(outputs)[~mask], 0.0)
    np.testing.assert_allclose(
        as_numpy(final), as_numpy(forward_final) + as_numpy(backward_final), atol=1e-5
    )


@pytest.mark.parametrize("options", VARIANTS, ids=variant_id)
def test_shapes_and_batch_first_memory(options):
    model = variant_model(options)
    logits, weights = teacher_forced(model)
    assert logits.shape == (3, 4, 15)
    assert weights.shape == (3, 4, 5)
    memory, state = model.encode(SOURCE)
    for tensor in list(memory.values()) + list(state):
        assert tensor.shape[0] == 3
    step_logits, new_state, step_weights = model.decode_step(TARGET_IN[:, 0], state, memory)
    assert step_logits.shape == (3, 15)
    assert step_weights.shape == (3, 5)
    assert [s.shape for s in new_state] == [s.shape for s in state]


@pytest.mark.parametrize("options", VARIANTS, ids=variant_id)
def test_source_padding_changes_nothing(options):
    model = variant_model(options)
    logits, weights = teacher_forced(model)
    padded = np.pad(SOURCE, ((0, 0), (0, 4)))
    padded_logits, padded_weights = teacher_forced(model, source=padded)
    np.testing.assert_allclose(padded_logits, logits, atol=1e-5)
    np.testing.assert_allclose(padded_weights[:, :, :5], weights, atol=1e-6)
    np.testing.assert_array_equal(padded_weights[:, :, 5:], 0.0)
    valid = (SOURCE != 0)[:, None, :]
    assert np.all(weights[np.broadcast_to(~valid, weights.shape)] == 0.0)


@pytest.mark.parametrize("options", VARIANTS, ids=variant_id)
def test_a_sentence_alone_equals_it_inside_a_batch(options):
    model = variant_model(options)
    logits, _ = teacher_forced(model)
    alone, _ = teacher_forced(model, source=SOURCE[1:2, :3], target_in=TARGET_IN[1:2, :3])
    np.testing.assert_allclose(alone[0], logits[1, :3], atol=1e-5)


@pytest.mark.parametrize("options", VARIANTS, ids=variant_id)
def test_decode_step_equals_teacher_forcing(options):
    # Both sides run the decoder's `step` (except Luong's without input feeding), so
    # this checks the loops around it, the local alignments' step numbers among them;
    # what `step` computes is checked in test_decoder_equations.py.
    model = variant_model(options)
    logits, weights = teacher_forced(model)
    step_logits, step_weights = step_by_step(model)
    np.testing.assert_allclose(step_logits[REAL], logits[REAL], atol=1e-5)
    np.testing.assert_allclose(step_weights[REAL], weights[REAL], atol=1e-6)


@pytest.mark.parametrize("options", VARIANTS, ids=variant_id)
def test_gradients_reach_every_weight(options):
    model = variant_model(options)
    with tf.GradientTape() as tape:
        logits = model((SOURCE, TARGET_IN), training=True)
        loss = tf.reduce_sum(tf.square(logits))
    gradients = tape.gradient(loss, model.trainable_variables)
    for variable, gradient in zip(model.trainable_variables, gradients):
        assert gradient is not None, variable.path
        assert np.any(as_numpy(tf.convert_to_tensor(gradient)) != 0.0), variable.path


@pytest.mark.parametrize(
    "options",
    [
        dict(cell="lstm", encoder_layers=2, score="general", bridge="dense"),
        dict(cell="lstm", bidirectional=False, score="dot", bridge="copy"),
        dict(merge_mode="concat", score="additive", bridge="zeros", decoder="bahdanau"),
        dict(encoder_layers=3, merge_mode="concat", score="concat", input_feeding=True),
    ],
    ids=["lstm-2-layers", "lstm-unidirectional-copy", "concat-zeros", "3-layers-concat"],
)
def test_encoder_and_bridge_variants(options):
    model = small_model(**options)
    logits, weights = teacher_forced(model)
    padded_logits, _ = teacher_forced(model, source=np.pad(SOURCE, ((0, 0), (0, 3))))
    np.testing.assert_allclose(padded_logits, logits, atol=1e-5)
    np.testing.assert_allclose(step_by_step(model)[0][REAL], logits[REAL], atol=1e-5)
    memory, state = model.encode(SOURCE)
    if options.get("bridge") == "zeros":
        assert all(np.all(as_numpy(s) == 0.0) for s in state)


def test_luong_fast_path_equals_its_step_by_step_path(monkeypatch):
    # Only Luong's decoder without input feeding has two paths; with input feeding (and
    # in Bahdanau's decoder) `call` is the step-by-step path itself. Every path is
    # checked against the papers' equations in test_decoder_equations.py.
    model = small_model(score="general")
    slow, slow_weights = model.features((SOURCE, TARGET_IN), stepwise=True)

    def no_step(*args, **kwargs):
        raise AssertionError("the fast path ran the step-by-step one")

    monkeypatch.setattr(model.decoder, "step", no_step)
    fast, fast_weights = model.features((SOURCE, TARGET_IN))
    np.testing.assert_allclose(as_numpy(fast)[REAL], as_numpy(slow)[REAL], atol=1e-6)
    np.testing.assert_allclose(
        as_numpy(fast_weights)[REAL], as_numpy(slow_weights)[REAL], atol=1e-6
    )


def test_keras_file_round_trip(tmp_path):
    model = small_model(score="concat", decoder="luong", input_feeding=True, cell="lstm")
    logits, _ = teacher_forced(model)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.config == model.config
    np.testing.assert_allclose(teacher_forced(loaded)[0], logits, atol=1e-6)
    np.testing.assert_allclose(step_by_step(loaded)[0][REAL], logits[REAL], atol=1e-5)


def test_dropout_acts_only_while_training():
    model = small_model(score="general", dropout=0.5)
    first = as_numpy(model((SOURCE, TARGET_IN), training=True))
    second = as_numpy(model((SOURCE, TARGET_IN), training=True))
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(teacher_forced(model)[0], teacher_forced(model)[0])


@pytest.mark.parametrize("decoder", ["luong", "bahdanau"])
def test_output_layer_reads_unit_scale_features_at_initialisation(decoder):
    # With Keras's default initialisers the decoder's features started at about 0.01 RMS,
    # so Adam's steps on the output layer barely moved the logits and the model learned
    # about 2x slower per step than the TF tutorial's (which layer-normalises them).
    keras.utils.set_random_seed(0)
    model = Seq2Seq(ModelConfig(
        source_vocab_size=50, target_vocab_size=50, embedding_dim=32, units=32,
        decoder=decoder, score="dot",
    ))
    rng = np.random.default_rng(0)
    source = rng.integers(4, 50, size=(8, 7)).astype("int32")
    target_in = rng.integers(4, 50, size=(8, 6)).astype("int32")
    features, _ = model.features((source, target_in))
    rms = np.sqrt(np.mean(np.square(as_numpy(features))))
    assert 0.5 < rms < 2.0, rms
