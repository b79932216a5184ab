"""The TF tutorial's translate loop as a command: the baseline process of bench_translate_cli.

Reads one Spanish sentence per line from `--input`, translates batches of 64 in file order
with the tutorial's eager loop (`benchmarks.tutorial_model.tutorial_greedy`: one model call
per target token, at most 50) and prints one translation per line, as `attncli translate`
does: the whole process (TensorFlow's import, the model, tokenizing, decoding, writing) is
what the benchmark times.

    python -m benchmarks.tutorial_translate CACHE --input FILE [--steps N]

CACHE is `bench_translate_cli`'s folder: the tokenizers and `tutorial-N.weights.h5`.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from attncli.data.tokenization import Tokenizer  # noqa: E402
from benchmarks.tutorial_model import TutorialTranslator, tutorial_greedy  # noqa: E402

BATCH_SIZE = 64


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cache", type=Path)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--steps", type=int, required=True, help="training steps of the weights")
    args = parser.parse_args()
    source_tokenizer = Tokenizer.load(args.cache, "source")
    target_tokenizer = Tokenizer.load(args.cache, "target")
    model = TutorialTranslator(len(source_tokenizer.vocabulary), len(target_tokenizer.vocabulary))
    probe = tf.constant([[1]], tf.int32)
    model((probe, probe))
    model.load_weights(str(args.cache / f"tutorial-{args.steps}.weights.h5"))
    lines = args.input.read_text("utf-8").split("\n")[:-1]
    for start in range(0, len(lines), BATCH_SIZE):
        source_ids = source_tokenizer.encode(tf.constant(lines[start : start + BATCH_SIZE]))
        token_ids = tutorial_greedy(model, source_ids.to_tensor())
        texts = target_tokenizer.decode(token_ids).numpy()
        sys.stdout.write("".join(text.decode("utf-8") + "\n" for text in texts))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
