"""Cost of a training step: the cascaded encoder against the recurrent model it extends.

One process, one configuration (`--config`, configs/multi30k-de-en.yaml by default): its
model as the config gives it, against the same model with `model.encoder: cascade` and
`--blocks` self-attention blocks on the recurrent layers (`model.encoder_blocks`; heads,
`feed_forward_dim`, `norm`, `dropout` and `attention_dropout` as the config sets or
defaults them; `--cascade-set model.KEY=VALUE` changes the cascade alone). Each model is
seeded with the config's `training.seed` and trained by `make_train_step` with the
config's training settings, on the same batches: the first of epoch 1 as `attncli
train` makes them (the config's tokenizers, learned here from its training side or
read from `--cache`, `max_length`, `tokens_per_batch`, bucketing). After `--warmup`
untimed steps each, `--rounds` rounds of `--steps-per-block` steps per model, every
round on new batches and in the order of the last one reversed. Measured: process CPU
time per step (user + sys of this process, `time.process_time`), which other
processes on the core do not add to, and wall time; target tokens per CPU second
(non-pad target tokens, end of sentence included); parameters; the cascade's CPU time
per step over the recurrent model's, overall and per round. Pin the process to one core
(`taskset -c 0`), so that the CPU time is that of one core's work.

    python -m benchmarks.bench_cascade [--blocks 2] [--warmup 20] [--steps-per-block 50]
        [--rounds 4] [--data ../shared/data] [--cache DIR]
    python -m benchmarks.bench_cascade --cascade-set model.encoder_norm_gain=0.0625
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from attncli.config.run import load_run_config  # noqa: E402
from attncli.config.schema import to_mapping  # noqa: E402
from attncli.data.pipeline import encode_pairs, epoch_batches  # noqa: E402
from attncli.data.sources import read_splits  # noqa: E402
from attncli.data.tokenization import Tokenizer, learn_tokenizer  # noqa: E402
from attncli.errors import AttncliError  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.training.builder import dtype_policy  # noqa: E402
from attncli.training.precision import resolve  # noqa: E402
from attncli.training.optimizer_setup import make_optimizer  # noqa: E402
from attncli.training.steps import make_train_step  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SIDES = ("source", "target")
# The settings the cached tokenizers were learned under, beside them in `--cache`.
CACHE_KEY = "data.json"


def tokenizers_of(data, splits, data_dir, cache):
    """The config's two tokenizers: read from `cache` when they were learned there under
    the same data settings, else learned from the training side (and saved to `cache`)."""
    key = json.dumps(to_mapping(data), sort_keys=True)
    if cache is not None and (cache / CACHE_KEY).is_file() \
            and (cache / CACHE_KEY).read_text("utf-8") == key:
        return tuple(Tokenizer.load(cache, name) for name in SIDES)
    print("learning the vocabularies ...", file=sys.stderr)
    train = splits.train
    if data.shared_vocab:
        shared = learn_tokenizer(
            data.source, list(train.sources) + list(train.targets), data_dir)
        tokenizers = (shared, shared)
    else:
        tokenizers = (learn_tokenizer(data.source, train.sources, data_dir),
                      learn_tokenizer(data.target, train.targets, data_dir))
    if cache is not None:
        for name, tokenizer in zip(SIDES, tokenizers):
            tokenizer.save(cache, name)
        (cache / CACHE_KEY).write_text(key, "utf-8")
    return tokenizers


def first_batches(config, data_dir, cache, count):
    """The first `count` training batches of epoch 1 and the two vocabulary sizes."""
    data = config.data
    splits = read_splits(data, data_dir)
    tokenizers = tokenizers_of(data, splits, data_dir, cache)
    encoded = encode_pairs(splits.train, *tokenizers, max_length=data.max_length,
                           source_end=data.source_end)
    batches = list(epoch_batches(
        encoded, 0, batch_size=data.batch_size, tokens_per_batch=data.tokens_per_batch,
        bucketing=data.bucketing, seed=config.training.seed,
    ).take(count))
    if len(batches) < count:
        raise AttncliError(f"epoch 1 has {len(batches)} batches, fewer than the {count} "
                           "that --warmup, --steps-per-block and --rounds ask for")
    return batches, [len(tokenizer.vocabulary) for tokenizer in tokenizers]


def train_step(config, sizes):
    """`(compiled training step, parameter count)` of `config`'s model."""
    training = config.training
    keras.utils.set_random_seed(training.seed)
    with dtype_policy(resolve(training.precision)[0]):
        model = Seq2Seq(config.model.sized(*sizes))
    return make_train_step(model, make_optimizer(training), training), model.count_params()


def run(step, batches):
    for inputs, target_out in batches:
        float(step(inputs, target_out)["loss"])


def measure(steps, batches, warmup, steps_per_block, rounds):
    """Per model: CPU and wall seconds of each round; and the target tokens timed."""
    for name, step in steps.items():
        print(f"warming up {name} ...", file=sys.stderr)
        run(step, batches[:warmup])
    cpu = {name: [] for name in steps}
    wall = {name: [] for name in steps}
    tokens = 0
    order = list(steps)
    for index in range(rounds):
        start = warmup + index * steps_per_block
        chosen = batches[start: start + steps_per_block]
        tokens += sum(int(np.sum(target_out.numpy() != 0)) for _, target_out in chosen)
        for name in order:
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            run(steps[name], chosen)
            cpu[name].append(time.process_time() - cpu_start)
            wall[name].append(time.perf_counter() - wall_start)
        print(f"round {index + 1}/{rounds}: " + ", ".join(
            f"{name} {cpu[name][-1] / steps_per_block:.3f}" for name in order)
            + " CPU s/step", file=sys.stderr)
        order.reverse()
    return cpu, wall, tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "multi30k-de-en.yaml",
                        help="the run configuration whose model, data and training are used")
    parser.add_argument("--data", type=Path, default=Path(shared),
                        help="folder the config's data paths are relative to")
    parser.add_argument("--cache", type=Path,
                        help="folder keeping the learned tokenizers for the next run")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY.PATH=VALUE", help="override the config (both models)")
    parser.add_argument("--cascade-set", dest="cascade_overrides", action="append",
                        default=[], metavar="model.KEY=VALUE",
                        help="override the cascade's model settings only")
    parser.add_argument("--blocks", type=int, default=2,
                        help="the cascade's self-attention blocks (model.encoder_blocks)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps per model")
    parser.add_argument("--steps-per-block", type=int, default=50,
                        help="timed steps per model in each round")
    parser.add_argument("--rounds", type=int, default=4,
                        help="timed rounds, on new batches, the order alternating")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    args = parser.parse_args()
    for override in args.cascade_overrides:
        if not override.startswith("model."):
            parser.error(f"--cascade-set {override}: expected model.KEY=VALUE")
    if args.warmup < 0 or args.steps_per_block < 1 or args.rounds < 1 or args.blocks < 1:
        parser.error("--warmup must be >= 0; --steps-per-block, --rounds and --blocks >= 1")
    try:
        report(args)
    except AttncliError as error:
        if args.debug:
            raise
        # The data errors name attncli's option; this script's is --data.
        print(f"error: {str(error).replace('--data-dir', '--data')}", file=sys.stderr)
        sys.exit(2)


def report(args):
    recurrent = load_run_config(args.config, args.overrides)
    cascade = load_run_config(args.config, [
        *args.overrides, "model.encoder=cascade", f"model.encoder_blocks={args.blocks}",
        *args.cascade_overrides,
    ])
    count = args.warmup + args.steps_per_block * args.rounds
    batches, sizes = first_batches(recurrent, args.data, args.cache, count)
    names = {
        f"`encoder: {recurrent.model.encoder}`": recurrent,
        ", ".join([f"`encoder: cascade`, {args.blocks} blocks",
                   *(text.removeprefix("model.") for text in args.cascade_overrides)]): cascade,
    }
    built = {name: train_step(config, sizes) for name, config in names.items()}
    cpu, wall, tokens = measure({name: step for name, (step, _) in built.items()}, batches,
                                args.warmup, args.steps_per_block, args.rounds)

    steps = args.steps_per_block * args.rounds
    baseline, other = names
    model = cascade.model
    print(f"{args.config.name}: {count} batches of epoch 1 (vocabularies {sizes[0]:,} / "
          f"{sizes[1]:,}); the cascade: {args.blocks} blocks of {model.model_dim}, "
          f"{model.heads} heads, feed-forward {model.inner_dim}, "
          f"norm {model.norm}, attention_dropout {model.attention_dropout}; "
          f"{args.warmup} untimed steps each, then {args.rounds} rounds of "
          f"{args.steps_per_block} steps, order alternating; {tokens:,} target tokens timed")
    print("| model | parameters | steps | CPU s / step | wall s / step "
          "| target tokens / CPU s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        seconds = sum(cpu[name])
        print(f"| {name} | {built[name][1]:,} | {steps} | {seconds / steps:.3f} "
              f"| {sum(wall[name]) / steps:.3f} | {tokens / seconds:,.0f} "
              f"| {seconds / sum(cpu[baseline]):.2f} |")
    rounds = [mine / theirs for mine, theirs in zip(cpu[other], cpu[baseline])]
    print(f"CPU per step, cascade / recurrent: {sum(cpu[other]) / sum(cpu[baseline]):.3f}; "
          f"by round: {', '.join(f'{ratio:.3f}' for ratio in rounds)}")


if __name__ == "__main__":
    main()
