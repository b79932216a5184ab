"""Spanish→English (Tatoeba): attncli against the TensorFlow tutorial's model, same wall time.

The setting of docs/references.md: `spa-eng/spa.txt` permuted by `numpy.random.default_rng(0)`,
the last 2,000 pairs for validation, and here the 2,000 before them held out for the
comparison (attncli chooses its kept model on validation; the held-out pairs choose
nothing, so neither model has seen them in any way); the tutorial's normalisation (NFKD,
lower case, only `a-z .?!,¿`); word level; vocabularies of 5,000 per side; batches of 64
sentences; Adam 1e-3; both models of the tutorial's size (embeddings and units 256, a
bidirectional GRU encoder with summed directions, a GRU decoder, no dropout).

In one process, one after the other, each for the same `--minutes` of wall time:

- attncli: `attncli train configs/spa-eng.yaml` (Luong general attention, label smoothing
  0.1, the time budget counting its per-epoch evaluations), its best model by validation
  BLEU, scored at the end of the run (`RUN/test.json`, beam 5) and again greedily;
- the tutorial's model (`benchmarks/tutorial_model.py`), trained on the same bucketed
  batches of attncli's pipeline with the tutorial's loss, its last weights.

Both decode the held-out sentences greedily (at most 50 tokens) and are scored by
sacreBLEU against the held-out references written the tutorial's way (a Spanish sentence
with several translations has them all as references); attncli's beam search (its config:
beam 5, alpha 0.6) is scored too.

    python -m benchmarks.spa_eng [--minutes 10] [--data ../shared/data] [--sentences N]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from attncli.search.evaluation import evaluate_corpus, score_outputs  # noqa: E402
from attncli.data.pipeline import epoch_batches  # noqa: E402
from attncli.model.saving import load_model  # noqa: E402
from attncli.config.search import SearchConfig  # noqa: E402
from attncli.cli.train_command import resolve_run  # noqa: E402
from attncli.training.trainer import Trainer  # noqa: E402
from benchmarks.tutorial_model import (  # noqa: E402
    MAX_LENGTH,
    TutorialTranslator,
    tutorial_greedy,
    tutorial_train_step,
)

REPO = Path(__file__).resolve().parents[1]
HELD_OUT = 2000
GREEDY = SearchConfig(beam_size=1, n_best=1, max_length_ratio=0.0, max_length_offset=MAX_LENGTH)


class StepLog:
    """The `progress` of `Trainer`: counts steps and tokens, reports on stderr now and then."""

    def __init__(self):
        self.steps = 0
        self.tokens_per_second = []

    def start_epoch(self, epoch, total, skip):
        print(f"  attncli: epoch {epoch}", file=sys.stderr)

    def step(self, loss, tokens_per_second):
        self.steps += 1
        self.tokens_per_second.append(tokens_per_second)
        if self.steps % 500 == 0:
            print(f"  attncli: step {self.steps}, loss {loss:.3f}", file=sys.stderr)

    def end_epoch(self, record):
        print(f"  attncli: {record}", file=sys.stderr)

    def message(self, text):
        print(f"  attncli: {text}", file=sys.stderr)


def train_attncli(minutes, data_dir, run_dir):
    """The attncli run of `configs/spa-eng.yaml` for `minutes`.

    Returns:
        `(trainer, log, seconds, test)`: `test` is the run's own scoring of its kept model
        on the held-out pairs with its decoding settings (beam 5), `RUN/test.json`.
    """
    overrides = [
        f"training.max_minutes={minutes}", "training.epochs=1000", "training.patience=null",
        f"data.test_size={HELD_OUT}",
    ]
    config, run, _ = resolve_run(
        REPO / "configs" / "spa-eng.yaml", overrides, run_dir, data_dir, resume=False,
        overwrite=True,
    )
    log = StepLog()
    trainer = Trainer.from_config(config, run, log, data_dir=data_dir)
    started = time.monotonic()
    summary = trainer.fit()
    return trainer, log, time.monotonic() - started, summary["test"]


def train_tutorial(trainer, minutes):
    """The tutorial's model trained on attncli's batches for `minutes`; (model, steps, tokens/s)."""
    keras.utils.set_random_seed(0)
    model = TutorialTranslator(
        len(trainer.parts.source_tokenizer.vocabulary),
        len(trainer.parts.target_tokenizer.vocabulary),
    )
    step = tutorial_train_step(model, keras.optimizers.Adam(1e-3))
    data = trainer.config.data
    started = time.monotonic()
    steps, tokens, epoch = 0, 0, 0
    measured_from, measured_tokens = started, 0
    while time.monotonic() - started < 60.0 * minutes:
        batches = epoch_batches(
            trainer.parts.encoded, epoch, batch_size=data.batch_size, bucketing=data.bucketing,
            shuffle=True, seed=0,
        )
        for inputs, target_out in batches:
            count = int(step(inputs, target_out)["tokens"])
            steps += 1
            tokens += count
            if steps == 50:  # throughput in the steady state, after tracing
                measured_from, measured_tokens = time.monotonic(), tokens
            if steps % 500 == 0:
                print(f"  tutorial: step {steps}", file=sys.stderr)
            if time.monotonic() - started >= 60.0 * minutes:
                break
        epoch += 1
    rate = (tokens - measured_tokens) / max(time.monotonic() - measured_from, 1e-9)
    return model, steps, rate


def tutorial_outputs(model, trainer, sources, batch_size=64):
    """Greedy outputs of the tutorial's loop (in `tf.function`) for `sources`, as text."""
    loop = tf.function(
        lambda ids: tutorial_greedy(model, ids),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    outputs = []
    parts = trainer.parts
    for start in range(0, len(sources), batch_size):
        ids = parts.source_tokenizer.encode(tf.constant(sources[start : start + batch_size]))
        token_ids = loop(ids.to_tensor())
        texts = parts.target_tokenizer.decode(token_ids).numpy()
        outputs.extend(text.decode("utf-8") for text in texts)
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per model")
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--run-dir", type=Path, help="attncli's run (default: a temporary one)")
    parser.add_argument("--sentences", type=int, default=None,
                        help="score only the first N held-out sources (default: all)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        run_dir = args.run_dir or Path(scratch) / "spa-eng"
        print(f"training attncli for {args.minutes:g} minutes ...", file=sys.stderr)
        trainer, log, ours_seconds, beam_figures = train_attncli(args.minutes, args.data, run_dir)
        loaded = load_model(run_dir / "model")
        held_out = trainer.parts.splits.test
        if args.sentences is not None:
            keep = set(held_out.references()[0][: args.sentences])
            held_out = held_out.select(
                [i for i, source in enumerate(held_out.sources) if source in keep]
            )
        normalise = trainer.validator.normalise
        steady = log.tokens_per_second[50:] or log.tokens_per_second
        rows = []
        decoding = trainer.config.decoding
        # The run scored the whole held-out set with its own settings already.
        run_figures = beam_figures if args.sentences is None else None
        searches = [("greedy", GREEDY, None), (f"beam {decoding.beam_size}", decoding, run_figures)]
        for label, search, figures in searches:
            if figures is None:
                figures, _ = evaluate_corpus(
                    loaded.translator(search), held_out, "translation", normalise=normalise
                )
            rows.append((f"attncli, {label}", loaded.model.count_params(), log.steps,
                         sum(steady) / len(steady), figures))

        print(f"training the tutorial's model for {args.minutes:g} minutes ...", file=sys.stderr)
        model, steps, rate = train_tutorial(trainer, args.minutes)
        sources, references = held_out.references()
        outputs = tutorial_outputs(model, trainer, sources)
        figures = score_outputs("translation", outputs, [normalise(r) for r in references])
        rows.append(("tutorial model, greedy", model.count_params(), steps, rate, figures))

    print(f"\nTatoeba spa→en, {len(sources)} held-out Spanish sentences "
          f"({len(held_out)} references), {args.minutes:g} minutes of training each "
          f"(attncli's run took {ours_seconds / 60:.1f} min with vocabularies and evaluations)\n")
    print("| model | parameters | steps | target tokens/s | BLEU | BLEU × tutorial | chrF |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    baseline = rows[-1][4]["bleu"]
    for label, parameters, steps, rate, figures in rows:
        print(f"| {label} | {parameters / 1e6:.2f} M | {steps:,} | {rate:,.0f} | "
              f"{figures['bleu']:.1f} | {figures['bleu'] / max(baseline, 1e-9):.2f} | "
              f"{figures['chrf']:.1f} |")
    print(f"\n{rows[0][4]['bleu_signature']}")


if __name__ == "__main__":
    main()
