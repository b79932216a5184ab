"""Finished runs scored alone and as an ensemble, on a split of the first run's data.

Each run's kept model (`RUN/model`) decodes the split's distinct sources, then all of
them together as an ensemble (`attncli.search.ensemble`: the mean of their next-token
distributions at every step), each with the first run's decoding settings (beam, alpha)
unless `--beam` says otherwise, and scored as `attncli train` scores its test split
(`attncli.search.evaluation.evaluate_corpus`: BLEU/chrF, or PER/WER with every reference
pronunciation of a word). The split is read as the first run's config reads it.

    python -m benchmarks.ensemble RUN RUN [RUN ...] [--split test] [--beam N] [--data DIR]

The runs must have been trained with the same data settings (the ensemble refuses
models whose vocabularies or tokenizers differ). `--split valid` scores the validation
split, on which ensembles can be chosen; `test` is the one to report.
"""

import argparse
import dataclasses
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from attncli.data.sources import read_splits  # noqa: E402
from attncli.config.run import load_run_config  # noqa: E402
from attncli.search.ensemble import load_ensemble  # noqa: E402
from attncli.search.evaluation import evaluate_corpus, reference_normaliser  # noqa: E402

COLUMNS = {
    "translation": (("bleu", "BLEU"), ("chrf", "chrF")),
    "pronunciation": (("per", "PER %"), ("wer", "WER %")),
}


def split_and_search(run, split, data, beam=None):
    """`(config, corpus, search)`: `run`'s config, its `split` read as training reads it,
    and its decoding settings for one output a source (`beam` replacing its beam size)."""
    config = load_run_config(run / "config.yaml")
    corpus = getattr(read_splits(config.data, data), split)
    beam_size = config.decoding.beam_size if beam is None else beam
    return config, corpus, dataclasses.replace(config.decoding, beam_size=beam_size, n_best=1)


def score(models, corpus, task, search):
    """The figures of `models` (one: that model; several: their ensemble) on `corpus`."""
    loaded = load_ensemble(models)
    translator = loaded.translator(search, attention_weights=False)
    normalise = reference_normaliser(loaded.target_tokenizer)
    figures, _ = evaluate_corpus(translator, corpus, task, normalise=normalise)
    return loaded.metadata.get("epoch"), figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="finished `attncli train` runs")
    parser.add_argument("--split", choices=["test", "valid"], default="test")
    parser.add_argument("--beam", type=int, default=None,
                        help="beam size (default: the first run's decoding.beam_size)")
    parser.add_argument("--data", type=Path, default=os.environ.get("ATTNCLI_SHARED_DATA"),
                        help="data folder of runs that read files (not the bundled corpus)")
    parser.add_argument("--alone", action=argparse.BooleanOptionalAction, default=True,
                        help="also score each run alone (default: yes)")
    args = parser.parse_args()
    if len(args.runs) < 2:
        parser.error("give at least two runs")

    config, corpus, search = split_and_search(args.runs[0], args.split, args.data, args.beam)
    task = config.data.task
    if not len(corpus):
        parser.error(f"{args.runs[0]} has no {args.split} split")
    models = [run / "model" for run in args.runs]

    rows = []
    if args.alone:
        for run, model in zip(args.runs, models):
            epoch, figures = score([model], corpus, task, search)
            rows.append((f"{run} (epoch {epoch})", figures))
    _, figures = score(models, corpus, task, search)
    rows.append((f"ensemble of the {len(models)}", figures))

    columns = COLUMNS[task]
    print(f"\n{args.split} split of {args.runs[0]}: {figures['sentences']:,} distinct sources; "
          f"beam {search.beam_size}, alpha {search.alpha}\n")
    print("| model | " + " | ".join(title for _, title in columns) + " | seconds |")
    print("| --- |" + " ---: |" * (len(columns) + 1))
    for name, figures in rows:
        print(f"| {name} | " + " | ".join(f"{figures[key]:.2f}" for key, _ in columns)
              + f" | {figures['seconds']:.1f} |")


if __name__ == "__main__":
    main()
