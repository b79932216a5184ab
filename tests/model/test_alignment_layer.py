"""The alignment layer (`model.alignment_layer`): its weights against the formula in
NumPy, translation untouched by it, each loss training its own weights, training it alone
on a finished model, the refusals, and `attncli align` reading it."""

import dataclasses
import json
import math
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from typer.testing import CliRunner

from attncli.alignment.extraction import AttentionChoice, ChoiceError, token_weights
from attncli.cli.app import app
from attncli.config.model import ModelSettings
from attncli.config.run import run_config_from_mapping
from attncli.config.schema import ConfigError
from attncli.config.training import GuidedAlignment, TrainingConfig
from attncli.model.encoder_decoder import Seq2Seq
from attncli.search.forced import Forced
from attncli.search.loading import load_model
from attncli.errors import AttncliError
from attncli.training.guided import make_guided_eval_step
from attncli.training.eval_step import make_eval_step
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.steps import make_train_step
from attncli.training.trainer import Trainer
from tests.cli_errors import one_line_error
from tests.guided_runs import (  # noqa: F401 (trained_guided: a fixture)
    GUIDED_SENTENCES, guided_config, trained_guided,
)
from tests.recorder import Recorder
from tests.shared_data import shared_data
from attncli_runs import training_parts

SOURCE = np.array([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]], np.int32)
TARGET_IN = np.array([[2, 11, 12, 13], [2, 14, 0, 0]], np.int32)
DECODERS = ("luong", "bahdanau", "self-attention")


def settings(decoder, alignment_layer=True):
    extra = {"score": "scaled_dot"} if decoder == "self-attention" else {}
    return ModelSettings(embedding_dim=8, units=12, decoder=decoder, heads=2,
                         alignment_layer=alignment_layer, **extra).sized(20, 30)


def numpy_alignment(features, next_embeddings, values, source_mask, layer):
    """a_t(s) = softmax_s(tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)^T W_a h_s), from the
    module's formula; Keras keeps W_a as (key_dim, query_dim), so q^T W h = q . (h W)."""
    W_q, b_q = (w.numpy() for w in layer.query_projection.weights)
    W_a = layer.attention.W_a.numpy()
    following = np.concatenate([features[:, 1:], np.zeros_like(features[:, :1])], axis=1)
    query = np.tanh(np.concatenate([features, following, next_embeddings], -1) @ W_q + b_q)
    scores = np.einsum("btq,bsq->bts", query, values @ W_a)
    scores = np.where(source_mask[:, None, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_weights_follow_the_formula(decoder):
    keras.utils.set_random_seed(0)
    model = Seq2Seq(settings(decoder))
    values, final_state, source_mask = model.encoder(SOURCE)
    features, _ = model._decode(TARGET_IN, values, final_state, source_mask)
    ours = model.alignment_weights(features, TARGET_IN, values, source_mask).numpy()

    # E(y_t): the raw token table's row of the next input (not the decoder's scaled and
    # positioned embedding), zeros past the end.
    embedding = model.decoder.embedding
    table = getattr(embedding, "token_embedding", embedding).embeddings.numpy()
    following = np.concatenate([TARGET_IN[:, 1:], np.zeros((2, 1), np.int32)], axis=1)
    next_embeddings = table[following] * (following != 0)[..., None]
    expected = numpy_alignment(np.asarray(features), next_embeddings, np.asarray(values),
                               np.asarray(source_mask), model.alignment_layer)
    np.testing.assert_allclose(ours, expected, atol=1e-6)
    assert ours[1, :, 3:].max() == 0.0  # padding gets weight 0


def numpy_gru(rows, kernel, recurrent_kernel, bias):
    """Cho et al. 2014's GRU with the reset gate applied after the recurrent product
    (Keras's `reset_after`, gates in the order update, reset, candidate), over `rows`
    `(n, d)`: `z = σ(x W_z + b_z + h U_z + b'_z)`, `r = σ(x W_r + b_r + h U_r + b'_r)`,
    `h̃ = tanh(x W_h + b_h + r ⊙ (h U_h + b'_h))`, `h ← z ⊙ h + (1 - z) ⊙ h̃`."""
    units = recurrent_kernel.shape[0]
    h, out = np.zeros(units), []
    for x in rows:
        inputs, recurrent = x @ kernel + bias[0], h @ recurrent_kernel + bias[1]
        z = 1 / (1 + np.exp(-(inputs[:units] + recurrent[:units])))
        r = 1 / (1 + np.exp(-(inputs[units:2 * units] + recurrent[units:2 * units])))
        candidate = np.tanh(inputs[2 * units:] + r * recurrent[2 * units:])
        h = z * h + (1 - z) * candidate
        out.append(h)
    return np.array(out)


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_full_context_weights_follow_the_formula(decoder):
    """context "full": q_t = tanh(W_q [c_t; f_t; f_{t+1}; E(y_t)] + b_q), c_t the
    forward and backward GRUs over the real target rows [f_t; E(y_t)]."""
    keras.utils.set_random_seed(0)
    model = Seq2Seq(dataclasses.replace(settings(decoder), alignment_context="full"))
    values, final_state, source_mask = model.encoder(SOURCE)
    features, _ = model._decode(TARGET_IN, values, final_state, source_mask)
    ours = model.alignment_weights(features, TARGET_IN, values, source_mask).numpy()

    layer = model.alignment_layer
    features, values = np.asarray(features), np.asarray(values)
    table = getattr(model.decoder.embedding, "token_embedding",
                    model.decoder.embedding).embeddings.numpy()
    following = np.concatenate([TARGET_IN[:, 1:], np.zeros((2, 1), np.int32)], axis=1)
    next_embeddings = table[following] * (following != 0)[..., None]
    forward = [w.numpy() for w in layer.context_rnn.forward_layer.weights]
    backward = [w.numpy() for w in layer.context_rnn.backward_layer.weights]
    W_q, b_q = (w.numpy() for w in layer.query_projection.weights)
    W_a = layer.attention.W_a.numpy()
    for b in range(2):
        real = following[b] != 0
        rows = np.concatenate([features[b], next_embeddings[b]], -1)[real]
        context = np.concatenate(
            [numpy_gru(rows, *forward), numpy_gru(rows[::-1], *backward)[::-1]], -1)
        after = np.concatenate([features[b, 1:], np.zeros_like(features[b, :1])])[real]
        query = np.tanh(np.concatenate(
            [context, features[b][real], after, next_embeddings[b][real]], -1) @ W_q + b_q)
        scores = query @ (values[b] @ W_a).T
        scores = np.where(np.asarray(source_mask)[b], scores, -np.inf)
        expected = np.exp(scores - scores.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(ours[b][real], expected, atol=1e-6)
    np.testing.assert_allclose(ours.sum(-1), 1.0, atol=1e-6)
    assert ours[1, :, 3:].max() == 0.0


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_maps_and_the_supervised_weights_are_the_layer_s(decoder):
    model = Seq2Seq(settings(decoder))
    _, maps = model.teacher_forced(SOURCE, TARGET_IN)
    _, supervised = model.features((SOURCE, TARGET_IN), cross_attention="alignment")
    assert maps["alignment"][0].shape == (2, 1, 4, 5)
    np.testing.assert_allclose(maps["alignment"][0][:, 0], supervised, atol=1e-7)
    assert "alignment" not in Seq2Seq(settings(decoder, False)).teacher_forced(
        SOURCE, TARGET_IN)[1]


@pytest.mark.parametrize("decoder", DECODERS)
def test_translation_is_the_same_with_or_without_the_layer(decoder):
    with_layer = Seq2Seq(settings(decoder))
    without = Seq2Seq(settings(decoder, False))
    ours = {variable.path: variable for variable in with_layer.weights}
    for variable in without.weights:
        variable.assign(ours[variable.path.replace(without.name, with_layer.name, 1)])
    np.testing.assert_array_equal(with_layer((SOURCE, TARGET_IN)),
                                  without((SOURCE, TARGET_IN)))


@pytest.mark.parametrize("context", ("next", "full"))
@pytest.mark.parametrize("decoder", DECODERS)
def test_each_loss_trains_its_own_weights(decoder, context):
    model = Seq2Seq(dataclasses.replace(settings(decoder), alignment_context=context))
    layer = model.alignment_layer.trainable_variables
    others = [v for v in model.trainable_variables
              if not any(v is mine for mine in layer)]
    with tf.GradientTape(persistent=True) as tape:
        features, weights = model.features((SOURCE, TARGET_IN), training=True,
                                           cross_attention="alignment")
        translation = tf.reduce_sum(model.decoder.output_layer(features))
        alignment = -tf.reduce_sum(tf.math.log(tf.maximum(weights, 1e-9)))
    assert all(g is None for g in tape.gradient(translation, layer))
    assert all(g is None for g in tape.gradient(alignment, others))
    assert all(g is not None for g in tape.gradient(alignment, layer))


def test_freeze_translation_updates_the_alignment_layer_alone():
    keras.utils.set_random_seed(1)
    model = Seq2Seq(settings("luong"))
    config = TrainingConfig(learning_rate=0.01, guided_alignment=GuidedAlignment(
        weight=1.0, freeze_translation=True))
    before = [v.numpy().copy() for v in model.weights]
    gold = np.zeros((2, 4, 5), np.float32)
    gold[0, 0, 0] = gold[0, 1, 1] = gold[1, 0, 0] = 1.0
    target_out = np.array([[11, 12, 13, 3], [14, 3, 0, 0]], np.int32)
    step = make_train_step(model, make_optimizer(config), config)
    report = step((tf.constant(SOURCE), tf.constant(TARGET_IN)),
                  (tf.constant(target_out), tf.constant(gold)))
    assert int(report["links"]) == 3
    for variable, value in zip(model.weights, before):
        moved = not np.array_equal(variable.numpy(), value)
        assert moved == ("alignment_layer" in variable.path), variable.path


def frozen_aligner(trained_guided, work):  # noqa: F811
    """`work/run`, a copy of the guided run, and `work/aligner.yaml`: its config with an
    alignment layer, trained alone (the translation frozen)."""
    shutil.copytree(trained_guided / "run", work / "run")
    aligner = guided_config(trained_guided / "data", limit=GUIDED_SENTENCES)
    aligner["model"]["alignment_layer"] = True
    aligner["training"]["guided_alignment"]["freeze_translation"] = True
    (work / "aligner.yaml").write_text(json.dumps(aligner))


@pytest.mark.parametrize("decoder", DECODERS)
def test_validation_measures_the_layer_against_numpy(decoder):
    """The guided evaluation step: the translation losses of `make_eval_step`, and
    L_align's sum and N, -sum_t sum_s g_t(s) log a_t(s) over the linked rows, for the
    layer's weights as it translates (the weights' formula: the tests above)."""
    keras.utils.set_random_seed(2)
    model = Seq2Seq(settings(decoder))
    config = TrainingConfig(label_smoothing=0.1, guided_alignment=GuidedAlignment(weight=1.0))
    gold = np.zeros((2, 4, 5), np.float32)
    gold[0, 0, 0] = gold[1, 0, 2] = 1.0
    gold[0, 1, [1, 2]] = 0.5
    target_out = np.array([[11, 12, 13, 3], [14, 3, 0, 0]], np.int32)
    inputs = (tf.constant(SOURCE), tf.constant(TARGET_IN))
    result = make_guided_eval_step(model, config)(
        inputs, (tf.constant(target_out), tf.constant(gold)))
    plain = make_eval_step(model, config)(inputs, tf.constant(target_out))
    for key in ("loss", "nll", "tokens"):
        np.testing.assert_allclose(result[key].numpy(), plain[key].numpy(), rtol=1e-6)
    _, weights = model.features(inputs, training=False, cross_attention="alignment")
    weights = weights.numpy()
    logs = np.log(np.maximum(weights, np.finfo(np.float32).tiny))
    assert int(result["links"]) == 3
    np.testing.assert_allclose(float(result["alignment_sum"]), -(gold * logs).sum(), rtol=1e-6)


@pytest.mark.slow
def test_a_frozen_run_keeps_its_best_layer(trained_guided, tmp_path,  # noqa: F811
                                           monkeypatch):
    """`stop_metric` unset, the translation frozen: the validation pairs (carved from
    the training file) have links, so the metric is `alignment`; each evaluation keeps
    the model only when `valid_alignment_loss` is lower than every earlier one."""
    monkeypatch.chdir(tmp_path)
    frozen_aligner(trained_guided, tmp_path)
    parts, _ = training_parts("aligner.yaml", "aligned", init_from="run")
    trainer = Trainer(parts, Recorder())
    assert trainer.stop_metric.name == "alignment"
    measured = iter([3.0, 2.0, 2.5])
    monkeypatch.setattr(trainer.validator, "loss_figures", lambda raw_loss=None: {
        "valid_loss": 1.0, "valid_alignment_loss": next(measured)})
    monkeypatch.setattr(trainer.validator, "metric", lambda: {"bleu": 1.0, "chrf": 1.0})
    kept = []
    for epoch in (1, 2, 3):
        record = trainer._evaluate(epoch, 1.0, True)
        kept.append((record["best"], load_model(tmp_path / "aligned" / "model").metadata))
    assert [best for best, _ in kept] == [True, True, False]
    assert [metadata["epoch"] for _, metadata in kept] == [1, 2, 2]
    assert kept[-1][1]["valid_alignment_loss"] == 2.0

    # Measured for real: the validation pairs' links are those of data.alignments.
    real = trainer.validator.losses()["alignment"]
    assert math.isfinite(real) and real > 0


@pytest.mark.slow
def test_alignment_metric_needs_validation_links(trained_guided, tmp_path,  # noqa: F811
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    guided = guided_config(trained_guided / "data", limit=GUIDED_SENTENCES)
    guided["data"]["valid"] = "test"  # a file of its own: data.alignments does not cover it
    guided["training"]["stop_metric"] = "alignment"
    (tmp_path / "guided.yaml").write_text(json.dumps(guided))
    with pytest.raises(AttncliError, match="^training.stop_metric alignment is measured on "
                                           "the validation pairs' links"):
        training_parts("guided.yaml", "run")


def test_stop_metric_alignment_needs_guided_alignment():
    mapping = run_mapping()
    mapping["training"]["stop_metric"] = "alignment"
    with pytest.raises(ConfigError, match="training.stop_metric alignment is guided "
                                          "alignment's loss on the validation pairs"):
        run_config_from_mapping(mapping)


def run_mapping(model=None, guided=None):
    mapping = guided_config("/nowhere", limit=10)
    mapping["model"].update(model or {})
    if guided is None:
        del mapping["training"]["guided_alignment"], mapping["data"]["alignments"]
    else:
        mapping["training"]["guided_alignment"] = guided
    return mapping


@pytest.mark.parametrize(("model", "guided", "message"), [
    ({"alignment_layer": True}, None,
     "model.alignment_layer learns from guided alignment alone"),
    ({"alignment_layer": True}, {"weight": 1.0, "head": 1},
     "guided_alignment.head: model.alignment_layer is what is supervised"),
    ({}, {"weight": 1.0, "freeze_translation": True},
     "freeze_translation trains the alignment layer alone: set model.alignment_layer"),
])
def test_settings_that_cannot_train_are_refused(model, guided, message):
    with pytest.raises(ConfigError, match=message):
        run_config_from_mapping(run_mapping(model, guided))


def forced_pair(alignment):
    attentions = {"cross": [np.full((2, 3, 2), 0.5)]}
    if alignment:
        attentions["alignment"] = [np.array([[[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]])]
    return Forced("a b", ["a", "b"], "x y", ["x", "y", "[END]"], None, None, attentions)


def test_links_are_read_from_the_layer_unless_the_cross_attention_is_asked():
    forced = forced_pair(alignment=True)
    np.testing.assert_array_equal(token_weights(forced, AttentionChoice()),
                                  forced.attentions["alignment"][0][0])
    np.testing.assert_array_equal(
        token_weights(forced, AttentionChoice(attention="cross")), np.full((3, 2), 0.5))
    with pytest.raises(ChoiceError, match="the alignment layer has one layer and one head"):
        token_weights(forced, AttentionChoice(head=1))
    with pytest.raises(ChoiceError, match="the model has no alignment layer"):
        token_weights(forced_pair(alignment=False), AttentionChoice(attention="alignment"))


@pytest.mark.slow
def test_a_finished_run_gains_a_trained_alignment_layer(trained_guided, tmp_path,  # noqa: F811
                                                        monkeypatch):
    """train (`guided_runs.trained_guided`); train --init-from it with an alignment layer,
    the translation frozen: the model's weights stay RUN's, the layer moves, align reads
    it, export still works (a guided run's export: test_guided_alignment has none)."""
    monkeypatch.chdir(tmp_path)
    frozen_aligner(trained_guided, tmp_path)

    def attncli(*args):
        result = CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "500"})
        assert result.exit_code == 0, result.output
        return result

    said = attncli("train", "aligner.yaml", "--run-dir", "aligned", "--init-from", "run").output
    assert "an alignment layer added" in said
    run, aligned = load_model(tmp_path / "run" / "model"), load_model(tmp_path / "aligned" / "model")
    kept = {v.path.split("/", 1)[1]: v.numpy() for v in run.model.weights}
    for variable in aligned.model.weights:
        inner = variable.path.split("/", 1)[1]
        if inner.startswith("alignment_layer"):
            continue
        np.testing.assert_array_equal(variable.numpy(), kept[inner], err_msg=inner)

    # Resumed, the frozen run starts from the model it checkpointed, not a fresh one.
    parts, said = training_parts(None, "aligned", resume=True, overrides=["training.epochs=2"])
    assert any(message.startswith("resuming from") for message in said)
    resumed = {v.path.split("/", 1)[1]: v.numpy() for v in parts.model.weights}
    for variable in aligned.model.weights:
        inner = variable.path.split("/", 1)[1]
        np.testing.assert_array_equal(resumed[inner], variable.numpy(), err_msg=inner)

    pairs = tmp_path / "pairs.tsv"
    english = shared_data("hansards-en-fr/test.en").read_text().splitlines()[:20]
    french = shared_data("hansards-en-fr/test.fr").read_text().splitlines()[:20]
    pairs.write_text("".join(f"{e}\t{f}\n" for e, f in zip(english, french)))
    layer_links = attncli("align", "aligned", "--input", pairs).stdout
    cross_links = attncli("align", "aligned", "--input", pairs, "--attention", "cross").stdout
    assert cross_links == attncli("align", "run", "--input", pairs).stdout
    assert layer_links != cross_links
    assert len(layer_links.splitlines()) == 20

    refused = CliRunner().invoke(app, ["align", "run", "--input", str(pairs), "--attention",
                                       "alignment"])
    assert "no alignment layer" in one_line_error(refused)
    attncli("export", "aligned", "exported")
    exported = tf.saved_model.load(str(tmp_path / "exported"))
    outputs = exported.signatures["greedy"](texts=tf.constant(["the house ."]))
    assert outputs["translations"].dtype == tf.string
