"""Decoding speed on Tatoeba Spanish→English: attncli's searches against the TF tutorial's loop.

Setting (docs/references.md, spa-eng): lines permuted by `numpy.random.default_rng(0)`, the last
2,000 are the validation sentences that are translated; the tutorial's normalisation; word
level; vocabularies of 5,000 (4 reserved + the 4,996 most frequent training words) per side;
batches of 64 sentences in corpus order; at most 50 target tokens.

Two models of the tutorial's size (embeddings and units 256, a bidirectional GRU encoder
whose directions are summed, a GRU decoder), each trained briefly from the same seed with
the same steps (Adam 1e-3, batch 64), so that they emit end-of-sentence and decoding can
stop early; speed is the measure here, not quality:

- attncli's `Seq2Seq` (Luong decoder, dot score), decoded with `compile_search`: one
  `tf.while_loop` per batch, greedy and beam 5 (alpha 0.6).
- the tutorial's model (one-head `MultiHeadAttention` on the decoder GRU's outputs, residual,
  LayerNorm), decoded by the tutorial's loop: a Python `for` over at most 50 steps calling
  the model on one token, eagerly (it breaks once every sentence has ended), and the same
  loop inside `tf.function` (unrolled 50 times, no early exit, as in the tutorial).

Every function is traced and run once on the first batch before it is timed; then each
batch goes to every function in turn, so the ratios of the timings, taken in one process,
hold even on a shared machine whose load changes.

    python -m benchmarks.bench_decoding [--train-steps 500] [--sentences 2000]
"""

import argparse
import contextlib
import functools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from attncli.search.decoding import compile_search  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.config.model import ModelConfig  # noqa: E402
from attncli.config.search import SearchConfig  # noqa: E402
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer  # noqa: E402
from attncli.data.vocabulary import END, PAD, START  # noqa: E402
from benchmarks.tutorial_model import MAX_LENGTH, UNITS, TutorialTranslator, tutorial_greedy  # noqa: E402

VOCABULARY_SIZE = 5000
BATCH_SIZE = 64


def read_split(path):
    """(train, valid) lists of (spanish, english): the permutation and split of docs/references.md."""
    lines = [line for line in path.read_text("utf-8").split("\n") if line]
    pairs = [tuple(reversed(line.split("\t")[:2])) for line in lines]
    order = np.random.default_rng(0).permutation(len(pairs))
    shuffled = [pairs[index] for index in order]
    return shuffled[:-2000], shuffled[-2000:]


def batches(ids, batch_size=BATCH_SIZE):
    """Dense int32 batches `(batch, longest)` of a ragged id tensor, in order."""
    return [
        ids[start : start + batch_size].to_tensor(default_value=PAD)
        for start in range(0, int(ids.nrows()), batch_size)
    ]


def training_data(source_ids, target_ids, seed=0):
    """Shuffled padded batches `((source, target_in), target_out)`, pairs of <= 50 tokens."""
    target_in = tf.concat([tf.fill([target_ids.nrows(), 1], START), target_ids], axis=1)
    target_out = tf.concat([target_ids, tf.fill([target_ids.nrows(), 1], END)], axis=1)
    keep = (source_ids.row_lengths() <= MAX_LENGTH) & (target_out.row_lengths() <= MAX_LENGTH)
    source_ids, target_in, target_out = (
        tf.ragged.boolean_mask(ids, keep) for ids in (source_ids, target_in, target_out)
    )
    dataset = tf.data.Dataset.from_tensor_slices((source_ids, target_in, target_out))
    dataset = dataset.shuffle(20000, seed=seed).repeat()
    dataset = dataset.ragged_batch(BATCH_SIZE)
    return dataset.map(
        lambda s, i, o: ((s.to_tensor(), i.to_tensor()), o.to_tensor())
    ).prefetch(2)


def train(model, dataset, steps, weights_path):
    """`steps` of Adam 1e-3 on the masked cross-entropy, or the weights saved by a past run."""
    if weights_path.is_file():
        model.load_weights(str(weights_path))
        print(f"  weights of a past run: {weights_path}", file=sys.stderr)
        return
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD),
    )
    start = time.perf_counter()
    report_every = min(50, steps)
    with contextlib.redirect_stdout(sys.stderr):  # Keras reports progress on stdout
        model.fit(dataset, steps_per_epoch=report_every, epochs=steps // report_every, verbose=2)
    print(f"  trained {steps} steps in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    model.save_weights(str(weights_path))


def time_interleaved(functions, source_batches):
    """Seconds each function spends on all batches, and its outputs.

    Each function is warmed up (traced) on the first batch; then every batch is given to
    each function in turn, so a change in the machine's load falls on all of them alike.
    """
    for label, function in functions.items():
        print(f"tracing: {label} ...", file=sys.stderr)
        function(source_batches[0])
    seconds = dict.fromkeys(functions, 0.0)
    outputs = {label: [] for label in functions}
    for source_ids in source_batches:
        for label, function in functions.items():
            start = time.perf_counter()
            token_ids = function(source_ids).numpy()
            seconds[label] += time.perf_counter() - start
            outputs[label].append(token_ids)
    return seconds, outputs


def best_token_ids(search, source_ids):
    """The token ids `(batch, T)` of the best hypothesis of `compile_search`'s search."""
    return search(source_ids).token_ids[:, 0, :]


def output_lengths(token_ids):
    """Tokens up to and including end-of-sentence, per row of `(batch, T)` ids.

    The tutorial's loop writes padding in place of end-of-sentence; attncli's searches
    write end-of-sentence then padding.
    """
    ids = token_ids
    ended = (ids == END) | (ids == PAD)
    first_end = np.where(ended.any(axis=1), ended.argmax(axis=1) + 1, ids.shape[1])
    return first_end


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-steps", type=int, default=500)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(
            os.environ.get(
                "ATTNCLI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
            )
        ),
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "runs" / "bench_decoding",
        help="where trained weights and vocabularies are kept for the next run",
    )
    args = parser.parse_args()
    keras.utils.set_random_seed(0)

    print("reading and tokenizing spa-eng ...", file=sys.stderr)
    train_pairs, valid_pairs = read_split(args.data / "spa-eng" / "spa.txt")
    valid_pairs = valid_pairs[: args.sentences]
    tokenizers = []
    for side, name in enumerate(("source", "target")):
        if (args.cache / f"{name}.vocab.txt").is_file():
            tokenizers.append(Tokenizer.load(args.cache, name))
            continue
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        texts = [pair[side] for pair in train_pairs]
        vocabulary = tokenizer.build_vocabulary(texts, max_size=VOCABULARY_SIZE)
        tokenizers.append(tokenizer.with_vocabulary(vocabulary))
        tokenizers[-1].save(args.cache, name)
    source_tokenizer, target_tokenizer = tokenizers
    train_source = source_tokenizer.encode(tf.constant([pair[0] for pair in train_pairs]))
    train_target = target_tokenizer.encode(tf.constant([pair[1] for pair in train_pairs]))
    valid_source = source_tokenizer.encode(tf.constant([pair[0] for pair in valid_pairs]))
    source_batches = batches(valid_source)
    dataset = training_data(train_source, train_target)

    ours = Seq2Seq(
        ModelConfig(
            source_vocab_size=VOCABULARY_SIZE, target_vocab_size=VOCABULARY_SIZE,
            embedding_dim=UNITS, units=UNITS, decoder="luong", score="dot",
        )
    )
    tutorial = TutorialTranslator(VOCABULARY_SIZE, VOCABULARY_SIZE)
    tutorial((source_batches[0], source_batches[0][:, :1]))
    for name, model in (("attncli", ours), ("tutorial", tutorial)):
        print(f"training the {name} model ({model.count_params() / 1e6:.2f} M parameters) ...",
              file=sys.stderr)
        weights_path = args.cache / f"{name}-{args.train_steps}.weights.h5"
        train(model, dataset, args.train_steps, weights_path)

    def tutorial_loop(source_ids):
        return tutorial_greedy(tutorial, source_ids)

    searches = {
        "tutorial loop, eager": tutorial_loop,
        "tutorial loop, tf.function": tf.function(
            tutorial_loop, input_signature=[tf.TensorSpec([None, None], tf.int32)]
        ),
    }
    for beam_size in (1, 5):
        search = compile_search(ours, SearchConfig(
            beam_size=beam_size, alpha=0.6, max_length_ratio=0.0, max_length_offset=MAX_LENGTH
        ))
        label = "attncli greedy" if beam_size == 1 else f"attncli beam {beam_size}"
        searches[label] = functools.partial(best_token_ids, search)

    seconds, outputs = time_interleaved(searches, source_batches)
    rows = []
    for label in searches:
        lengths = np.concatenate([output_lengths(ids) for ids in outputs[label]])
        rows.append((label, len(valid_pairs) / seconds[label], lengths.mean()))

    eager = rows[0][1]
    compiled = rows[1][1]
    print(f"\n{len(valid_pairs)} spa-eng validation sentences, batches of {BATCH_SIZE}, "
          f"at most {MAX_LENGTH} tokens, models trained {args.train_steps} steps\n")
    print(
        "| decoding | sentences/s | × tutorial eager | × tutorial tf.function "
        "| mean output tokens |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, speed, length in rows:
        print(f"| {label} | {speed:,.0f} | {speed / eager:.1f} | {speed / compiled:.2f} | "
              f"{length:.1f} |")


if __name__ == "__main__":
    main()
