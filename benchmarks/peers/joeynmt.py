"""attncli against Joey NMT 2.3 on Multi30k German→English: the same data, minutes and cores.

    python -m benchmarks.peers.joeynmt --pairing recurrent [--minutes 120] [--cores 0,1]
    python -m benchmarks.peers.joeynmt --pairing transformer [--minutes 120] [--cores 0,1]
    python -m benchmarks.peers.joeynmt --pairing recurrent --minutes 0.5 --limit 200 --cores 0,0

Installing Joey NMT. It runs in a virtual environment of its own (its `protobuf<3.21` pin
would downgrade attncli's), which this script creates on first use at `--venv` (default
`~/.cache/attncli-peers/joeynmt-2.3-venv`, outside the repository, so that later runs and
the test find it ready):

    python3 -m venv VENV
    VENV/bin/python -m pip install "torch==2.13.0" "joeynmt==2.3.0" importlib-metadata \
        "sentencepiece==0.1.99"

`torch==2.13.0` is asked for exactly: pip takes the CPU build these machines keep on disk
(pip's configured find-links), where an open range would fetch a CUDA build of several GB
from PyPI; PyTorch's own CPU package index is not reachable from these machines. Joey NMT
imports `importlib_metadata` without declaring it, and its SentencePiece tokenizer calls
`SentencePieceProcessor.SetVocabulary`, which sentencepiece 0.2 (what it installs) no
longer has. About 1.6 GB installed: 20 minutes with an empty pip cache and 6 with a
filled one, on a core busy with other work (2026-11-28); nothing once installed.

What both sides get:
- data: Multi30k `train` (29,000 pairs) to learn, `val` (1,014) for each side's own
  validation and early stopping, `test_2016_flickr` (1,000) read only for the table;
  cut into pieces by one SentencePiece model learned once (`shared_data`: unigram, 8,000
  pieces, joint German-English), identical raw text in, detokenized cased text out;
- lengths: at most 100 pieces a side (the longest training sentence has 55, so no pair is
  dropped by either; Joey's target limit is 99 because attncli counts the end token);
- batches: token-based, about 2,500 padded token slots each (attncli: bucketed by length,
  `tokens_per_batch: 2500`; Joey: `batch_type: token`, `batch_size: 2500`, which counts
  `max(source, target) + 1` slots a sentence and does not bucket);
- time: `--minutes` of training each (see `side_by_side`: the clock starts when the log
  says training began), side by side, each pinned to its core of `--cores`; the kept model
  (best by validation BLEU so far) taken at 30, 60 and `--minutes`;
- scoring: each side decodes the test sources greedily and with beam 5 (attncli: α 0.6,
  at most 1.5 × source + 10 tokens; Joey: its documented `beam_alpha: 1.0`, its default
  limit of 1.5 × the batch's longest source), and the same sacreBLEU call scores both
  outputs against the raw references (BLEU 13a, cased; chrF).

The pairings and each side's own practice:
- `recurrent`: attncli's `configs/multi30k-de-en.yaml` as shipped (bi-GRU 256 per direction
  concatenated, GRU 256, Luong general attention without input feeding, output layer tied to
  the target embeddings, dropout 0.4, label smoothing 0.1, Adam 2e-3 warmed up over 300
  steps and halved every 3,000, weights averaged with decay 0.999, evaluation after each
  epoch, patience 6); Joey: its documented 256-unit recipe (v1 `iwslt_deen_bahdanau.yaml`:
  Luong attention with input feeding, Adam 1e-3, dropout 0.2 and hidden dropout 0.2) with a
  GRU bi-encoder 256 per direction and a GRU decoder 256 (the cells and sizes of attncli's),
  `init_hidden: bridge`, gradient norm clipped to 1.0, label smoothing 0.1. Its documented
  `plateau` scheduler cannot run under torch 2.13 (it passes `verbose`, which torch
  removed), nor `warmupexponentialdecay` (Joey 2.3 builds it without its optimizer), and
  Joey refuses a config without a scheduler, so the rate decays about as attncli's does:
  `exponential`, multiplied at each epoch's start by 0.5 ** (steps an epoch / 3,000), so
  halved about every 3,000 steps (no warmup, as in the recipe).
- `transformer`: both 3 encoder and 3 decoder blocks, 4 heads, d_model 256, feed-forward
  1,024, pre-norm, ReLU, sinusoidal positions, source and target embeddings and the output
  layer one matrix; both Adam with an inverse square root schedule at a peak of 1e-3 after
  1,000 warmup steps (Joey's documented schedule, `warmupinversesquareroot`, whose
  documented warmup of 4,000 steps is for updates of 32,768 tokens), label smoothing 0.1,
  gradient norm clipped to 1.0. attncli: dropout 0.2 and attention dropout 0.1 with the
  weights averaged (its Multi30k hybrid's practice); Joey: dropout 0.3 (its documented
  IWSLT14 Transformer's).
- Validation: each side validates on all 1,014 validation sentences by greedy BLEU, after
  every epoch; for Joey, which validates every `validation_freq` steps, that is the number
  of batches its token sampler makes of one epoch, counted here on a shuffled epoch.

Tokens trained: Joey's own count (`total_tokens` in its last checkpoint: non-padding
target tokens, end of sentence included), and the same count for attncli from its last
checkpoint (completed epochs × the target tokens of an epoch + those of the epoch under
way). Target tokens per CPU second divide them by the training process's CPU seconds
(`wait4`: start-up, validation and checkpoints included); the logged rate is the median
of each toolkit's own progress lines (training steps only, wall time).

The table goes to stdout and `WORK/results.md`; the run is resumable: the same command
continues it from both sides' checkpoints (`side_by_side`). Joey's environment, both sides'
configurations and their training commands are in `joeynmt_sides`.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.peers import shared_data
from benchmarks.peers.joeynmt_sides import (
    DEFAULT_VENV, AttncliSide, JoeySide, VenvError, attncli_config, ensure_venv, joey_config,
    joey_validation_freq)
from benchmarks.peers.side_by_side import Supervisor

# The test of the command asks this module whether Joey's environment is ready.
from benchmarks.peers.joeynmt_sides import ready_venv  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
BEAMS = (1, 5)


# ---------------------------------------------------------------- after training
def decode_marks(supervisor, attncli, joey, shared):
    """Each side's kept model at each mark, decoded greedily and with beam 5 (both sides
    at once, each on its core); outputs already written are kept."""
    source = shared.path("test_2016_flickr", shared_data.SOURCE)
    for mark in supervisor.marks:
        for beam in BEAMS:
            jobs = []
            for side in (attncli, joey):
                model = supervisor.state[side.name]["marks"][f"{mark:g}"]["model"]
                output = supervisor.mark_folder(mark, side).parent / f"{side.name}.beam{beam}.txt"
                if model is None or output.exists():
                    continue
                partial = output.with_suffix(".partial")
                if side is attncli:
                    command, stdin = side.decode_command(model, source, beam), subprocess.DEVNULL
                else:
                    command, stdin = side.decode_command(model, beam), open(source)
                log = open(output.with_suffix(".log"), "w")
                print(f"decoding test_2016_flickr: {side.name}, {mark:g} minutes, beam {beam}",
                      file=sys.stderr, flush=True)
                process = subprocess.Popen(
                    ["taskset", "-c", str(side.core), *map(str, command)], stdin=stdin,
                    stdout=open(partial, "w"), stderr=log,
                    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                )
                jobs.append((side, process, partial, output, log))
            for side, process, partial, output, log in jobs:
                if process.wait():
                    raise SystemExit(f"decoding with {side.name} failed; see {log.name}")
                partial.rename(output)


def score(hypotheses_path, references):
    """BLEU (13a, cased) and chrF of a decoded file against the references, and the
    BLEU signature."""
    import sacrebleu

    hypotheses = Path(hypotheses_path).read_text("utf-8").splitlines()
    if len(hypotheses) != len(references):
        raise SystemExit(f"{hypotheses_path}: {len(hypotheses)} lines for "
                         f"{len(references)} references")
    bleu = sacrebleu.metrics.BLEU()
    figure = bleu.corpus_score(hypotheses, [references])
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references])
    return {"bleu": figure.score, "chrf": chrf.score, "signature": str(bleu.get_signature())}


def attncli_trained(run_dir, epoch_tokens):
    """`(steps, target tokens trained)` from attncli's last checkpoint."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(Path(run_dir) / "checkpoints"))
    # The training position's variables, saved at the checkpoint's top level.
    value = {name: int(reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE"))
             for name in ("epoch", "batch", "epoch_tokens", "optimizer/_iterations")}
    # `epoch` counts finished epochs; `epoch_tokens` holds the last one's until the next
    # starts, the one under way's while `batch` (its batches trained) is above 0.
    under_way = value["epoch_tokens"] if value["batch"] else 0
    return value["optimizer/_iterations"], value["epoch"] * epoch_tokens + under_way


def joey_trained(python, checkpoint):
    """`(steps, target tokens trained)` from Joey's last checkpoint."""
    code = ("import sys, torch; c = torch.load(sys.argv[1], map_location='cpu', "
            "weights_only=False)['stats_state']; print(c['steps'], c['total_tokens'])")
    done = subprocess.run([str(python), "-c", code, str(checkpoint)], capture_output=True,
                          text=True, check=True)
    steps, tokens = done.stdout.split()
    return int(steps), int(tokens)


def median_rate(pattern, text):
    """The median of the rates a log's progress lines report, its first line left out
    (it includes the tracing or warm-up)."""
    found = [float(value.replace(",", "")) for value in re.findall(pattern, text)]
    return statistics.median(found[1:]) if len(found) > 1 else None


def table(args, supervisor, attncli, joey, shared, machine):
    """The markdown of the run's results (see the module's docstring)."""
    references = shared.lines("test_2016_flickr", shared_data.TARGET)
    rows, signature = [], None
    for mark in supervisor.marks:
        for side in (attncli, joey):
            taken = supervisor.state[side.name]["marks"][f"{mark:g}"]
            figures = []
            for beam in BEAMS:
                output = supervisor.mark_folder(mark, side).parent / f"{side.name}.beam{beam}.txt"
                figures.append(score(output, references) if output.exists() else None)
            signature = signature or next((f["signature"] for f in figures if f), None)
            cells = [f"{f['bleu']:.2f}" if f else "–" for f in figures]
            chrf = f"{figures[1]['chrf']:.2f}" if figures[1] else "–"
            rows.append(f"| {mark:g} | {side.name} | {taken['seconds'] / 60:.1f} | "
                        f"{cells[0]} | {cells[1]} | {chrf} |")
    epoch_tokens = shared.target_tokens("train")
    usage = []
    for side in (attncli, joey):
        record = supervisor.state[side.name]
        if side is attncli:
            steps, tokens = attncli_trained(attncli.run_dir, epoch_tokens)
            pattern = r"([\d,]+) target tokens/s"
        else:
            steps, tokens = joey_trained(joey.python, joey.latest_checkpoint())
            pattern = r"Tokens per Sec:\s+([\d.]+)"
        cpu = sum(session.get("cpu_seconds", 0.0) for session in record["sessions"])
        wall = sum(session["ended"] - session["started"] for session in record["sessions"]
                   if "ended" in session)
        peak = max(session.get("peak_rss", 0) for session in record["sessions"])
        logged = median_rate(pattern, side.log_path.read_text("utf-8", "replace"))
        usage.append(
            f"| {side.name} | {steps:,} | {tokens:,} | {tokens / epoch_tokens:.2f} | {cpu:,.0f} | "
            f"{tokens / max(cpu, 1e-9):,.0f} | {'–' if logged is None else f'{logged:,.0f}'} | "
            f"{peak / 2**30:.2f} GB | {wall / 60:.1f} min |"
        )
    command = " ".join(["python -m benchmarks.peers.joeynmt", *sys.argv[1:]])
    return "\n".join([
        f"### Multi30k De→En, {args.pairing}: attncli against Joey NMT 2.3.0 "
        f"({machine['date']})",
        "",
        f"`{command}`",
        "",
        f"Cores {args.cores} (attncli, Joey NMT); load average {machine['load_start']} at the "
        f"start, {machine['load_end']} at the end; {machine['cpu']}.",
        "",
        "| minutes | toolkit | kept model taken at (training minutes) | BLEU greedy | "
        "BLEU beam 5 | chrF beam 5 |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        "| toolkit | steps | target tokens trained | epochs | CPU s | target tokens / CPU s | "
        "logged target tokens/s (median) | peak RSS | process wall time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *usage,
        "",
        f"sacreBLEU `{signature}` on the detokenized cased output of test_2016_flickr "
        f"({len(references):,} sentences).",
    ])


def machine_state():
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": load,
            "cpu": f"{cpu}, {os.cpu_count()} CPUs"}


# ---------------------------------------------------------------- the command
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairing", choices=["recurrent", "transformer"], required=True)
    parser.add_argument("--minutes", type=float, default=120.0,
                        help="training minutes of each side (fractions allowed)")
    parser.add_argument("--marks", default="30,60",
                        help="earlier minutes at which the kept models are scored too")
    parser.add_argument("--cores", default="0,1",
                        help="attncli's core and Joey's, for taskset (0,0 shares one)")
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
        help="the shared data folder (multi30k/ inside)",
    )
    parser.add_argument("--work-dir", type=Path,
                        help="where everything is written (default runs/peers/joeynmt-PAIRING)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                        help="Joey NMT's virtual environment (made if missing)")
    parser.add_argument("--limit", type=int,
                        help="only the first N lines of each Multi30k file (a smoke run)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args(argv)
    cores = args.cores.split(",")
    if len(cores) != 2 or not all(core.strip().isdigit() for core in cores):
        parser.error(f"--cores takes two CPU numbers, attncli's and Joey's. Received: {args.cores}")
    args.core_list = [int(core) for core in cores]
    try:
        args.mark_list = [float(mark) for mark in args.marks.split(",") if mark.strip()]
    except ValueError:
        parser.error(f"--marks takes minutes separated by commas. Received: {args.marks}")
    args.work_dir = args.work_dir or REPO / "runs" / "peers" / f"joeynmt-{args.pairing}"
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        python = ensure_venv(args.venv)
    except VenvError as error:
        raise SystemExit(str(error)) from None
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    started = work / "machine.json"  # the machine as the run's first session found it
    if not started.is_file():
        started.write_text(json.dumps(machine_state()) + "\n")
    start = json.loads(started.read_text())
    print("preparing the shared data and SentencePiece model ...", file=sys.stderr, flush=True)
    shared = shared_data.prepare(args.data / "multi30k", work / "data", limit=args.limit,
                                 vocab_size=args.vocab_size)
    attncli = AttncliSide(args.core_list[0], work / "attncli",
                          attncli_config(args.pairing, shared, args.minutes))
    joey = JoeySide(args.core_list[1], work / "joeynmt", python,
                    joey_config(args.pairing, shared, work / "joeynmt" / "train-1",
                                joey_validation_freq(shared)))
    marks = [mark for mark in args.mark_list if mark < args.minutes]
    supervisor = Supervisor([attncli, joey], work, args.minutes, marks)
    supervisor.run()
    decode_marks(supervisor, attncli, joey, shared)
    machine = {"date": start["date"], "load_start": start["load"],
               "load_end": machine_state()["load"], "cpu": start["cpu"]}
    markdown = table(args, supervisor, attncli, joey, shared, machine)
    (work / "results.md").write_text(markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
