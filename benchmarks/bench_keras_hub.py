"""attncli's self-attention blocks against keras-hub's, same size, same batches, same steps.

Builds (a) attncli's Transformer (`Seq2Seq` with `TransformerEncoder` and
`TransformerDecoder`) from a config's model section and (b) the same-size model from
`keras_hub.layers.TokenAndPositionEmbedding`, `TransformerEncoder` and
`TransformerDecoder` (`normalize_first=True` for `norm: pre`, plus a final LayerNorm as
attncli's pre-norm stacks have; dropout on the embeddings as attncli's; the same output
`Dense`), and trains each with attncli's own train step (`make_train_step`: label-smoothed
cross-entropy over the non-pad target tokens, `make_optimizer`'s Adam, schedule and
clipping, the same seed) on the same real batches from attncli's data pipeline, the two
models taking turns batch by batch. Prints target tokens/s of each over the steps after
`--untimed` (tracing), the ratio, the training loss (mean of the 100 steps before each
report) and the validation loss at the end.

Variants of attncli's model (`--variant NAME=key=value,...`) take model-section overrides,
e.g. `--variant learned=position_encoding=learned`, or `embedding_stddev=0.088` (token
embeddings drawn from N(0, 0.088^2), d^-0.5 for d = 128); `--hub-option` changes keras-hub's
(e.g. `layer_norm_epsilon=1e-6`).

keras-hub is not a dependency of attncli. Installed for this benchmark without its
dependencies, so that TensorFlow, Keras and tensorflow-text stay as they are:

    pip install keras-hub --no-deps && pip install tokenizers --no-deps

    flock /work/core0.lock taskset -c 0 python -m benchmarks.bench_keras_hub \\
        --data-dir ../shared/data --steps 1000
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from attncli.config.run import run_config_from_mapping  # noqa: E402
from attncli.config.yaml_files import apply_overrides, load_yaml  # noqa: E402
from attncli.data.pipeline import make_dataset  # noqa: E402
from attncli.data.sources import read_splits  # noqa: E402
from attncli.data.tokenization import learn_tokenizer  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.training.losses import smoothed_cross_entropy  # noqa: E402
from attncli.training.optimizer_setup import make_optimizer  # noqa: E402
from attncli.training.steps import make_train_step  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class HubDecoderHead:
    """What attncli's train step reads from a decoder: its `output_layer`."""

    def __init__(self, output_layer):
        self.output_layer = output_layer


class KerasHubTransformer(keras.Model):
    """The encoder-decoder of keras-hub's layers, shaped like attncli's `Seq2Seq`.

        x_0 = Dropout(E[w_t] + P[t])          TokenAndPositionEmbedding (learned positions)
        x_n = keras_hub TransformerEncoder/Decoder_n(x_{n-1})   normalize_first for pre-norm
        features = LayerNorm(x_N) (pre-norm), logits = Dense(features)

    `features(inputs, training)` returns `(features, None)` and `decoder.output_layer`
    is the output `Dense`, which is all `attncli.training.steps` needs.
    """

    def __init__(self, config, max_positions=256, **hub_options):
        super().__init__()
        import keras_hub

        pre = config.norm == "pre"
        epsilon = hub_options.pop("layer_norm_epsilon", 1e-5)
        block = dict(
            intermediate_dim=config.inner_dim, num_heads=config.heads,
            dropout=config.dropout, activation=config.activation,
            layer_norm_epsilon=epsilon, normalize_first=pre, **hub_options,
        )
        d = config.model_dim
        self.source_embedding = keras_hub.layers.TokenAndPositionEmbedding(
            config.source_vocab_size, max_positions, d, name="source_embedding")
        self.target_embedding = keras_hub.layers.TokenAndPositionEmbedding(
            config.target_vocab_size, max_positions, d, name="target_embedding")
        self.embedding_dropout = keras.layers.Dropout(config.dropout)
        self.encoder_blocks = [keras_hub.layers.TransformerEncoder(**block, name=f"enc_{i}")
                               for i in range(config.encoder_layers)]
        self.decoder_blocks = [keras_hub.layers.TransformerDecoder(**block, name=f"dec_{i}")
                               for i in range(config.decoder_layers)]
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=epsilon) if pre else None
        self.decoder_norm = keras.layers.LayerNormalization(epsilon=epsilon) if pre else None
        self.output_projection = keras.layers.Dense(config.target_vocab_size, name="output")
        self.decoder = HubDecoderHead(self.output_projection)
        source = np.ones((1, 3), "int32")
        self((source, source))

    def features(self, inputs, training=None, stepwise=False):
        source_ids, target_in_ids = inputs
        source_mask = source_ids != 0
        target_mask = target_in_ids != 0
        x = self.embedding_dropout(self.source_embedding(source_ids), training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=source_mask, training=training)
        memory = x if self.encoder_norm is None else self.encoder_norm(x)
        y = self.embedding_dropout(self.target_embedding(target_in_ids), training=training)
        for block in self.decoder_blocks:
            y = block(y, memory, decoder_padding_mask=target_mask,
                      encoder_padding_mask=source_mask, training=training)
        return (y if self.decoder_norm is None else self.decoder_norm(y)), None

    def call(self, inputs, training=None):
        return self.output_projection(self.features(inputs, training=training)[0])


def attncli_variant(model_config, options):
    """attncli's `Seq2Seq` with model-section overrides; `embedding_stddev` (not a config
    key) redraws both token embeddings from N(0, stddev^2), e.g. d^-0.5 as in
    tensor2tensor, so that sqrt(d) E[w] has unit variance."""
    import dataclasses

    stddev = options.pop("embedding_stddev", None)
    model = Seq2Seq(dataclasses.replace(model_config, **options))
    if stddev is not None:
        for stack in (model.encoder, model.decoder):
            table = stack.embedding.token_embedding.embeddings
            table.assign(keras.random.normal(table.shape, stddev=stddev))
    return model


def load_config(data_config, model_config, overrides):
    """The data section of `data_config`, model and training sections of `model_config`."""
    mapping = load_yaml(data_config)
    other = load_yaml(model_config)
    mapping["model"] = other["model"]
    mapping["training"] = other["training"]
    apply_overrides(mapping, overrides)
    return run_config_from_mapping(mapping)


def load_batches(config, data_dir, steps):
    """`steps` training batches and all validation batches, through attncli's pipeline."""
    data = config.data
    splits = read_splits(data, data_dir)
    source = learn_tokenizer(data.source, splits.train.sources)
    target = learn_tokenizer(data.target, splits.train.targets)
    train = make_dataset(
        splits.train, source, target, batch_size=data.batch_size,
        tokens_per_batch=data.tokens_per_batch, max_length=data.max_length,
        bucketing=data.bucketing, seed=config.training.seed,
    )
    batches = []
    while len(batches) < steps:  # epochs after the first are reshuffled
        batches.extend(train.take(steps - len(batches)))
    valid = make_dataset(
        splits.valid, source, target, batch_size=data.batch_size,
        tokens_per_batch=data.tokens_per_batch, max_length=None, bucketing=data.bucketing,
        shuffle=False,
    )
    return batches, list(valid), len(source.vocabulary), len(target.vocabulary)


def validation_loss(model, batches, label_smoothing):
    """Mean smoothed and plain cross-entropy over the non-pad target tokens."""
    smoothed = plain = tokens = 0.0
    for (source, target_in), target_out in batches:
        logits = model((source, target_in), training=False)
        mask = tf.not_equal(target_out, 0)
        logits, labels = tf.boolean_mask(logits, mask), tf.boolean_mask(target_out, mask)
        smoothed += float(tf.reduce_sum(smoothed_cross_entropy(logits, labels, label_smoothing)))
        plain += float(tf.reduce_sum(smoothed_cross_entropy(logits, labels)))
        tokens += int(tf.size(labels))
    return smoothed / tokens, plain / tokens


def parse_options(text):
    options = {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=", 1)
        options[key] = load_value(value)
    return options


def load_value(value):
    import yaml
    return yaml.safe_load(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-config", default=str(ROOT / "configs/multi30k-de-en.yaml"),
                        help="whose data section gives the batches")
    parser.add_argument("--model-config", default=str(ROOT / "configs/transformer.yaml"),
                        help="whose model and training sections give the models and steps")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--set", action="append", default=[],
                        help="config override key.path=value (repeatable)")
    parser.add_argument("--steps", type=int, default=1000, help="training steps per model")
    parser.add_argument("--untimed", type=int, default=20, help="first steps not timed")
    parser.add_argument("--report-every", type=int, default=100)
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=key=value,key=value: another attncli model")
    parser.add_argument("--hub-option", default="", help="key=value,... for keras-hub blocks")
    parser.add_argument("--no-hub", action="store_true", help="attncli's models only")
    args = parser.parse_args()

    config = load_config(args.data_config, args.model_config, args.set)
    training = config.training
    start = time.perf_counter()
    batches, valid, source_size, target_size = load_batches(config, args.data_dir, args.steps)
    print(f"data: {len(batches)} batches, {len(valid)} validation batches, vocabularies "
          f"{source_size} / {target_size} ({time.perf_counter() - start:.0f} s)",
          file=sys.stderr)
    model_config = config.model.sized(source_size, target_size)

    builders = {"attncli": lambda: Seq2Seq(model_config)}
    for text in args.variant:
        name, options = text.split("=", 1)
        builders[f"attncli {name}"] = (
            lambda options=parse_options(options): attncli_variant(model_config, options))
    if not args.no_hub:
        builders["keras-hub"] = lambda: KerasHubTransformer(
            model_config, max_positions=model_config.max_positions,
            **parse_options(args.hub_option))
    models, steps = {}, {}
    for name, build in builders.items():
        keras.utils.set_random_seed(training.seed)
        models[name] = build()
        steps[name] = make_train_step(models[name], make_optimizer(training), training)
    names = list(models)

    losses = {name: [] for name in names}
    seconds = {name: 0.0 for name in names}
    tokens = 0
    for index, ((source, target_in), target_out) in enumerate(batches):
        if index >= args.untimed:
            tokens += int(np.sum(target_out.numpy() != 0))
        turn = names[index % len(names):] + names[: index % len(names)]
        for name in turn:
            begin = time.perf_counter()
            loss = float(steps[name]((source, target_in), target_out)["loss"])
            if index >= args.untimed:
                seconds[name] += time.perf_counter() - begin
            losses[name].append(loss)
        if (index + 1) % args.report_every == 0:
            print(f"step {index + 1}: " + ", ".join(
                f"{name} {np.mean(losses[name][-args.report_every:]):.3f}" for name in names),
                file=sys.stderr, flush=True)
    validation = {name: validation_loss(models[name], valid, training.label_smoothing)
                  for name in names}

    base = names[0]
    rate = {name: tokens / seconds[name] for name in names}
    print(f"{len(batches)} steps on {config.data.train or config.data.format} batches "
          f"({tokens} target tokens timed after {args.untimed} untimed steps); "
          f"d_model {model_config.model_dim}, {model_config.encoder_layers}+"
          f"{model_config.decoder_layers} blocks, {model_config.heads} heads, ff "
          f"{model_config.inner_dim}, dropout {model_config.dropout}, norm "
          f"{model_config.norm}; lr {training.learning_rate} {training.schedule} warmup "
          f"{training.warmup_steps}, label smoothing {training.label_smoothing}, seed "
          f"{training.seed}")
    print("| model | params | target tokens/s | vs " + base + " | "
          + " | ".join(f"loss @{step}" for step in range(
              args.report_every, len(batches) + 1, args.report_every))
          + " | valid loss (smoothed / NLL) |")
    print("| --- " * (6 + len(batches) // args.report_every) + "|")
    for name in names:
        curve = " | ".join(
            f"{np.mean(losses[name][step - args.report_every:step]):.3f}"
            for step in range(args.report_every, len(batches) + 1, args.report_every))
        smoothed, plain = validation[name]
        print(f"| {name} | {models[name].count_params() / 1e6:.2f} M | {rate[name]:,.0f} | "
              f"{rate[name] / rate[base]:.2f}x | {curve} | {smoothed:.3f} / {plain:.3f} |")


if __name__ == "__main__":
    main()
