"""Shared by the result scripts: train a shipped config with `attncli train`, read the run.

A result script either trains (`attncli train CONFIG --data-dir DATA --run-dir RUN`, the
exact command a user types, progress on stderr) or, given `--reuse`, reads a run that
finished before; then it prints the run's test figures beside the published ones.

With `--seeds S [S ...]` it trains the config once per seed instead, side by side, each
`attncli train` process pinned to a core of its own (`RUN/seed-S`), and scores the
ensemble of their kept models on the test split (`attncli.search.ensemble`: the mean of
the models' next-token distributions), written to `RUN/ensemble.json`.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def arguments(description, config_name):
    """Parses `--data`, `--run-dir`, `--reuse`, `--overwrite` and `--set` of a result script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
        help="the shared data folder (default: ../shared/data)",
    )
    parser.add_argument("--run-dir", type=Path, default=REPO / "runs" / config_name,
                        help="where the run is written (or read with --reuse)")
    parser.add_argument("--reuse", action="store_true",
                        help="do not train: report the finished run in --run-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="train again even if --run-dir holds a finished run")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, as `attncli train --set` does")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                        help="train one run per seed side by side, each on a core of its "
                             "own (RUN/seed-SEED), and score their ensemble")
    args = parser.parse_args()
    if args.seeds is not None and (len(set(args.seeds)) != len(args.seeds)
                                   or len(args.seeds) < 2):
        parser.error("give two or more seeds, each once. "
                     f"Received: --seeds {' '.join(map(str, args.seeds))}")
    return args


def seed_runs(args):
    """The run directories of `--seeds`, in its order (none without it)."""
    return [args.run_dir / f"seed-{seed}" for seed in args.seeds or ()]


def train_command(config_name, args, run_dir, overrides=()):
    """The `attncli train` command of the config, as a user types it (after `python -m`)."""
    command = [
        sys.executable, "-m", "attncli", "train", str(REPO / "configs" / f"{config_name}.yaml"),
        "--data-dir", str(args.data), "--run-dir", str(run_dir), "--overwrite",
    ]
    for override in [*args.set, *overrides]:
        command += ["--set", override]
    return command


def train(config_name, args):
    """Runs `attncli train configs/CONFIG.yaml` unless `--reuse`; exits if training fails.

    With `--seeds`, one process per seed, started together, the i-th pinned to the i-th
    core this process may use (cycling when there are more seeds than cores).
    """
    if args.reuse:
        return
    runs = seed_runs(args) or [args.run_dir]
    for run_dir in runs:
        if (run_dir / "test.json").is_file() and not args.overwrite:
            sys.exit(f"{run_dir} holds a finished run: report it with --reuse, "
                     "or train it again with --overwrite")
    if not args.seeds:
        command = train_command(config_name, args, args.run_dir)
        print("$ " + " ".join(command[2:]), file=sys.stderr)
        result = subprocess.run(command, stdout=subprocess.DEVNULL)
        if result.returncode != 0:
            sys.exit(f"attncli train exited with {result.returncode}")
        return
    cores = sorted(os.sched_getaffinity(0))
    processes = []
    for index, (seed, run_dir) in enumerate(zip(args.seeds, runs)):
        core = cores[index % len(cores)]
        command = train_command(config_name, args, run_dir, [f"training.seed={seed}"])
        print(f"$ taskset -c {core} " + " ".join(command[2:]), file=sys.stderr)
        processes.append(subprocess.Popen(
            command, stdout=subprocess.DEVNULL,
            preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}),
        ))
    failed = [(seed, process.wait()) for seed, process in zip(args.seeds, processes)]
    failed = [(seed, code) for seed, code in failed if code != 0]
    if failed:
        sys.exit("; ".join(f"attncli train (seed {seed}) exited with {code}"
                           for seed, code in failed))
    (args.run_dir / "ensemble.json").unlink(missing_ok=True)  # of models trained before


def read_run(run_dir):
    """`(test, records)`: the run's `test.json` and its `metrics.jsonl` records."""
    run_dir = Path(run_dir)
    test_path = run_dir / "test.json"
    if not test_path.is_file():
        sys.exit(f"{test_path} is missing: the run has not finished (resume it, or train)")
    records = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    return json.loads(test_path.read_text("utf-8")), records


def training_summary(records):
    """A line on how long the run trained and which epoch was kept."""
    best = [record for record in records if record.get("best")][-1]
    return (
        f"trained {records[-1]['minutes']:.0f} minutes ({records[-1]['epoch']} evaluations, "
        f"{records[-1]['step']:,} steps); kept epoch {best['epoch']} "
        f"(step {best['step']:,}), chosen on validation"
    )


def ensemble_test(args):
    """The test figures of the seeds' ensemble: `RUN/ensemble.json`, decoded once.

    The ensemble decodes the test split of the first seed's config with that config's
    decoding settings, and is scored as `attncli train` scores a single model's test split.
    A file written for another set of seeds is decoded again.
    """
    runs = seed_runs(args)
    path = args.run_dir / "ensemble.json"
    if path.is_file():
        figures = json.loads(path.read_text("utf-8"))
        if figures.get("runs") == [run.name for run in runs]:
            return figures
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from attncli.files import write_json_atomically
    from benchmarks.ensemble import score, split_and_search

    config, corpus, search = split_and_search(runs[0], "test", args.data)
    print(f"decoding the test split with the ensemble of {len(runs)} runs", file=sys.stderr)
    _, figures = score([run / "model" for run in runs], corpus, config.data.task, search)
    figures = {**figures, "runs": [run.name for run in runs],
               "decoding": config.decoding.to_dict()}
    write_json_atomically(path, figures)
    return figures


def train_and_read(description, config_name):
    """The whole of a result script before its table: arguments, training, the runs' figures.

    Returns `(runs, ensemble)`: `runs` a list of `(name, test, records)`, one per
    seed with `--seeds` (else the one run), `ensemble` the seeds' test figures or None.
    """
    args = arguments(description, config_name)
    train(config_name, args)
    if not args.seeds:
        return [(str(args.run_dir), *read_run(args.run_dir))], None
    runs = [(f"seed {seed}", *read_run(run_dir))
            for seed, run_dir in zip(args.seeds, seed_runs(args))]
    return runs, ensemble_test(args)
