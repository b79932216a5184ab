"""A run's validation outputs scored on real text and the tutorial's way, and its [UNK]s counted.

The default run (`configs/default.yaml`) writes cased, accented text and its validation
BLEU is cased sacreBLEU against the raw references. Until it did, the default lower-cased
and stripped both sides the TensorFlow tutorial's way (NFKD, lower case, accents removed,
only `a-z .?!,¿` kept), and its validation BLEU was computed on that text. This script
decodes the first `--sentences` distinct validation sources of a finished run with its
kept model, as validation does (greedy unless `--beam`), and prints both figures for the
same outputs, so a cased run compares with a normalised one:

- cased: sacreBLEU (13a) and chrF of the outputs against the raw references;
- normalised: outputs and references passed through the tutorial's normalisation
  (`attncli.data.tokenization.TUTORIAL_NORMALIZATION`, by the normaliser validation uses
  for a normalising target side), then sacreBLEU: what the old default's validation
  reported (for a run that normalises its target side, its outputs are left as written,
  so the figure equals that run's own validation BLEU);

then how many outputs hold `[UNK]`, and which characters of the validation sources and
references the run's vocabularies lack (characters never seen in training: only those
can be `[UNK]` with WordPiece's character fallback).

    python -m benchmarks.default_text RUN [--sentences 500] [--beam 1] [--data DIR]
"""

import argparse
import dataclasses
import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from attncli.config.run import load_run_config  # noqa: E402
from attncli.data.sources import read_splits  # noqa: E402
from attncli.data.text_rules import SUFFIX_INDICATOR  # noqa: E402
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer  # noqa: E402
from attncli.data.vocabulary import UNK, UNK_TOKEN  # noqa: E402
from attncli.search.evaluation import (  # noqa: E402
    evaluate_corpus, normalised_references, reference_normaliser, score_outputs,
)
from attncli.search.loading import load_model  # noqa: E402


def unknowns(texts, tokenizer):
    """`(count, characters)`: the `[UNK]` ids of `texts` encoded by `tokenizer`, and (for
    `subword` and `char` levels) the characters of the normalised texts that its
    vocabulary has neither as a piece of their own nor as a continuation (`##c`)."""
    import tensorflow as tf

    texts = tf.constant(texts, dtype=tf.string)
    count = int(tf.reduce_sum(tf.cast(tokenizer.encode(texts).flat_values == UNK, tf.int32)))
    if tokenizer.level == "word":
        return count, None
    tokens = set(tokenizer.vocabulary.tokens)
    characters = set()
    for normalised in tokenizer.normalize(texts).numpy():
        characters.update(normalised.decode("utf-8"))
    characters.discard(" ")
    lacking = sorted(
        c for c in characters if c not in tokens and SUFFIX_INDICATOR + c not in tokens
    )
    return count, lacking


def best_validation(run):
    """The kept model's validation record of `RUN/metrics.jsonl` (the last marked best)."""
    lines = (Path(run) / "metrics.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [record for record in records if record.get("best")][-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished `attncli train` run directory")
    parser.add_argument("--sentences", type=int, default=None,
                        help="distinct validation sources scored (default: the run's "
                             "training.eval_sentences)")
    parser.add_argument("--beam", type=int, default=None,
                        help="beam size (default: the run's training.eval_beam_size)")
    parser.add_argument("--data", type=Path, default=os.environ.get("ATTNCLI_SHARED_DATA"),
                        help="data folder of a run that reads files (not the bundled corpus)")
    args = parser.parse_args()

    config = load_run_config(args.run / "config.yaml")
    count = args.sentences if args.sentences is not None else config.training.eval_sentences
    beam = args.beam if args.beam is not None else config.training.eval_beam_size
    valid = read_splits(config.data, args.data).valid
    loaded = load_model(args.run / "model")
    search = dataclasses.replace(loaded.search, beam_size=beam, n_best=1)
    translator = loaded.translator(search, attention_weights=False)

    cased, outputs = evaluate_corpus(translator, valid, config.data.task, count=count)
    sources, references = (side[: len(outputs)] for side in valid.references())
    tutorial = reference_normaliser(Tokenizer("word", **TUTORIAL_NORMALIZATION))
    # A run whose target side normalises already writes its outputs that way; passing them
    # through again would only rewrite its `[UNK]` as `unk` (brackets dropped), which
    # scores differently from what its validation reported.
    already = reference_normaliser(loaded.target_tokenizer) is not None
    normalised = score_outputs(
        config.data.task, outputs if already else tutorial(outputs),
        normalised_references(references, tutorial), lowercase_bleu=False,
    )
    with_unk = [output for output in outputs if UNK_TOKEN in output]
    flat_references = [reference for options in references for reference in options]
    record = best_validation(args.run)

    print(f"\n{args.run}: kept model of epoch {record['epoch']} (step {record['step']:,}); "
          f"{len(outputs)} validation sentences, beam {beam}\n")
    print("| scored | BLEU | chrF |")
    print("| --- | ---: | ---: |")
    print(f"| cased, raw references | {cased['bleu']:.2f} | {cased['chrf']:.2f} |")
    print(f"| lower-cased BLEU, raw references | {cased['bleu_lowercase']:.2f} | – |")
    print(f"| outputs and references normalised the tutorial's way | {normalised['bleu']:.2f} | "
          f"{normalised['chrf']:.2f} |")
    print(f"| the run's own validation ({record['references']} references) | "
          f"{record['bleu']:.2f} | {record['chrf']:.2f} |")
    print(f"\noutputs with {UNK_TOKEN}: {len(with_unk)} of {len(outputs)} "
          f"({sum(output.count(UNK_TOKEN) for output in with_unk)} tokens)")
    for output in with_unk[:10]:
        print(f"  {output}")
    for side, texts, tokenizer in (("sources", sources, loaded.source_tokenizer),
                                   ("references", flat_references, loaded.target_tokenizer)):
        count, lacking = unknowns(texts, tokenizer)
        print(f"{UNK_TOKEN} in the encoded validation {side}: {count}"
              + ("" if lacking is None else f"; characters never seen in training: {lacking}"))
    print(f"\n{cased['bleu_signature']}")


if __name__ == "__main__":
    main()
