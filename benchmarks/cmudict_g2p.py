"""Grapheme-to-phoneme on CMUdict (g014b2b): attncli's PER and WER beside published systems.

Trains `configs/cmudict-g2p.yaml` (a seeded 5% of the training words held out for
validation; the test file is read only to score the kept model at the end), then prints
PER and WER on `g014b2b.test` (12,000 words): a word is right if the output equals any of
its reference pronunciations, and its phoneme errors count against the closest one.

    python -m benchmarks.cmudict_g2p [--data ../shared/data] [--run-dir runs/cmudict-g2p]
    python -m benchmarks.cmudict_g2p --reuse --run-dir RUN   # report a finished run
    python -m benchmarks.cmudict_g2p --seeds 0 1 --run-dir RUN  # one run per core, ensembled
"""

from benchmarks.published_run import train_and_read, training_summary

PUBLISHED = [
    ("Rao et al. 2015, DBLSTM-CTC", None, 25.8),
    ("Phonetisaurus (joint n-gram WFST)", None, 24.4),
    ("Yao & Zweig 2015, bi-LSTM encoder-decoder", 5.45, 23.55),
    ("g2p-seq2seq, LSTM 2x512", None, 23.3),
    ("Toshniwal & Livescu 2016, attention, ensemble", 4.69, 20.24),
]


def main():
    runs, ensemble = train_and_read(__doc__.split("\n")[0], "cmudict-g2p")
    test = runs[0][1]
    print(f"\nCMUdict g014b2b.test, {test['words']:,} words; beam "
          f"{test['decoding']['beam_size']}")
    for name, _, records in runs:
        print(f"{name}: {training_summary(records)}" if ensemble else training_summary(records))
    print("\n| system | PER % | WER % |")
    print("| --- | ---: | ---: |")
    for name, per, wer in PUBLISHED:
        print(f"| {name} | {'–' if per is None else f'{per:.2f}'} | {wer:.2f} |")
    if ensemble is None:
        print(f"| **attncli** (`configs/cmudict-g2p.yaml`) | **{test['per']:.2f}** | "
              f"**{test['wer']:.2f}** |")
        return
    for name, test, _ in runs:
        print(f"| attncli (`configs/cmudict-g2p.yaml`), {name} | {test['per']:.2f} | "
              f"{test['wer']:.2f} |")
    print(f"| **attncli, ensemble of the {len(runs)}** | **{ensemble['per']:.2f}** | "
          f"**{ensemble['wer']:.2f}** |")


if __name__ == "__main__":
    main()
