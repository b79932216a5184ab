"""Spanish→English (Tatoeba): attncli against the TensorFlow tutorial's model, same wall time.

The setting of docs/references.md: `spa-eng/spa.txt` permuted by `numpy.random.default_rng(0)`,
the last 2,000 pairs for validation, and here the 2,000 before them held out for the
comparison (attncli chooses its kept model on validation; the held-out pairs choose
nothing, so neither model has seen them in any way); the tutorial's normalisation (NFKD,
lower case, only `a-z .?!,¿`); word level; vocabularies of 5,000 per side; batches of 64
sentences; both models of the tutorial's width (embeddings and units 256, a bidirectional
GRU encoder with summed directions, a GRU decoder, no dropout); the tutorial's model with
Adam 1e-3.

Side by side, as two processes started together on the same `--cores` (inheriting this
process's niceness, so they share the cores equally), each for `--minutes` of wall time:

- attncli: the command a user types, `python -m attncli train configs/spa-eng.yaml
  --set training.max_minutes=M ...` (Luong general attention, the output layer tied to
  the target embeddings, label smoothing 0.1, Adam 2e-3 halved every 1,500 steps, the
  moving average of the weights validated and kept), whose kept model (best by
  validation BLEU) the run scores on the held-out pairs itself (`RUN/test.json`, beam 5),
  and a third process then scores greedily;
- the tutorial's model (`benchmarks/tutorial_model.py`), trained on the same bucketed
  batches of attncli's pipeline with the tutorial's loss, its last weights.

Both decode the held-out sentences greedily (at most 50 tokens) and are scored by
sacreBLEU against the held-out references written the tutorial's way (a Spanish sentence
with several translations has them all as references); attncli's beam search (its config:
beam 5, alpha 0.6) is scored too. Peak RSS is each process's own (`wait4`).

    python -m benchmarks.spa_eng [--minutes 10] [--data ../shared/data] [--cores 0]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "spa-eng.yaml"
HELD_OUT = 2000


def attncli_command(minutes, data_dir, run_dir):
    """`attncli train` of `configs/spa-eng.yaml` for `minutes`, the held-out pairs as test."""
    overrides = [
        f"training.max_minutes={minutes}", "training.epochs=1000", "training.patience=null",
        f"data.test_size={HELD_OUT}",
    ]
    return [
        sys.executable, "-m", "attncli", "train", str(CONFIG), "--data-dir", str(data_dir),
        "--run-dir", str(run_dir), "--overwrite",
        *(item for override in overrides for item in ("--set", override)),
    ]


def run_together(commands, cores, logs):
    """Start `commands` at once (pinned to `cores` if given); their peak RSS in bytes.

    Each process's `ru_maxrss` comes from `wait4`, so it is that process's own peak.
    """
    prefix = ["taskset", "-c", cores] if cores else []
    processes = []
    for command, log in zip(commands, logs):
        processes.append(subprocess.Popen(
            prefix + command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"},
        ))
    peaks = []
    for process in processes:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        peaks.append(usage.ru_maxrss * 1024)
    for process, log in zip(processes, logs):
        if process.returncode:
            raise SystemExit(f"{' '.join(process.args)} exited with {process.returncode}; "
                             f"see {log.name}")
    return peaks


# ---------------------------------------------------------------- the child processes
def _parts(data_dir, scratch):
    """attncli's data for the spa-eng config (splits, tokenizers, encoded pairs)."""
    from attncli.cli.train_command import resolve_run
    from attncli.training.builder import build_training

    class Quiet:
        def message(self, text):
            pass

    config, run, _ = resolve_run(
        CONFIG, [f"data.test_size={HELD_OUT}"], Path(scratch) / "data", data_dir,
        resume=False, overwrite=True,
    )
    return config, build_training(config, run, Quiet(), data_dir=data_dir)


def train_tutorial(minutes, data_dir, scratch):
    """The tutorial's model trained on attncli's batches for `minutes`, then scored."""
    import keras
    import tensorflow as tf

    from attncli.data.pipeline import epoch_batches
    from attncli.search.evaluation import (
        normalised_references, reference_normaliser, score_outputs,
    )
    from benchmarks.tutorial_model import TutorialTranslator, tutorial_greedy, tutorial_train_step

    config, parts = _parts(data_dir, scratch)
    keras.utils.set_random_seed(0)
    model = TutorialTranslator(
        len(parts.source_tokenizer.vocabulary), len(parts.target_tokenizer.vocabulary)
    )
    step = tutorial_train_step(model, keras.optimizers.Adam(1e-3))
    data = config.data
    started = time.monotonic()
    steps, tokens, epoch = 0, 0, 0
    measured_from, measured_tokens = started, 0
    while time.monotonic() - started < 60.0 * minutes:
        batches = epoch_batches(
            parts.encoded, epoch, batch_size=data.batch_size, bucketing=data.bucketing,
            shuffle=True, seed=config.training.seed,
        )
        for inputs, target_out in batches:
            count = int(step(inputs, target_out)["tokens"])
            steps += 1
            tokens += count
            if steps == 50:  # throughput in the steady state, after tracing
                measured_from, measured_tokens = time.monotonic(), tokens
            if time.monotonic() - started >= 60.0 * minutes:
                break
        epoch += 1
    rate = (tokens - measured_tokens) / max(time.monotonic() - measured_from, 1e-9)

    loop = tf.function(
        lambda ids: tutorial_greedy(model, ids),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    sources, references = parts.splits.test.references()
    outputs = []
    for start in range(0, len(sources), 64):
        ids = parts.source_tokenizer.encode(tf.constant(sources[start : start + 64]))
        texts = parts.target_tokenizer.decode(loop(ids.to_tensor())).numpy()
        outputs.extend(text.decode("utf-8") for text in texts)
    normalise = reference_normaliser(parts.target_tokenizer)
    figures = score_outputs("translation", outputs, normalised_references(references, normalise))
    return {"steps": steps, "tokens_per_second": rate, "parameters": model.count_params(),
            "greedy": figures}


def score_attncli_greedy(run_dir, data_dir):
    """The kept model of attncli's run, greedy (at most 50 tokens), on the held-out pairs."""
    from attncli.data.sources import read_splits
    from attncli.config.run import load_run_config
    from attncli.config.search import SearchConfig
    from attncli.search.evaluation import evaluate_corpus, reference_normaliser
    from attncli.search.loading import load_model
    from benchmarks.tutorial_model import MAX_LENGTH

    config = load_run_config(Path(run_dir) / "config.yaml")
    held_out = read_splits(config.data, data_dir).test
    loaded = load_model(Path(run_dir) / "model")
    greedy = SearchConfig(beam_size=1, n_best=1, max_length_ratio=0.0,
                          max_length_offset=MAX_LENGTH)
    normalise = reference_normaliser(loaded.target_tokenizer)
    figures, _ = evaluate_corpus(
        loaded.translator(greedy, attention_weights=False), held_out, "translation",
        normalise=normalise,
    )
    return {"greedy": figures, "parameters": loaded.model.count_params(),
            "kept": loaded.metadata}


def _child(args):
    if args.side == "tutorial":
        with tempfile.TemporaryDirectory() as scratch:
            result = train_tutorial(args.minutes, args.data, scratch)
    else:
        result = score_attncli_greedy(args.run_dir, args.data)
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------- the table
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per model")
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--cores", help="CPU list for taskset, e.g. 0 (default: this "
                        "process's own cores)")
    parser.add_argument("--run-dir", type=Path, help="attncli's run (default: a temporary one)")
    parser.add_argument("--side", choices=["tutorial", "attncli-greedy"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        _child(args)
        return

    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        run_dir = args.run_dir or scratch / "spa-eng"
        tutorial_result = scratch / "tutorial.json"
        this = [sys.executable, "-m", "benchmarks.spa_eng", "--data", str(args.data)]
        print(f"training attncli and the tutorial's model side by side for {args.minutes:g} "
              f"minutes (logs in {scratch}) ...", file=sys.stderr)
        started = time.monotonic()
        with open(scratch / "attncli.log", "w") as ours_log, \
                open(scratch / "tutorial.log", "w") as tutorial_log:
            peaks = run_together(
                [attncli_command(args.minutes, args.data, run_dir),
                 this + ["--side", "tutorial", "--minutes", str(args.minutes),
                         "--result", str(tutorial_result)]],
                args.cores, [ours_log, tutorial_log],
            )
        wall = time.monotonic() - started
        loads.append(os.getloadavg())
        greedy_result = scratch / "greedy.json"
        with open(scratch / "greedy.log", "w") as log:
            run_together([this + ["--side", "attncli-greedy", "--run-dir", str(run_dir),
                                  "--result", str(greedy_result)]], args.cores, [log])
        ours = json.loads(greedy_result.read_text())
        tutorial = json.loads(tutorial_result.read_text())
        beam = json.loads((run_dir / "test.json").read_text())
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]

    steps = records[-1]["step"]
    print(f"\nTatoeba spa→en, {ours['greedy']['sentences']} held-out Spanish sentences, "
          f"{args.minutes:g} minutes of training each, side by side on cores "
          f"{args.cores or 'inherited'} (both processes done after {wall / 60:.1f} min); "
          f"load averages (1, 5, 15 min) at the start {loads[0][0]:.2f} {loads[0][1]:.2f} "
          f"{loads[0][2]:.2f}, at the end {loads[1][0]:.2f} {loads[1][1]:.2f} {loads[1][2]:.2f}")
    kept = [record for record in records if record["best"]][-1]
    print(f"attncli kept the model of step {kept['step']} (epoch {kept['epoch']}, validation "
          f"BLEU {kept['bleu']:.2f}); its evaluations:")
    for record in records:
        print("  " + " ".join(f"{key}={record[key]:.4g}" if isinstance(record[key], float)
                              else f"{key}={record[key]}" for key in sorted(record)))
    print("\n| model | parameters | steps | BLEU | BLEU × tutorial | chrF | peak RSS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    baseline = tutorial["greedy"]["bleu"]
    rows = [
        ("attncli, greedy", ours["parameters"], steps, ours["greedy"], peaks[0]),
        (f"attncli, beam {beam['decoding']['beam_size']}", ours["parameters"], steps, beam,
         peaks[0]),
        ("tutorial model, greedy", tutorial["parameters"], tutorial["steps"],
         tutorial["greedy"], peaks[1]),
    ]
    for label, parameters, count, figures, peak in rows:
        print(f"| {label} | {parameters / 1e6:.2f} M | {count:,} | {figures['bleu']:.1f} | "
              f"{figures['bleu'] / max(baseline, 1e-9):.2f} | {figures['chrf']:.1f} | "
              f"{peak / 1e9:.2f} GB |")
    print(f"\ntutorial steady state: {tutorial['tokens_per_second']:,.0f} target tokens/s")
    print(ours["greedy"]["bleu_signature"])


if __name__ == "__main__":
    main()
