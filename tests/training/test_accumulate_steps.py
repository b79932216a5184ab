"""`training.accumulate_steps`: N batches of B make the update of one batch of N x B."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.config.model import ModelConfig
from attncli.config.run import load_run_config
from attncli.config.schema import ConfigError
from attncli.config.training import TrainingConfig
from attncli.model.encoder_decoder import Seq2Seq
from attncli.training.builder import dtype_policy
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.steps import GradientSums, make_train_step
from tests.attncli_runs import TINY
from tests.recorder import Recorder

# Two batches of different lengths and token counts (9 and 3 target tokens), so that a
# mean of the two batches' mean gradients would differ from the mean over all tokens.
FIRST = (
    (tf.constant([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 14, 0, 0, 0]]),
     tf.constant([[2, 5, 6, 7], [2, 8, 0, 0], [2, 10, 11, 0]])),
    tf.constant([[5, 6, 7, 3], [8, 3, 0, 0], [10, 11, 3, 0]]),
)
SECOND = (
    (tf.constant([[7, 8, 0], [9, 5, 6]]), tf.constant([[2, 9], [2, 0]])),
    tf.constant([[9, 3], [3, 0]]),
)


def padded(tensor, width):
    return tf.pad(tensor, [[0, 0], [0, width - tensor.shape[1]]])


def joined(*batches):
    """One batch holding the rows of `batches`, padded to the longest."""
    parts = [batch[0][0] for batch in batches], [batch[0][1] for batch in batches], [
        batch[1] for batch in batches]
    out = []
    for tensors in parts:
        width = max(t.shape[1] for t in tensors)
        out.append(tf.concat([padded(t, width) for t in tensors], axis=0))
    return (out[0], out[1]), out[2]


def tiny_model(policy="float32", **options):
    keras.utils.set_random_seed(3)
    with dtype_policy(policy):
        return Seq2Seq(ModelConfig(source_vocab_size=20, target_vocab_size=15,
                                   embedding_dim=8, units=8, **options))


def weights(model):
    return [v.numpy().astype("float64") for v in model.trainable_variables]


def sgd_deltas(batches, accumulate, config=TrainingConfig(clip_norm=None), policy="float32",
               wrap=None, **options):
    """The weight change of one SGD update (rate 1: minus the gradient) made from
    `batches`, added up over them (`accumulate`) or as given; and the optimizer."""
    model = tiny_model(policy, **options)
    optimizer = keras.optimizers.SGD(learning_rate=1.0, global_clipnorm=config.clip_norm)
    if wrap is not None:
        optimizer = wrap(optimizer)
    sums = GradientSums(model.trainable_variables, len(batches)) if accumulate else None
    step = make_train_step(model, optimizer, config, sums)
    before = weights(model)
    for inputs, target_out in batches:
        step(inputs, target_out)
    return [after - start for after, start in zip(weights(model), before)], optimizer


def test_two_batches_update_as_one_batch_of_both():
    accumulated, optimizer = sgd_deltas([FIRST, SECOND], accumulate=True)
    whole, _ = sgd_deltas([joined(FIRST, SECOND)], accumulate=False)
    assert int(optimizer.iterations.numpy()) == 1
    for ours, reference in zip(accumulated, whole):
        # float32 sums in another order: agreement to float32 rounding.
        np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-6)
    # The mean of the two batches' mean gradients is another update: the test can fail.
    first, _ = sgd_deltas([FIRST], accumulate=False)
    second, _ = sgd_deltas([SECOND], accumulate=False)
    naive = [(a + b) / 2 for a, b in zip(first, second)]
    assert max(np.abs(n - w).max() for n, w in zip(naive, whole)) > 1e-3


def test_the_summed_gradient_is_clipped_as_a_whole():
    gradient = [-delta for delta in sgd_deltas([joined(FIRST, SECOND)], accumulate=False)[0]]
    norm = np.sqrt(sum((g ** 2).sum() for g in gradient))
    clip = norm / 4
    accumulated, _ = sgd_deltas([FIRST, SECOND], accumulate=True,
                                config=TrainingConfig(clip_norm=float(clip)))
    for ours, g in zip(accumulated, gradient):
        np.testing.assert_allclose(ours, -g * clip / norm, rtol=1e-4, atol=1e-6)


def test_updates_are_counted_not_batches():
    model = tiny_model()
    optimizer = make_optimizer(TrainingConfig())
    sums = GradientSums(model.trainable_variables, 3)
    step = make_train_step(model, optimizer, TrainingConfig(), sums)
    for count, batch in enumerate([FIRST, SECOND] * 4, start=1):
        step(*batch)
        assert int(optimizer.iterations.numpy()) == count // 3
        assert int(sums.batches.numpy()) == count % 3
    assert float(sums.tokens.numpy()) == 9.0 + 3.0  # the 7th and 8th batches


def test_the_moving_average_is_updated_once_per_update():
    config = TrainingConfig(average_decay=0.999, clip_norm=None)
    model = tiny_model()
    optimizer = make_optimizer(config)
    step = make_train_step(model, optimizer, config, GradientSums(model.trainable_variables, 2))
    step(*FIRST)
    step(*SECOND)
    first = weights(model)
    step(*FIRST)
    step(*SECOND)
    second = weights(model)
    # d_t = min(d, t / (t + 10)), t the updates before: 0 (copy), then 1 / 11.
    averages = [v.numpy() for v in optimizer._model_variables_moving_average]
    for average, w1, w2 in zip(averages, first, second):
        np.testing.assert_allclose(average, w1 / 11 + 10 * w2 / 11, rtol=1e-5, atol=1e-6)


def test_mixed_float16_scales_each_batch_and_unscales_the_sum_once():
    options = dict(encoder="self-attention", decoder="self-attention", heads=2)
    config = TrainingConfig(clip_norm=None, precision="mixed_float16")
    wrap = keras.optimizers.LossScaleOptimizer
    accumulated, optimizer = sgd_deltas([FIRST, SECOND], True, config, "mixed_float16",
                                        wrap, **options)
    whole, _ = sgd_deltas([joined(FIRST, SECOND)], False, config, "mixed_float16", wrap,
                          **options)
    reference, _ = sgd_deltas([joined(FIRST, SECOND)], False, dataclasses.replace(
        config, precision="float32"), **options)
    assert int(optimizer.iterations.numpy()) == 1
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 15
    scale = max(np.abs(r).max() for r in reference)
    for ours, theirs, exact in zip(accumulated, whole, reference):
        # float16 activations: as close to the float32 update as one large batch is.
        error = np.abs(theirs - exact).max()
        np.testing.assert_allclose(ours, exact, atol=max(4 * error, 1e-3 * scale))


@pytest.mark.parametrize(("override", "message"), [
    ("training.accumulate_steps=0", "accumulate_steps must be >= 1"),
    ("training.accumulate_steps=1.5", "training.accumulate_steps"),
])
def test_bad_values_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(TINY, [override])


def test_a_distributed_run_is_refused_in_one_line():
    with pytest.raises(ConfigError) as error:
        load_run_config(TINY, ["training.accumulate_steps=2", "training.distribute=mirrored"])
    assert "accumulate_steps adds up gradients on one device" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_a_run_steps_checkpoints_and_resumes_by_updates(tmp_path):
    from attncli.training.run_directory import RunDirectory
    from attncli.training.trainer import Trainer

    overrides = ["training.accumulate_steps=3", "training.epochs=1", "data.limit=300",
                 "training.checkpoint_every=2", "training.eval_sentences=5"]
    config = load_run_config(TINY, overrides)
    run = RunDirectory.create(tmp_path / "run")
    recorder = Recorder()
    trainer = Trainer.from_config(config, run, recorder)
    trainer.fit()
    batches = len(recorder.losses)
    [record] = recorder.records
    assert record["step"] == batches // 3
    assert int(trainer.parts.gradient_sums.batches.numpy()) == batches % 3
    numbers = sorted(int(p.name.split("-")[1].split(".")[0])
                     for p in run.checkpoint_dir.glob("ckpt-*.index"))
    assert numbers  # every second update, and the epoch's end

    resumed = Trainer.from_config(dataclasses.replace(
        config, training=dataclasses.replace(config.training, epochs=2)), run, Recorder(),
        resume=True)
    sums = resumed.parts.gradient_sums
    assert int(sums.batches.numpy()) == batches % 3
    for ours, theirs in zip(sums.sums, trainer.parts.gradient_sums.sums):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
