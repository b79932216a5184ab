"""Training throughput of attncli's Seq2Seq against the TensorFlow tutorial's model.

One process, the same spa-eng batches for every model (the tutorial's normalisation,
word level, vocabularies of 5,000, batch 64, split as in docs/references.md, from
`attncli.data.pipeline`), each model trained for `--warmup` steps, then the `--steps` timed
batches in turns, each model running each batch `--repeats` times (the fastest run
counts), so machine noise falls on every model alike. Prints a table: target tokens/s
(non-pad target tokens, end of sentence included), the ratio to the baseline, the share
of the ceiling that this machine's measured matmul rate and the useful FLOPs per target
token allow, and the peak resident memory of a child process training each model alone.

    ATTNCLI_SHARED_DATA=../shared/data python -m benchmarks.bench_training
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from attncli.data.corpora import split_corpus  # noqa: E402
from attncli.data.readers import read_tsv  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.config.model import ModelConfig  # noqa: E402
from attncli.data.pipeline import make_dataset  # noqa: E402
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer  # noqa: E402
from attncli.training.optimizer_setup import make_optimizer  # noqa: E402
from attncli.training.steps import make_train_step  # noqa: E402
from attncli.config.training import TrainingConfig  # noqa: E402
from benchmarks.tutorial_model import TutorialTranslator, tutorial_train_step  # noqa: E402

# ---------------------------------------------------------------- data
def load_batches(path, vocab_size, batch_size, num_batches, bucketing):
    """Training batches of Spanish -> English, split and tokenised as docs/references.md says."""
    corpus = read_tsv(path, source_column=1, target_column=0)
    train = split_corpus(corpus, valid=2000, seed=0).train
    tokenizers = []
    for texts in (train.sources, train.targets):
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        vocabulary = tokenizer.build_vocabulary(texts, max_size=vocab_size)
        tokenizers.append(tokenizer.with_vocabulary(vocabulary))
    dataset = make_dataset(
        train, *tokenizers, batch_size=batch_size, bucketing=bucketing, seed=1
    )
    return list(dataset.take(num_batches))


# ---------------------------------------------------------------- measuring
def matmul_gflops(trials=5):
    """Best float32 matmul rate over square sizes 256..1024 and `trials` (GFLOP/s)."""
    best = 0.0
    for n in (256, 512, 1024):
        a = tf.random.normal((n, n))
        b = tf.random.normal((n, n))
        product = tf.function(lambda a, b: tf.matmul(a, b))
        product(a, b).numpy()
        repeats = max(3, int(5e9 / (2 * n**3)))
        for _ in range(trials):
            start = time.perf_counter()
            for _ in range(repeats):
                result = product(a, b)
            result.numpy()
            best = max(best, 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9)
    return best


def useful_flops(batch, config, cell_gates=3):
    """Training FLOPs of the non-pad work of a batch: 3 x (2 x multiply-adds).

    Counts the encoder (both directions, input and recurrent products), the decoder
    cell, attention (scores and context over the valid source), the combination
    layer and the output layer, per real token; embeddings and elementwise work are
    left out.
    """
    (source, target_in), target_out = batch
    source_lengths = np.sum(source.numpy() != 0, axis=1)
    target_lengths = np.sum(target_out.numpy() != 0, axis=1)
    e, u, v = config.embedding_dim, config.units, config.target_vocab_size
    directions = 2 if config.bidirectional else 1
    encoder = directions * cell_gates * u * (e + u)
    decoder = cell_gates * u * (e + u) + 2 * u * u + u * v
    macs = np.sum(source_lengths) * encoder + np.sum(target_lengths) * decoder
    macs += np.sum(target_lengths * source_lengths) * 2 * u
    return 6.0 * macs


def measure(steps, batches, warmup, repeats):
    """Per batch, every model in turn, `repeats` times; the fastest of the repeats counts.

    Other processes on a shared machine only ever slow a step down, so the minimum
    over repeats of the same step is the least noisy estimate of its cost, and
    interleaving the models batch by batch exposes them all to the same load.
    Returns `{name: (tokens/s from the minima, tokens/s from all runs)}`.
    """
    names = list(steps)
    for name in names:
        for batch in batches[:warmup]:
            steps[name](*batch)["loss"].numpy()
    best = {name: 0.0 for name in names}
    total = {name: 0.0 for name in names}
    tokens = 0
    for index, batch in enumerate(batches[warmup:]):
        tokens += int(np.sum(batch[1].numpy() != 0))
        turn = names[index % len(names):] + names[: index % len(names)]
        times = {name: [] for name in names}
        for _ in range(repeats):
            for name in turn:
                start = time.perf_counter()
                steps[name](*batch)["loss"].numpy()
                times[name].append(time.perf_counter() - start)
        for name in names:
            best[name] += min(times[name])
            total[name] += sum(times[name]) / repeats
    return {name: (tokens / best[name], tokens / total[name]) for name in names}


def peak_memory(name, batches_file):
    """Peak resident memory of a child process that builds and trains only `name`.

    The child reads the batches from `batches_file`, so the corpus and tokenizers
    are not part of its peak, and reports the kernel's high-water mark `VmHWM` (the
    peak RSS of its own address space; `ru_maxrss` would include the parent's RSS
    inherited through fork).
    """
    command = [
        sys.executable, "-m", "benchmarks.bench_training", "--memory-of", name,
        "--batches-file", batches_file,
    ]
    output = subprocess.run(
        command, check=True, capture_output=True, text=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    return int(output.split()[-1])


def own_peak_rss():
    """This process's peak resident set size in bytes (`VmHWM`)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


BASELINE = "TF tutorial (Keras built-ins)"
UNITS = 256
VOCAB_SIZE = 5000
BATCH_SIZE = 64
MEMORY_STEPS = 30  # steps each memory child trains
# name -> (ModelConfig options, TrainingConfig options); no label smoothing and no
# clipping, as the baseline has neither.
VARIANTS = {
    "luong general": (dict(decoder="luong", score="general"), {}),
    "luong general, logits on all": (dict(decoder="luong", score="general"),
                                     dict(logits_on="all")),
    "luong general, input feeding": (dict(decoder="luong", score="general",
                                          input_feeding=True), {}),
    "bahdanau additive": (dict(decoder="bahdanau", score="additive"), {}),
}


def build(name, example):
    """`(train_step, parameter count, ModelConfig)` of the baseline or a variant."""
    if name == BASELINE:
        model = TutorialTranslator(VOCAB_SIZE, VOCAB_SIZE, UNITS)
        model(example)
        config = ModelConfig(VOCAB_SIZE, VOCAB_SIZE, decoder="luong", score="general")
        return tutorial_train_step(model, keras.optimizers.Adam(1e-3)), model.count_params(), config
    options, training_options = VARIANTS[name]
    config = ModelConfig(VOCAB_SIZE, VOCAB_SIZE, embedding_dim=UNITS, units=UNITS, **options)
    training_config = TrainingConfig(label_smoothing=0.0, clip_norm=None, **training_options)
    model = Seq2Seq(config)
    step = make_train_step(model, make_optimizer(training_config), training_config)
    return step, model.count_params(), config


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get(
        "ATTNCLI_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    parser.add_argument("--data", default=str(Path(shared) / "spa-eng" / "spa.txt"),
                        help="spa.txt of the Tatoeba Spanish-English corpus")
    parser.add_argument("--warmup", type=int, default=50, help="untimed steps per model")
    parser.add_argument("--steps", type=int, default=100, help="timed batches")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each timed step per model; the fastest counts")
    parser.add_argument("--variants", default=";".join(VARIANTS),
                        help=f"separated by ;, from: {'; '.join(VARIANTS)}")
    parser.add_argument("--bucketing", action="store_true",
                        help="batch sentences of similar lengths (default: random batches)")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    parser.add_argument("--batches-file", help=argparse.SUPPRESS)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    if args.memory_of:
        with np.load(args.batches_file) as arrays:
            batches = [((tf.constant(arrays[f"s{i}"]), tf.constant(arrays[f"i{i}"])),
                        tf.constant(arrays[f"o{i}"])) for i in range(len(arrays.files) // 3)]
        step = build(args.memory_of, batches[0][0])[0]
        for batch in batches:
            step(*batch)["loss"].numpy()
        print(own_peak_rss())
        return
    batches = load_batches(args.data, VOCAB_SIZE, BATCH_SIZE, args.warmup + args.steps,
                           args.bucketing)
    names = [BASELINE] + args.variants.split(";")
    print("measuring the matmul ceiling ...", file=sys.stderr)
    gflops = matmul_gflops()
    built = {name: build(name, batches[0][0]) for name in names}
    print("timing ...", file=sys.stderr)
    results = measure({name: built[name][0] for name in names}, batches, args.warmup,
                      args.repeats)
    gflops = max(gflops, matmul_gflops())
    print("peak memory, one child process per model ...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as directory:
        batches_file = str(Path(directory) / "batches.npz")
        np.savez(batches_file, **{
            f"{key}{index}": tensor.numpy()
            for index, ((source, target_in), target_out) in enumerate(batches[:MEMORY_STEPS])
            for key, tensor in (("s", source), ("i", target_in), ("o", target_out))
        })
        memory = {name: peak_memory(name, batches_file) for name in names}
    timed = batches[args.warmup :]
    tokens = sum(int(np.sum(b[1].numpy() != 0)) for b in timed)
    slots = sum(int(np.prod(b[1].shape)) for b in timed)
    flops = sum(useful_flops(b, built[BASELINE][2]) for b in timed) / tokens
    ceiling = gflops * 1e9 / flops
    base_rate = results[BASELINE][0]
    kind = "bucketed" if args.bucketing else "random"
    print(f"{len(timed)} timed batches of {BATCH_SIZE} ({kind}"
          f"), {tokens} target tokens, {1 - tokens / slots:.0%} of target slots padding; "
          f"warmup {args.warmup} steps; fastest of {args.repeats} runs per step")
    print(f"matmul ceiling {gflops:.0f} GFLOP/s; useful work {flops / 1e6:.1f} MFLOP per "
          f"target token -> ceiling {ceiling:,.0f} target tokens/s")
    print("| model | params | target tokens/s | vs baseline | of ceiling "
          "| tokens/s (mean of runs) | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        rate, mean_rate = results[name]
        print(f"| {name} | {built[name][1] / 1e6:.2f} M | {rate:,.0f} | {rate / base_rate:.2f}x "
              f"| {rate / ceiling:.0%} | {mean_rate:,.0f} | {memory[name] / 2**30:.2f} GB |")


if __name__ == "__main__":
    main()
