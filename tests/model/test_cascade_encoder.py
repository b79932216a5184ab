"""The cascaded encoder (`model.encoder: cascade`, Chen et al. 2018): recurrent layers,
then self-attention blocks on their outputs.

Its annotations, final state and the decoder above it against a NumPy reference composed
from the papers' (tests/numpy_cascade.py); padding; the schema's checks; the `.keras` round
trip; search and ensembles; and one tiny run trained as a user trains it, then translated,
inspected and exported.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from attncli_runs import TINY, attncli, succeeds
from cli_errors import one_line_error
from numpy_cascade import cascade_encoder
from numpy_decoders import reference_decode
from small_models import padded, searching
from small_models import REAL, SOURCE, TARGET_IN, as_numpy, step_by_step, teacher_forced
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.model import ModelConfig
from attncli.config.run import run_config_from_mapping
from attncli.config.schema import ConfigError
from attncli.data.vocabulary import START
from attncli.model.cascade_encoder import CascadeEncoder
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.footprint import minimum_parameter_count
from attncli.search import decoding
from attncli.search.ensemble import Ensemble

# Small cascades: the first projects its 16 concatenated recurrent features to the
# blocks' 12; the second's 12 summed features need no projection.
CASCADES = {
    "gru-concat-projected-pre": dict(
        cell="gru", merge_mode="concat", units=8, encoder_blocks=2, heads=2,
        decoder="luong", score="general",
    ),
    "lstm-sum-two-layers-post-gelu": dict(
        cell="lstm", merge_mode="sum", units=12, encoder_layers=2, encoder_blocks=1,
        heads=3, norm="post", activation="gelu", decoder="bahdanau", score="additive",
    ),
    "one-direction-copied-state": dict(
        bidirectional=False, units=12, encoder_blocks=1, heads=2, bridge="copy",
        decoder="luong", score="dot", input_feeding=True,
    ),
}


def cascade(name, seed=7, randomise=True):
    """A small cascade model; every weight drawn from N(0, 0.5²) (LayerNorm gains,
    biases and all), so that no term of the formulas hides behind a zero or a one."""
    keras.utils.set_random_seed(seed)
    model = Seq2Seq(ModelConfig(
        source_vocab_size=20, target_vocab_size=15, embedding_dim=12, attention_units=5,
        encoder="cascade", feed_forward_dim=20, **CASCADES[name],
    ))
    if randomise:
        rng = np.random.default_rng(seed)
        model.set_weights([rng.normal(scale=0.5, size=weight.shape).astype("float32")
                           for weight in model.weights])
    return model


@pytest.fixture(scope="module", params=sorted(CASCADES))
def model(request):
    return cascade(request.param)


def test_annotations_and_final_state_follow_the_reference(model):
    annotations, final_state, source_mask = model.encoder(SOURCE)
    expected = cascade_encoder(model, SOURCE)
    real = SOURCE != 0
    np.testing.assert_array_equal(as_numpy(source_mask), real)
    assert annotations.shape == (3, 5, 12)
    np.testing.assert_allclose(as_numpy(annotations)[real], expected["annotations"][real],
                               rtol=1e-4, atol=1e-4)
    assert np.all(as_numpy(annotations)[~real] == 0)
    assert len(final_state) == len(expected["final_state"])
    for got, want in zip(final_state, expected["final_state"]):
        np.testing.assert_allclose(as_numpy(got), want, rtol=1e-4, atol=1e-5)


def test_the_decoder_attends_over_the_blocks_from_the_bridged_recurrent_state(model):
    """The whole model against the decoder's reference given the cascade's reference
    annotations and final state: `s_0 = bridge(h_final)` of the recurrent layers, the
    attention over the blocks' outputs."""
    expected_encoder = cascade_encoder(model, SOURCE)
    expected = reference_decode(model, SOURCE, TARGET_IN, expected_encoder["annotations"],
                                expected_encoder["final_state"])
    for path, (logits, weights) in {"call": teacher_forced(model),
                                    "decode_step": step_by_step(model)}.items():
        np.testing.assert_allclose(weights[REAL], expected["weights"][REAL], rtol=1e-4,
                                   atol=1e-5, err_msg=path)
        np.testing.assert_allclose(logits[REAL], expected["logits"][REAL], rtol=1e-4,
                                   atol=1e-4, err_msg=path)


def test_the_blocks_attention_maps_are_the_encoder_s_and_the_trace_rebuilds_them(model):
    maps = model.attention_maps(SOURCE, TARGET_IN)
    blocks, heads = model.config.encoder_blocks, model.config.heads
    assert [tuple(w.shape) for w in maps["encoder"]] == [(3, heads, 5, 5)] * blocks
    assert maps["decoder"] == [] and len(maps["cross"]) == 1
    real = SOURCE != 0
    first = as_numpy(maps["encoder"][0])
    expected = cascade_encoder(model, SOURCE)["first_weights"]
    for b in range(3):
        np.testing.assert_allclose(first[b][:, real[b]][:, :, real[b]],
                                   expected[b][:, real[b]][:, :, real[b]], rtol=1e-4, atol=1e-6)
        assert np.all(first[b][:, :, ~real[b]] == 0)  # no query sees a padded key
    # `inspect-weights --step` shows the record the block's own attention kept.
    traced = model.trace(SOURCE[1:2], TARGET_IN[1:2], attention="encoder", layer=blocks,
                         head=heads, step=2)
    np.testing.assert_allclose(traced.record.weights,
                               as_numpy(maps["encoder"][-1])[1, -1, 1], rtol=1e-5, atol=1e-6)


def test_source_padding_changes_nothing(model):
    wider = np.pad(SOURCE, [[0, 0], [0, 3]])
    logits, weights = teacher_forced(model)
    wide_logits, wide_weights = teacher_forced(model, source=wider)
    np.testing.assert_allclose(wide_logits[REAL], logits[REAL], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wide_weights[:, :, :5], weights, rtol=1e-5, atol=1e-6)
    assert np.all(wide_weights[:, :, 5:] == 0)


def test_an_empty_source_row_gives_no_nan_forward_or_backward():
    model = cascade("gru-concat-projected-pre", randomise=False)
    source = tf.constant([[5, 6, 7], [0, 0, 0]])
    target = tf.constant([[START, 5, 6], [START, 7, 0]])
    with tf.GradientTape() as tape:
        logits = model((source, target), training=True)
        loss = tf.reduce_sum(tf.where(target[:, :, None] != 0, logits, 0.0) ** 2)
    gradients = tape.gradient(loss, model.trainable_variables)
    assert np.all(np.isfinite(logits.numpy()))
    assert all(np.all(np.isfinite(tf.convert_to_tensor(g).numpy()))
               for g in gradients if g is not None)


def test_under_mixed_bfloat16_the_blocks_run_in_bfloat16_and_the_state_stays_float32():
    from attncli.training.builder import dtype_policy

    with dtype_policy("mixed_bfloat16"):
        model = cascade("gru-concat-projected-pre", randomise=False)
    annotations, (final_state,), _ = model.encoder(SOURCE)
    logits = model((SOURCE, TARGET_IN))
    assert (annotations.dtype, final_state.dtype) == ("bfloat16", "float32")
    assert model.encoder.blocks[0].compute_dtype == "bfloat16"
    assert np.all(np.isfinite(np.asarray(logits, "float32")))
    assert np.all(as_numpy(annotations)[SOURCE == 0] == 0)


# Sentences of different lengths, each padded differently in the batch.
SOURCES = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17], [18]]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_search_scores_what_teacher_forcing_scores(model, beam_size):
    sources = padded(SOURCES)
    result = decoding.compile_search(model, searching(beam_size))(sources)
    for i in range(result.token_ids.shape[1]):
        tokens = result.token_ids[:, i, :]
        target_in = tf.concat([tf.fill([len(SOURCES), 1], START), tokens[:, :-1]], axis=1)
        logits, weights = model((sources, target_in), return_attention_scores=True)
        log_probs = decoding.next_token_log_probs(logits).numpy()
        for b in range(len(SOURCES)):
            length = int(result.lengths[b, i])
            emitted = tokens[b, :length].numpy()
            np.testing.assert_allclose(result.log_probs[b, i],
                                       log_probs[b, np.arange(length), emitted].sum(),
                                       rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(result.weights[b, i, :length], weights[b, :length],
                                       rtol=1e-4, atol=1e-5)
            if beam_size == 1:  # greedy: the step-by-step argmax
                np.testing.assert_array_equal(emitted,
                                              np.argmax(log_probs[b, :length], axis=-1))


def test_a_sentence_decodes_alike_alone_and_in_a_batch(model):
    search = decoding.compile_search(model, searching(3))
    batch = search(padded(SOURCES))
    for b, source in enumerate(SOURCES):
        alone = search(tf.constant([source]))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-5)


def test_an_ensemble_with_a_cascade_decodes():
    members = [cascade("gru-concat-projected-pre"), cascade("gru-concat-projected-pre", 8)]
    sources = padded(SOURCES)
    twice = decoding.greedy_search(Ensemble([members[0], members[0]]), sources, searching(1))
    alone = decoding.greedy_search(members[0], sources, searching(1))
    np.testing.assert_array_equal(twice.token_ids, alone.token_ids)
    both = decoding.greedy_search(Ensemble(members), sources, searching(1))
    assert not np.array_equal(both.token_ids, alone.token_ids)
    lengths = both.lengths.numpy()[:, 0]
    sums = both.weights.numpy()[:, 0].sum(axis=-1)
    for b, length in enumerate(lengths):
        np.testing.assert_allclose(sums[b, :length], 1.0, rtol=1e-5)


def test_a_keras_file_round_trip_gives_the_same_outputs(tmp_path):
    model = cascade("lstm-sum-two-layers-post-gelu")
    model.save(tmp_path / "cascade.keras")
    reloaded = keras.saving.load_model(tmp_path / "cascade.keras")
    assert isinstance(reloaded.encoder, CascadeEncoder)
    np.testing.assert_array_equal(reloaded((SOURCE, TARGET_IN)), model((SOURCE, TARGET_IN)))
    np.testing.assert_array_equal(reloaded.encoder(SOURCE)[1][1], model.encoder(SOURCE)[1][1])


def test_the_encoder_s_config_rebuilds_it():
    encoder = CascadeEncoder(20, 12, 8, "gru", merge_mode="concat", num_blocks=2,
                             num_heads=3, feed_forward_dim=24, norm="post",
                             activation="gelu", dropout=0.1, attention_dropout=0.2)
    config = encoder.get_config()
    assert {key: config[key] for key in ("num_blocks", "num_heads", "feed_forward_dim", "norm",
                                         "activation", "attention_dropout", "merge_mode")} == {
        "num_blocks": 2, "num_heads": 3, "feed_forward_dim": 24, "norm": "post",
        "activation": "gelu", "attention_dropout": 0.2, "merge_mode": "concat"}
    rebuilt = CascadeEncoder.from_config(config)
    encoder.build()
    rebuilt.build()
    assert [w.path for w in rebuilt.weights] == [w.path for w in encoder.weights]
    assert rebuilt.projection is not None and rebuilt.final_norm is None


def test_the_sizes_and_the_parameter_bound():
    config = ModelConfig(source_vocab_size=500, target_vocab_size=700, encoder="cascade",
                         merge_mode="concat", embedding_dim=64, units=48, encoder_blocks=2,
                         feed_forward_dim=96)
    assert (config.recurrent_dim, config.memory_dim, config.final_state_dim) == (96, 64, 96)
    assert config.self_attention_encoder
    built = Seq2Seq(config)
    assert built.bridge_layers[0].kernel.shape == (96, 48)
    bound = minimum_parameter_count(config)
    assert 0.75 * built.count_params() <= bound <= built.count_params()


@pytest.mark.parametrize("fields, message", [
    (dict(encoder_blocks=2), "encoder_blocks applies to the cascade encoder"),
    (dict(encoder="self-attention", encoder_blocks=2), "encoder_blocks applies"),
    (dict(encoder="cascade", encoder_blocks=0), "encoder_blocks must be a positive integer"),
    (dict(encoder="cascade", embedding_dim=30, heads=4), "heads must divide embedding_dim"),
    (dict(encoder="cascade", embedding_dim=32, units=16, score="dot"), "same size"),
    (dict(encoder="cascade", merge_mode="concat", bridge="copy"),
     "encoder states of 512"),
    (dict(encoder="cascades"), "encoder must be one of"),
])
def test_inconsistent_cascade_settings_are_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(source_vocab_size=10, target_vocab_size=10, **fields)


def test_the_cascade_s_own_sizes_are_accepted():
    # Annotations of embedding_dim meet `dot` with units = embedding_dim even though
    # the recurrent outputs have 2 * units; the copy bridge reads units summed.
    ModelConfig(source_vocab_size=10, target_vocab_size=10, encoder="cascade",
                merge_mode="concat", score="dot")
    ModelConfig(source_vocab_size=10, target_vocab_size=10, encoder="cascade", bridge="copy")


def test_a_bad_key_is_one_line_naming_its_path(tmp_path):
    with pytest.raises(ConfigError) as error:
        run_config_from_mapping({"model": {"encoder": "cascade", "encoder_blocks": -1}})
    assert "model" in str(error.value) and "\n" not in str(error.value)
    result = CliRunner().invoke(app, ["train", str(TINY), "--run-dir", str(tmp_path / "run"),
                                      "--set", "model.encoder_blocks=3"])
    assert "encoder_blocks applies to the cascade encoder" in one_line_error(result)


# One tiny run, trained as a user trains it: two epochs of configs/tiny-test.yaml with a
# cascade of a concatenated bi-GRU (64 features, projected to 32) and 2 blocks.
CASCADE_RUN = ["model.encoder=cascade", "model.merge_mode=concat", "model.encoder_blocks=2",
               "model.heads=2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("cascade")
    sets = [argument for setting in CASCADE_RUN for argument in ("--set", setting)]
    succeeds(attncli("train", TINY, "--run-dir", "run", *sets, cwd=work))
    return work / "run"


def in_process(*args):
    result = CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_the_cascade_run_learns_and_keeps_its_architecture(trained):
    records = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [record["epoch"] for record in records] == [1, 2]
    assert records[1]["train_loss"] < records[0]["train_loss"]
    assert records[1]["valid_loss"] < records[0]["valid_loss"]
    kept = json.loads((trained / "model" / "config.json").read_text())["model"]
    assert (kept["encoder"], kept["encoder_blocks"], kept["merge_mode"]) == (
        "cascade", 2, "concat")


@pytest.mark.slow
def test_the_cascade_run_translates_and_shows_its_weights(trained):
    sources = ["Tengo hambre.", "Estoy cansado.", "Hola."]
    greedy = in_process("translate", trained, *sources)
    beam = in_process("translate", trained, *sources, "--beam", "2", "--n-best", "2",
                      "--format", "tsv")
    assert len(greedy.stdout.splitlines()) == 3
    assert [line.split("\t")[:2] for line in beam.stdout.splitlines()] == [
        [str(i), str(rank)] for i in (1, 2, 3) for rank in (1, 2)
    ]
    weights = in_process("inspect-weights", trained, "--text", "Tengo hambre.",
                         "--params").stdout
    for name in ("encoder/layer_0_backward", "encoder/projection/kernel",
                 "encoder/block_1/self_attention/W_q", "encoder/final_norm/gamma"):
        assert name in weights


@pytest.mark.slow
def test_the_cascade_run_shows_its_blocks_attention_and_walks_a_step(trained):
    shown = in_process("inspect-weights", trained, "--text", "Tengo hambre.", "--attention",
                       "encoder", "--layer", "2", "--head", "1", "--step", "2").stdout
    words = " ".join(shown.split())
    assert "encoder self-attention weights (layer 2 of 2, head 1 of 2)" in words
    assert "encoder attention, layer 2, head 1: query 2 'hambre'" in words


@pytest.mark.slow
def test_the_cascade_run_exports_and_the_export_translates_as_attncli_does(trained, tmp_path):
    # `attncli export` checks its SavedModel in a fresh Python: each signature must
    # translate the samples as `attncli translate` does, or it fails.
    result = in_process("export", trained, tmp_path / "export", "--sample", "Tengo hambre.")
    assert "every signature translates as attncli translate does" in " ".join(
        result.stderr.split())
    assert (tmp_path / "export" / "saved_model.pb").is_file()

