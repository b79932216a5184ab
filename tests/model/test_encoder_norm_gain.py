"""`model.encoder_norm_gain`: the starting gain of a self-attention or cascade encoder's
final LayerNorm, which sets the size of the annotations a recurrent decoder first reads.

LayerNorm(x) = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta, with beta = 0 at the
start, so every real annotation starts with norm gamma * sqrt(d) (up to eps): that is
checked from the formula, not from our code, along with the schema's checks and the gain
surviving a `.keras` round trip and `get_config`.
"""

import keras
import numpy as np
import pytest
from attncli_runs import TINY
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.model import ModelConfig
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.transformer_encoder import TransformerEncoder

SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 3, 0, 0, 0, 0]], dtype="int32")
TARGET = np.array([[1, 4, 5, 0], [1, 6, 0, 0]], dtype="int32")
D = 32


def model(encoder, gain, **fields):
    keras.utils.set_random_seed(3)
    return Seq2Seq(ModelConfig(
        source_vocab_size=12, target_vocab_size=10, embedding_dim=D, units=D, heads=4,
        encoder=encoder, merge_mode="concat", encoder_norm_gain=gain, **fields,
    ))


@pytest.mark.parametrize("encoder", ["self-attention", "cascade"])
@pytest.mark.parametrize("gain", [1.0, 1 / 64])
def test_every_real_annotation_starts_with_norm_gain_times_root_d(encoder, gain):
    built = model(encoder, gain)
    outputs, _, mask = built.encoder(SOURCE)
    norms = np.linalg.norm(np.asarray(outputs), axis=-1)
    real = np.asarray(mask)
    np.testing.assert_allclose(norms[real], gain * np.sqrt(D), rtol=1e-3)
    assert np.all(norms[~real] == 0)
    np.testing.assert_array_equal(np.asarray(built.encoder.final_norm.gamma), gain)


def test_the_gain_is_learned_from_its_starting_value():
    built = model("self-attention", 1 / 64)
    built.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                  ignore_class=0))
    built.fit((SOURCE, TARGET[:, :-1]), TARGET[:, 1:], epochs=1, verbose=0)
    gamma = np.asarray(built.encoder.final_norm.gamma)
    assert not np.allclose(gamma, 1 / 64)


def test_the_decoder_s_final_norm_keeps_gain_one():
    built = model("self-attention", 1 / 64, decoder="self-attention")
    built((SOURCE, TARGET))
    np.testing.assert_array_equal(np.asarray(built.decoder.final_norm.gamma), 1.0)
    np.testing.assert_array_equal(np.asarray(built.encoder.final_norm.gamma), 1 / 64)


@pytest.mark.parametrize("encoder", ["self-attention", "cascade"])
def test_a_keras_file_keeps_the_gain_and_the_outputs(encoder, tmp_path):
    built = model(encoder, 0.05)
    expected = built((SOURCE, TARGET))
    built.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert reloaded.config.encoder_norm_gain == 0.05
    assert reloaded.encoder.get_config()["final_gain"] == 0.05
    np.testing.assert_array_equal(reloaded((SOURCE, TARGET)), expected)


def test_the_encoder_s_config_rebuilds_its_gain():
    encoder = TransformerEncoder(12, D, 1, 4, 64, final_gain=0.125)
    rebuilt = TransformerEncoder.from_config(encoder.get_config())
    rebuilt.build()
    np.testing.assert_array_equal(np.asarray(rebuilt.final_norm.gamma), 0.125)


@pytest.mark.parametrize("fields, message", [
    (dict(encoder_norm_gain=0.5), "this encoder has none"),
    (dict(encoder="self-attention", norm="post", encoder_norm_gain=0.5),
     "norm: pre"),
    (dict(encoder="cascade", encoder_norm_gain=0.0), "must be a positive number"),
    (dict(encoder="cascade", encoder_norm_gain=-1.0), "must be a positive number"),
])
def test_a_gain_without_a_final_norm_or_not_positive_is_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(source_vocab_size=10, target_vocab_size=10, **fields)


@pytest.mark.parametrize("value, message", [
    ("0.5", "model: encoder_norm_gain sets the gain of the final LayerNorm"),
    ("-1", "model: encoder_norm_gain must be a positive number"),
])
def test_the_command_reports_a_wrong_gain_in_one_line(value, message, tmp_path):
    # The tiny config's encoder is recurrent: it has no final LayerNorm.
    result = CliRunner().invoke(app, ["train", str(TINY), "--run-dir", str(tmp_path / "run"),
                                      "--set", f"model.encoder_norm_gain={value}"])
    assert one_line_error(result).startswith(f"Error: {message}")
    assert not (tmp_path / "run").exists()
