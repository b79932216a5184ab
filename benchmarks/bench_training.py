"""Training throughput of attncli's Seq2Seq against the TensorFlow tutorial's model.

One process, the same spa-eng batches for every model (the tutorial's normalisation,
word level, vocabularies of 5,000, batch 64, split as in BENCHMARKS.md), each model
trained for `--warmup` steps and then timed for `--steps` steps, in turns (round robin
over `--rounds`, so machine noise falls on every model alike). Prints a table: target
tokens/s (non-pad target tokens, end-of-sentence included), the ratio to the baseline,
useful FLOPs per target token, the share of this machine's measured matmul ceiling, and
the peak resident memory sampled while each model trained.

    python benchmarks/bench_training.py --data /work/shared/data/spa-eng/spa.txt
"""

import argparse
import collections
import os
import re
import sys
import threading
import time
import unicodedata
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncli.model import Seq2Seq  # noqa: E402
from attncli.model_config import ModelConfig  # noqa: E402
from attncli.training import make_optimizer, make_train_step  # noqa: E402
from attncli.training_config import TrainingConfig  # noqa: E402

PAD, UNK, BOS, EOS = 0, 1, 2, 3


# ---------------------------------------------------------------- data
def tutorial_tokens(text):
    """The tutorial's `tf_lower_and_split_punct`: NFKD, lower, keep `a-z .?!,¿`."""
    text = unicodedata.normalize("NFKD", text).lower()
    text = re.sub(r"[^ a-z.?!,¿]", "", text)
    text = re.sub(r"([.?!,¿])", r" \1 ", text)
    return text.split()


def load_batches(path, vocab_size, batch_size, num_batches, seed):
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    order = np.random.default_rng(0).permutation(len(lines))
    train = [lines[i].split("\t") for i in order[:-2000]]
    # spa.txt is "english<TAB>spanish"; we translate Spanish -> English.
    pairs = [(tutorial_tokens(spa), tutorial_tokens(eng)) for eng, spa, *_ in train]

    def vocabulary(side):
        counts = collections.Counter(token for pair in pairs for token in pair[side])
        words = [word for word, _ in counts.most_common(vocab_size - 4)]
        return {word: index + 4 for index, word in enumerate(words)}

    source_vocab, target_vocab = vocabulary(0), vocabulary(1)
    picked = np.random.default_rng(seed).permutation(len(pairs))[: batch_size * num_batches]
    batches = []
    for start in range(0, len(picked), batch_size):
        chunk = [pairs[i] for i in picked[start : start + batch_size]]
        source = [[source_vocab.get(t, UNK) for t in s] for s, _ in chunk]
        target = [[target_vocab.get(t, UNK) for t in t_] for _, t_ in chunk]
        source_ids = pad([s for s in source])
        target_in = pad([[BOS] + t for t in target])
        target_out = pad([t + [EOS] for t in target])
        batches.append(((source_ids, target_in), target_out))
    return batches


def pad(sequences):
    width = max(len(s) for s in sequences)
    array = np.zeros((len(sequences), width), dtype=np.int32)
    for row, sequence in enumerate(sequences):
        array[row, : len(sequence)] = sequence
    return tf.constant(array)


# ---------------------------------------------------------------- baseline
class TutorialTranslator(keras.Model):
    """The tutorial's model from Keras built-ins: bi-GRU summed, GRU, one-head MHA."""

    def __init__(self, vocab_size, units):
        super().__init__()
        self.source_embedding = keras.layers.Embedding(vocab_size, units, mask_zero=True)
        self.encoder_rnn = keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True), merge_mode="sum"
        )
        self.target_embedding = keras.layers.Embedding(vocab_size, units, mask_zero=True)
        self.decoder_rnn = keras.layers.GRU(units, return_sequences=True)
        self.attention = keras.layers.MultiHeadAttention(key_dim=units, num_heads=1)
        self.layernorm = keras.layers.LayerNormalization()
        self.add = keras.layers.Add()
        self.output_layer = keras.layers.Dense(vocab_size)

    def call(self, inputs):
        source_ids, target_in = inputs
        context = self.encoder_rnn(self.source_embedding(source_ids))
        x = self.decoder_rnn(self.target_embedding(target_in))
        attended = self.attention(
            query=x, value=context,
            attention_mask=tf.logical_and(
                tf.not_equal(target_in, 0)[:, :, None], tf.not_equal(source_ids, 0)[:, None, :]
            ),
        )
        x = self.layernorm(self.add([x, attended]))
        return self.output_layer(x)


def baseline_step(model, optimizer):
    signature = (
        (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32)),
        tf.TensorSpec((None, None), tf.int32),
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    @tf.function(input_signature=signature)
    def step(inputs, target_out):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            mask = tf.cast(target_out != 0, "float32")
            loss = tf.reduce_sum(loss_fn(target_out, logits) * mask) / tf.reduce_sum(mask)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return {"loss": loss, "tokens": tf.reduce_sum(tf.cast(mask, "int32"))}

    return step


# ---------------------------------------------------------------- measuring
class PeakRSS:
    """Samples this process's resident set size (VmRSS) every 20 ms."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def current():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            time.sleep(0.02)

    def __enter__(self):
        self.peak = self.current()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def matmul_gflops():
    """Best float32 matmul rate over square sizes 256..1024 (GFLOP/s)."""
    best = 0.0
    for n in (256, 512, 1024):
        a = tf.random.normal((n, n))
        b = tf.random.normal((n, n))
        product = tf.function(lambda a, b: tf.matmul(a, b))
        product(a, b).numpy()
        repeats = max(3, int(2e10 / (2 * n**3)))
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


def measure(steps, batches, warmup, timed, rounds):
    """Round-robin timing; returns {name: (tokens/s, peak rss)}."""
    names = list(steps)
    for name in names:
        with PeakRSS():
            for batch in batches[:warmup]:
                steps[name](*batch)["loss"].numpy()
    tokens = {name: 0 for name in names}
    seconds = {name: 0.0 for name in names}
    peaks = {name: 0 for name in names}
    chunk = batches[warmup : warmup + timed]
    per_round = max(1, len(chunk) // rounds)
    for index in range(rounds):
        part = chunk[index * per_round : (index + 1) * per_round]
        for name in names:
            with PeakRSS() as rss:
                start = time.perf_counter()
                count = 0
                for batch in part:
                    count += int(steps[name](*batch)["tokens"])
                seconds[name] += time.perf_counter() - start
            tokens[name] += count
            peaks[name] = max(peaks[name], rss.peak)
    return {name: (tokens[name] / seconds[name], peaks[name]) for name in names}


VARIANTS = {
    "luong general": dict(decoder="luong", score="general"),
    "luong dot": dict(decoder="luong", score="dot"),
    "luong general, input feeding": dict(decoder="luong", score="general", input_feeding=True),
    "bahdanau additive": dict(decoder="bahdanau", score="additive"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get(
        "ATTNCLI_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    parser.add_argument("--data", default=str(Path(shared) / "spa-eng" / "spa.txt"),
                        help="spa.txt of the Tatoeba Spanish-English corpus")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="luong general,bahdanau additive",
                        help=f"comma-separated, from: {', '.join(VARIANTS)}")
    parser.add_argument("--also-logits-all", action="store_true",
                        help="also time luong general with logits on every position")
    parser.add_argument("--also-xla", action="store_true",
                        help="also time luong general compiled with XLA (logits on all)")
    args = parser.parse_args()

    vocab_size, units, batch_size = 5000, 256, 64
    batches = load_batches(args.data, vocab_size, batch_size, args.warmup + args.steps, seed=1)
    keras.utils.set_random_seed(0)
    print("measuring the matmul ceiling ...", file=sys.stderr)
    gflops = matmul_gflops()

    steps, configs, params = {}, {}, {}
    baseline = TutorialTranslator(vocab_size, units)
    baseline(batches[0][0])
    steps["baseline (TF tutorial)"] = baseline_step(baseline, keras.optimizers.Adam(1e-3))
    params["baseline (TF tutorial)"] = baseline.count_params()
    configs["baseline (TF tutorial)"] = None
    variants = [
        (name, VARIANTS[name], TrainingConfig(label_smoothing=0.0, clip_norm=None))
        for name in args.variants.split(",")
    ]
    if args.also_logits_all:
        variants.append(("luong general, logits on all", VARIANTS["luong dot"],
                         TrainingConfig(label_smoothing=0.0, clip_norm=None, logits_on="all")))
    if args.also_xla:
        variants.append(("luong general, XLA", VARIANTS["luong dot"],
                         TrainingConfig(label_smoothing=0.0, clip_norm=None, logits_on="all",
                                        jit_compile=True)))
    for name, options, training_config in variants:
        config = ModelConfig(vocab_size, vocab_size, embedding_dim=units, units=units, **options)
        model = Seq2Seq(config)
        steps[name] = make_train_step(model, make_optimizer(training_config), training_config)
        params[name] = model.count_params()
        configs[name] = config

    results = measure(steps, batches, args.warmup, args.steps, args.rounds)
    base_rate = results["baseline (TF tutorial)"][0]
    timed = batches[args.warmup :]
    total_tokens = sum(int(np.sum(b[1].numpy() != 0)) for b in timed)
    print(f"matmul ceiling {gflops:.0f} GFLOP/s; {len(timed)} timed batches of {batch_size}, "
          f"{total_tokens} target tokens; warmup {args.warmup} steps")
    print(f"| model | params | target tokens/s | vs baseline | MFLOP/token | "
          f"ceiling tokens/s | of ceiling | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (rate, peak) in results.items():
        config = configs[name] or ModelConfig(vocab_size, vocab_size)
        flops = sum(useful_flops(b, config) for b in timed) / total_tokens
        ceiling = gflops * 1e9 / flops
        print(f"| {name} | {params[name] / 1e6:.2f} M | {rate:,.0f} | {rate / base_rate:.2f}x | "
              f"{flops / 1e6:.1f} | {ceiling:,.0f} | {rate / ceiling:.0%} | "
              f"{peak / 2**30:.2f} GB |")


if __name__ == "__main__":
    main()
