"""Throughput and padding of the input pipeline on the full spa-eng and Multi30k corpora.

For each corpus and batching setting, prints one row: the first epoch (with building the
dataset, which tokenizes, filters and keeps the ids in memory), then the mean of later
epochs, in sentences/s and target tokens/s (non-pad `target_out` ids, end id included, as
docs/references.md counts them), and the padding fraction of source and target. The default
model trains at about 3,000-8,000 target tokens/s here, so the pipeline must deliver well
over 80,000 after the first epoch.

    python -m benchmarks.bench_pipeline [--data ../shared/data] [--epochs 3]
"""

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from attncli.data.readers import read_parallel, read_tsv  # noqa: E402
from attncli.data.pipeline import PipelineStats, make_dataset  # noqa: E402
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer  # noqa: E402

SETTINGS = {
    "64 sentences, no bucketing": dict(batch_size=64, bucketing=False),
    "64 sentences, bucketed": dict(batch_size=64),
    "2,000 tokens, bucketed": dict(tokens_per_batch=2000),
}


def default_data() -> Path:
    if os.environ.get("ATTNCLI_SHARED_DATA"):
        return Path(os.environ["ATTNCLI_SHARED_DATA"])
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def corpora(data: Path):
    """(name, corpus, source tokenizer, target tokenizer) with vocabularies built."""
    spa = read_tsv(data / "spa-eng" / "spa.txt", source_column=1, target_column=0)
    multi30k = read_parallel(data / "multi30k" / "train.de", data / "multi30k" / "train.en")
    for name, corpus, settings, size in (
        ("spa-eng, word (tutorial)", spa, TUTORIAL_NORMALIZATION, 5000),
        ("multi30k de-en, word", multi30k, dict(lowercase=True), 10000),
        ("multi30k de-en, subword", multi30k, dict(lowercase=True), 8000),
    ):
        level = "subword" if "subword" in name else "word"
        tokenizers = []
        started = time.perf_counter()
        for texts in (corpus.sources, corpus.targets):
            tokenizer = Tokenizer(level, **settings)
            tokenizers.append(tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, size)))
        seconds = time.perf_counter() - started
        yield name, corpus, tokenizers, seconds


def run_epoch(dataset, stats):
    stats.reset()
    started = time.perf_counter()
    for _ in dataset:
        pass
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data(), help="shared data folder")
    parser.add_argument("--epochs", type=int, default=3, help="cached epochs to average")
    args = parser.parse_args()

    print(
        "| corpus | batches | vocabulary s | 1st epoch sent/s | cached sent/s "
        "| cached target tok/s | source padding | target padding |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, corpus, (source, target), vocabulary_seconds in corpora(args.data):
        for setting, options in SETTINGS.items():
            stats = PipelineStats()
            started = time.perf_counter()
            dataset = make_dataset(corpus, source, target, stats=stats, **options)
            encoding = time.perf_counter() - started
            first = encoding + run_epoch(dataset, stats)
            first_rate = stats.sentences / first
            seconds = sum(run_epoch(dataset, stats) for _ in range(args.epochs))
            sentences, tokens = stats.sentences * args.epochs, stats.target_tokens * args.epochs
            print(
                f"| {name} ({len(corpus):,} pairs) | {setting} | {vocabulary_seconds:.1f} "
                f"| {first_rate:,.0f} | {sentences / seconds:,.0f} | {tokens / seconds:,.0f} "
                f"| {stats.source_padding_fraction:.1%} | {stats.target_padding_fraction:.1%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
