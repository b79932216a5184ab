"""Multi30k German→English: attncli's BLEU on test_2016_flickr beside published systems.

Trains `configs/multi30k-de-en.yaml` (train to learn, val to choose the kept model; the
test set is read only to score that model at the end), then prints sacreBLEU on the
detokenized, cased output against the raw references (the strict setting), the same
lower-cased, and chrF. The published rows were computed lower-cased on spaCy tokens.

    python -m benchmarks.multi30k_de_en [--data ../shared/data] [--run-dir runs/multi30k-de-en]
    python -m benchmarks.multi30k_de_en --reuse --run-dir RUN   # report a finished run
    python -m benchmarks.multi30k_de_en --seeds 0 1 --run-dir RUN  # one run per core, ensembled
"""

from benchmarks.published_run import train_and_read, training_summary

PUBLISHED = [
    ("GRU encoder-decoder, no attention (bentrevett, greedy)", 20.6),
    ("Bahdanau attention, bi-GRU 512, 10 epochs (bentrevett, greedy)", 28.3),
    ("ConvS2S (bentrevett, legacy)", 34.1),
    ("Transformer (bentrevett, legacy)", 36.5),
]


def main():
    runs, ensemble = train_and_read(__doc__.split("\n")[0], "multi30k-de-en")
    test = runs[0][1]
    decoding = test["decoding"]
    print(f"\nMulti30k test_2016_flickr, {test['sentences']:,} sentences; "
          f"beam {decoding['beam_size']}, alpha {decoding['alpha']}")
    for name, _, records in runs:
        print(f"{name}: {training_summary(records)}" if ensemble else training_summary(records))
    print("\n| system | BLEU cased | BLEU lower-cased | chrF |")
    print("| --- | ---: | ---: | ---: |")
    for name, bleu in PUBLISHED:
        print(f"| {name} | – | {bleu:.1f} | – |")
    if ensemble is None:
        print(f"| **attncli** (`configs/multi30k-de-en.yaml`) | **{test['bleu']:.1f}** | "
              f"**{test['bleu_lowercase']:.1f}** | {test['chrf']:.1f} |")
    else:
        for name, test, _ in runs:
            print(f"| attncli (`configs/multi30k-de-en.yaml`), {name} | {test['bleu']:.1f} | "
                  f"{test['bleu_lowercase']:.1f} | {test['chrf']:.1f} |")
        print(f"| **attncli, ensemble of the {len(runs)}** | **{ensemble['bleu']:.1f}** | "
              f"**{ensemble['bleu_lowercase']:.1f}** | {ensemble['chrf']:.1f} |")
    print(f"\n{test['bleu_signature']}")


if __name__ == "__main__":
    main()
