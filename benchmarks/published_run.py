"""Shared by the result scripts: train a shipped config with `attncli train`, read the run.

A result script either trains (`attncli train CONFIG --data-dir DATA --run-dir RUN`, the
exact command a user types, progress on stderr) or, given `--reuse`, reads a run that
finished before; then it prints the run's test figures beside the published ones.
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
    return parser.parse_args()


def train(config_name, args):
    """Runs `attncli train configs/CONFIG.yaml` unless `--reuse`; exits if training fails."""
    if args.reuse:
        return
    if (args.run_dir / "test.json").is_file() and not args.overwrite:
        sys.exit(f"{args.run_dir} holds a finished run: report it with --reuse, "
                 "or train it again with --overwrite")
    command = [
        sys.executable, "-m", "attncli", "train", str(REPO / "configs" / f"{config_name}.yaml"),
        "--data-dir", str(args.data), "--run-dir", str(args.run_dir), "--overwrite",
    ]
    for override in args.set:
        command += ["--set", override]
    print("$ " + " ".join(command[2:]), file=sys.stderr)
    result = subprocess.run(command, stdout=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"attncli train exited with {result.returncode}")


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


def train_and_read(description, config_name):
    """The whole of a result script before its table: arguments, training, the run's figures."""
    args = arguments(description, config_name)
    train(config_name, args)
    return read_run(args.run_dir)
