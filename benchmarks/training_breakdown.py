"""Where a training step's time goes: attncli's Seq2Seq and the TF tutorial's model, by stage.

Each stage is a compiled function that runs one part of the model forward and backward
(gradients with respect to its weights and to its inputs, as inside the whole step) on
the same spa-eng batches as `benchmarks.bench_training` (batch 64, `--bucketing` for
batches of similar lengths): the encoder; the decoder's RNN (embedding, input
projection, recurrence); attention with what follows it up to the features (our
`W_c` and LayerNorm, the tutorial's residual and LayerNorm); the output layer and the
loss; the optimizer's update. The whole train step is timed too. Every function runs
every batch `--repeats` times in turns and the fastest run counts, so the load of a
shared machine falls on all alike. Prints milliseconds per batch and each stage's share
of the whole step.

    ATTNCLI_SHARED_DATA=../shared/data python -m benchmarks.training_breakdown --bucketing
"""

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from attncli.config.model import ModelConfig  # noqa: E402
from attncli.config.training import TrainingConfig  # noqa: E402
from attncli.data.vocabulary import PAD  # noqa: E402
from attncli.model import recurrent  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.training.losses import longest_source_first, smoothed_cross_entropy  # noqa: E402
from attncli.training.optimizer_setup import make_optimizer  # noqa: E402
from attncli.training.steps import make_train_step  # noqa: E402
from benchmarks.bench_training import (  # noqa: E402
    BATCH_SIZE, UNITS, VOCAB_SIZE, load_batches,
)
from benchmarks.tutorial_model import TutorialTranslator, tutorial_train_step  # noqa: E402

STAGES = ("encoder", "decoder RNN", "attention to features", "output layer + loss",
          "optimizer update")


def _backward(loss_fn, variables, *inputs):
    """Gradients of `loss_fn(*inputs)` with respect to `variables` and float `inputs`."""
    with tf.GradientTape() as tape:
        tape.watch([x for x in inputs if x.dtype.is_floating])
        loss = loss_fn(*inputs)
    sources = list(variables) + [x for x in inputs if x.dtype.is_floating]
    gradients = tape.gradient(loss, sources, unconnected_gradients="zero")
    return tf.add_n([tf.reduce_sum(g) for g in gradients if not isinstance(g, tf.IndexedSlices)])


def _compiled(loss_fn, variables, specs):
    return tf.function(lambda *inputs: _backward(loss_fn, variables, *inputs),
                       input_signature=specs)


INT = tf.TensorSpec((None, None), tf.int32)
FEATURES = tf.TensorSpec((None, None, UNITS), tf.float32)
STATE = tf.TensorSpec((None, UNITS), tf.float32)
BOOL = tf.TensorSpec((None, None), tf.bool)


def ours(example):
    """`({stage: (function, inputs of a batch)}, whole step)` of luong general."""
    config = ModelConfig(VOCAB_SIZE, VOCAB_SIZE, embedding_dim=UNITS, units=UNITS,
                         decoder="luong", score="general")
    training = TrainingConfig(label_smoothing=0.0, clip_norm=None)
    model = Seq2Seq(config)
    model(example)
    optimizer = make_optimizer(training)
    step = make_train_step(model, optimizer, training)
    encoder, decoder = model.encoder, model.decoder

    def encode(source_ids):
        outputs, final_state, _ = encoder(source_ids, training=True)
        return tf.reduce_sum(outputs) + tf.add_n([tf.reduce_sum(s) for s in final_state])

    def decoder_rnn(target_in_ids, state):
        mask = tf.not_equal(target_in_ids, 0)
        lengths = tf.reduce_sum(tf.cast(mask, "int32"), axis=1)
        embedded = decoder.embedding(target_in_ids)
        projected = recurrent.project_tokens([decoder.cell], embedded, mask)
        (states,) = recurrent.run([decoder.cell], projected, [(state,)], lengths=lengths)
        return tf.reduce_sum(tf.where(mask[:, :, None], states[0], 0.0))

    def attention(outputs, values, source_mask):
        memory = decoder.memory(values, source_mask)
        attentional, _ = decoder._attentional(outputs, memory, True, None)
        return tf.reduce_sum(decoder.output_norm(attentional))

    def output_and_loss(features, target_out):
        mask = tf.not_equal(target_out, PAD)
        logits = decoder.output_layer(tf.boolean_mask(features, mask))
        return tf.reduce_mean(smoothed_cross_entropy(logits, tf.boolean_mask(target_out, mask)))

    stages = {
        "encoder": _compiled(encode, encoder.trainable_variables, [INT]),
        "decoder RNN": _compiled(
            decoder_rnn, decoder.embedding.trainable_variables + decoder.cell.trainable_variables,
            [INT, STATE]),
        "attention to features": _compiled(
            attention, decoder.attention.trainable_variables + decoder.combine.trainable_variables
            + decoder.output_norm.trainable_variables, [FEATURES, FEATURES, BOOL]),
        "output layer + loss": _compiled(
            output_and_loss, decoder.output_layer.trainable_variables, [FEATURES, INT]),
    }

    def inputs(batch):
        batch_inputs, target_out = longest_source_first(*batch)
        source_ids, target_in_ids = batch_inputs
        memory, state = model.encode(source_ids)
        features, _ = model.features(batch_inputs)
        outputs = tf.random.normal(tf.shape(features))
        return {
            "encoder": (source_ids,),
            "decoder RNN": (target_in_ids, state[0]),
            "attention to features": (outputs, memory["values"], memory["source_mask"]),
            "output layer + loss": (features, target_out),
        }

    return model, optimizer, stages, inputs, step


def tutorial(example):
    """The same for the tutorial's model."""
    model = TutorialTranslator(VOCAB_SIZE, VOCAB_SIZE, UNITS)
    model(example)
    optimizer = keras.optimizers.Adam(1e-3)
    step = tutorial_train_step(model, optimizer)

    def encode(source_ids):
        return tf.reduce_sum(model.encode(source_ids)[0])

    def decoder_rnn(target_in_ids):
        outputs, _ = model.decoder_rnn(
            model.target_embedding(target_in_ids), mask=target_in_ids != PAD
        )
        return tf.reduce_sum(outputs)

    def attention(outputs, context, source_mask):
        attended = model.attention(
            query=outputs, value=context, attention_mask=source_mask[:, None, :]
        )
        return tf.reduce_sum(model.norm(outputs + attended))

    def output_and_loss(features, target_out):
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        mask = tf.cast(target_out != PAD, "float32")
        logits = model.output_layer(features)
        return tf.reduce_sum(loss_fn(target_out, logits) * mask) / tf.reduce_sum(mask)

    stages = {
        "encoder": _compiled(
            encode, model.source_embedding.trainable_variables
            + model.encoder_rnn.trainable_variables, [INT]),
        "decoder RNN": _compiled(
            decoder_rnn, model.target_embedding.trainable_variables
            + model.decoder_rnn.trainable_variables, [INT]),
        "attention to features": _compiled(
            attention, model.attention.trainable_variables + model.norm.trainable_variables,
            [FEATURES, FEATURES, BOOL]),
        "output layer + loss": _compiled(
            output_and_loss, model.output_layer.trainable_variables, [FEATURES, INT]),
    }

    def inputs(batch):
        (source_ids, target_in_ids), target_out = batch
        context, source_mask = model.encode(source_ids)
        outputs = tf.random.normal(tf.shape(target_in_ids).numpy().tolist() + [UNITS])
        return {
            "encoder": (source_ids,),
            "decoder RNN": (target_in_ids,),
            "attention to features": (outputs, context, source_mask),
            "output layer + loss": (outputs, target_out),
        }

    return model, optimizer, stages, inputs, step


def optimizer_update(model, optimizer):
    """A compiled update of every weight by a fixed gradient (dense, as the step's are)."""
    variables = model.trainable_variables
    gradients = [tf.fill(v.shape, 1e-6) for v in variables]

    @tf.function
    def update():
        optimizer.apply_gradients(zip(gradients, variables))
        return tf.constant(0.0)

    return update


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get(
        "ATTNCLI_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    parser.add_argument("--data", default=str(Path(shared) / "spa-eng" / "spa.txt"))
    parser.add_argument("--warmup", type=int, default=10, help="untimed batches")
    parser.add_argument("--steps", type=int, default=40, help="timed batches")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--bucketing", action="store_true")
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    batches = load_batches(args.data, VOCAB_SIZE, BATCH_SIZE, args.warmup + args.steps,
                           args.bucketing)
    example = batches[0][0]
    runs = {}  # (model, stage) -> list of (function, inputs per batch)
    for label, make in (("tutorial", tutorial), ("attncli", ours)):
        model, optimizer, stages, inputs, step = make(example)
        per_batch = [inputs(batch) for batch in batches]
        for stage, function in stages.items():
            runs[label, stage] = (function, [b[stage] for b in per_batch])
        runs[label, "optimizer update"] = (optimizer_update(model, optimizer),
                                           [()] * len(batches))
        runs[label, "whole step"] = (step, batches)
    names = list(runs)
    for name in names:
        function, arguments = runs[name]
        for args_of_batch in arguments[: args.warmup]:
            np.asarray(function(*args_of_batch))
    best = dict.fromkeys(names, 0.0)
    for index in range(args.warmup, len(batches)):
        turn = names[index % len(names):] + names[: index % len(names)]
        times = {name: [] for name in names}
        for _ in range(args.repeats):
            for name in turn:
                function, arguments = runs[name]
                start = time.perf_counter()
                result = function(*arguments[index])
                if isinstance(result, dict):
                    result = result["loss"]
                np.asarray(result)
                times[name].append(time.perf_counter() - start)
        for name in names:
            best[name] += min(times[name])
    timed = batches[args.warmup:]
    shapes = [tuple(b[0][0].shape) + tuple(b[0][1].shape[1:]) for b in timed]
    padding = 1 - sum(int(np.sum(b[1].numpy() != 0)) for b in timed) / sum(
        int(np.prod(b[1].shape)) for b in timed)
    print(f"{len(timed)} timed batches of {BATCH_SIZE} "
          f"({'bucketed' if args.bucketing else 'random'}), mean source length "
          f"{np.mean([s[1] for s in shapes]):.1f}, target {np.mean([s[2] for s in shapes]):.1f}, "
          f"{padding:.0%} of target slots padding; fastest of {args.repeats} runs per batch")
    print("| stage | TF tutorial ms/batch | share | attncli ms/batch | share | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    count = len(timed)
    for stage in STAGES + ("whole step",):
        base = best["tutorial", stage] * 1e3 / count
        own = best["attncli", stage] * 1e3 / count
        base_share = base / (best["tutorial", "whole step"] * 1e3 / count)
        own_share = own / (best["attncli", "whole step"] * 1e3 / count)
        print(f"| {stage} | {base:.1f} | {base_share:.0%} | {own:.1f} | {own_share:.0%} "
              f"| {base / own:.2f}x |")


if __name__ == "__main__":
    main()
