"""What one vocabulary for both sides gives on Multi30k German → English.

Learns the WordPiece vocabularies of `configs/multi30k-de-en.yaml` (8,000 tokens, cased,
NFC) from the training text, one per side and one shared (`data.shared_vocab: true`),
and prints one table: how many tokens the two separate vocabularies have in common, how
many pieces a sentence takes and how often a piece is unknown with each vocabulary, and the
trainable parameters of the config's model untied, with `tie_embeddings: target` and with
`all`.

    python -m benchmarks.shared_vocabulary [--data ../shared/data]
"""

import argparse
import dataclasses
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from attncli.config.run import load_run_config  # noqa: E402
from attncli.data.readers import read_parallel  # noqa: E402
from attncli.data.tokenization import learn_tokenizer  # noqa: E402
from attncli.data.vocabulary import UNK  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "multi30k-de-en.yaml"


def default_data() -> Path:
    if os.environ.get("ATTNCLI_SHARED_DATA"):
        return Path(os.environ["ATTNCLI_SHARED_DATA"])
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pieces(tokenizer, texts):
    """(pieces per sentence, share of unknown pieces) of `texts`."""
    ids = tokenizer.encode(tf.constant(texts)).flat_values.numpy()
    return len(ids) / len(texts), float((ids == UNK).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data())
    args = parser.parse_args()
    config = load_run_config(CONFIG)
    train = read_parallel(args.data / "multi30k" / "train.de", args.data / "multi30k" / "train.en")
    valid = read_parallel(args.data / "multi30k" / "val.de", args.data / "multi30k" / "val.en")
    german = learn_tokenizer(config.data.source, train.sources)
    english = learn_tokenizer(config.data.target, train.targets)
    shared = learn_tokenizer(config.data.source, list(train.sources) + list(train.targets))
    common = set(german.vocabulary.tokens) & set(english.vocabulary.tokens)
    print(f"separate vocabularies: {len(german.vocabulary)} German, {len(english.vocabulary)} "
          f"English, {len(common)} tokens in both (4 reserved)")
    print(f"shared vocabulary: {len(shared.vocabulary)} tokens")
    print(f"{'validation side':<16} {'vocabulary':<10} {'pieces/sentence':>16} {'unknown':>8}")
    for side, own, texts in (("German", german, valid.sources),
                             ("English", english, valid.targets)):
        for name, tokenizer in (("own", own), ("shared", shared)):
            per_sentence, unknown = pieces(tokenizer, texts)
            print(f"{side:<16} {name:<10} {per_sentence:>16.2f} {unknown:>8.2%}")
    for tie, tokenizers in (("none", (german, english)), ("target", (german, english)),
                            ("all", (shared, shared))):
        sizes = [len(tokenizer.vocabulary) for tokenizer in tokenizers]
        model = Seq2Seq(dataclasses.replace(config.model.sized(*sizes), tie_embeddings=tie))
        print(f"tie_embeddings={tie:<7} trainable parameters {model.count_params():>11,}")


if __name__ == "__main__":
    main()
