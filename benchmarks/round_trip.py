"""How much text comes back unchanged from tokenizing then detokenizing, per level.

For every line of the Tatoeba `spa.txt` (both columns) and of the Multi30k files
(train/val/test, German and English), as attncli's readers give them (ends stripped):

- SentencePiece: `decode(encode(line))` (through the ids, as a model's output is made)
  with a unigram model of 8,000 pieces learned as `attncli train` learns it (from the
  training side: spa.txt less the default run's 2,000 validation pairs; Multi30k's
  train file), compared with the line itself.
- WordPiece (`subword`) and `word`: `detokenize(tokenize(line))` by the shared
  detokenization rules, compared with the line and with its normalised form (NFC,
  whitespace runs collapsed): the WordPiece pieces glue back into exactly the words of
  the `word` split, so both levels give the same text.

    python -m benchmarks.round_trip [--data ../shared/data] [--vocab-size 8000]

Prints one table: lines, then lines unchanged for each tokenizer.
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from attncli.data.corpora import split_corpus  # noqa: E402
from attncli.data.readers import read_parallel, read_tsv  # noqa: E402
from attncli.data.tokenization import Tokenizer  # noqa: E402


def default_data() -> Path:
    if os.environ.get("ATTNCLI_SHARED_DATA"):
        return Path(os.environ["ATTNCLI_SHARED_DATA"])
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def texts_of(tensor):
    return [value.decode("utf-8") for value in tensor.numpy()]


def in_chunks(function, lines, size=4096):
    out = []
    for start in range(0, len(lines), size):
        out.extend(texts_of(function(tf.constant(lines[start : start + size]))))
    return out


def unchanged(lines, restored):
    return sum(a == b for a, b in zip(lines, restored))


def measure(name, train_lines, files, vocab_size):
    """Rows `(file, lines, sentencepiece, word raw, word normalised)` of one language."""
    learner = Tokenizer("sentencepiece")
    sentencepiece = learner.with_vocabulary(learner.build_vocabulary(train_lines, vocab_size))
    word = Tokenizer("word")
    rows = []
    for label, lines in files:
        restored = in_chunks(lambda t: sentencepiece.decode(sentencepiece.encode(t)), lines)
        words = in_chunks(lambda t: word.detokenize(word.tokenize(t)), lines)
        normalised = in_chunks(word.normalize, lines)
        rows.append((f"{name} {label}", len(lines), unchanged(lines, restored),
                     unchanged(lines, words), unchanged(normalised, words)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--vocab-size", type=int, default=8000)
    arguments = parser.parse_args()
    data = arguments.data
    rows = []
    spa = read_tsv(data / "spa-eng" / "spa.txt")  # sources English, targets Spanish
    train = split_corpus(spa, valid=2000, seed=0).train
    rows += measure("spa.txt English", train.sources, [("", spa.sources)], arguments.vocab_size)
    rows += measure("spa.txt Spanish", train.targets, [("", spa.targets)], arguments.vocab_size)
    multi30k = data / "multi30k"
    splits = {name: read_parallel(multi30k / f"{name}.de", multi30k / f"{name}.en")
              for name in ("train", "val", "test_2016_flickr")}
    for language, side in (("de", "sources"), ("en", "targets")):
        files = [(f"{name}.{language}", getattr(corpus, side)) for name, corpus in splits.items()]
        rows += measure("Multi30k", getattr(splits["train"], side), files, arguments.vocab_size)
    print("| text | lines | SentencePiece unchanged | WordPiece/word unchanged | "
          "WordPiece/word = normalised text |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, count, sentencepiece, raw, normalised in rows:
        print(f"| {label.strip()} | {count:,} | {sentencepiece:,} ({sentencepiece / count:.2%}) | "
              f"{raw:,} ({raw / count:.2%}) | {normalised:,} ({normalised / count:.2%}) |")


if __name__ == "__main__":
    main()
