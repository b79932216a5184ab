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
continues it from both sides' checkpoints (`side_by_side`).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.peers import shared_data
from benchmarks.peers.side_by_side import Side, Supervisor

REPO = Path(__file__).resolve().parents[2]
# sentencepiece below 0.2: Joey's tokenizer calls `SetVocabulary`, which 0.2 removed.
JOEY_REQUIREMENTS = ("torch==2.13.0", "joeynmt==2.3.0", "importlib-metadata",
                     "sentencepiece==0.1.99")
DEFAULT_VENV = Path.home() / ".cache" / "attncli-peers" / "joeynmt-2.3-venv"
MAX_LENGTH = 100
TOKENS_PER_BATCH = 2500
BEAMS = (1, 5)


# ---------------------------------------------------------------- Joey's environment
class VenvError(Exception):
    """The virtual environment could not be made; `output` is what pip printed."""

    def __init__(self, message, output):
        super().__init__(message)
        self.output = output


def ready_venv(venv):
    """The python of Joey NMT's environment at `venv` if it is ready, else None.

    Ready means its marker file names the requirements installed.
    """
    python = Path(venv) / "bin" / "python"
    marker = Path(venv) / "attncli-peer.json"
    wanted = {"requirements": list(JOEY_REQUIREMENTS)}
    if marker.is_file() and json.loads(marker.read_text()) == wanted and python.exists():
        return python
    return None


def ensure_venv(venv):
    """Joey NMT's virtual environment at `venv`, made and installed unless it is ready
    (`ready_venv`). Returns its python.

    Raises:
        VenvError: `venv` or pip failed.
    """
    ready = ready_venv(venv)
    if ready is not None:
        return ready
    venv = Path(venv)
    python = venv / "bin" / "python"
    marker = venv / "attncli-peer.json"
    wanted = {"requirements": list(JOEY_REQUIREMENTS)}
    started = time.monotonic()
    print(f"creating Joey NMT's environment in {venv} ...", file=sys.stderr, flush=True)
    steps = [] if python.exists() else [[sys.executable, "-m", "venv", str(venv)]]
    steps.append([str(python), "-m", "pip", "install", "--quiet", *JOEY_REQUIREMENTS])
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            output = done.stdout + done.stderr
            last = output.strip().splitlines()[-1] if output.strip() else ""
            raise VenvError(f"{' '.join(command[:4])} ... failed: {last}", output)
    marker.write_text(json.dumps(wanted) + "\n")
    print(f"Joey NMT's environment ready in {time.monotonic() - started:.0f} s",
          file=sys.stderr, flush=True)
    return python


# ---------------------------------------------------------------- the configurations
def attncli_config(pairing, shared, minutes):
    """attncli's run configuration (a dict) for `pairing` on the shared files."""
    side = {"level": "sentencepiece", "sentencepiece_model": str(shared.sentencepiece_model),
            "normalization": None, "vocab_size": None}
    data = {
        "format": "parallel", "train": str(shared.prefix("train")),
        "valid": str(shared.prefix("val")), "source_suffix": shared_data.SOURCE,
        "target_suffix": shared_data.TARGET, "source": side, "target": side,
        "shared_vocab": True, "max_length": MAX_LENGTH, "batch_size": 64,
        "tokens_per_batch": TOKENS_PER_BATCH, "bucketing": True,
    }
    if pairing == "recurrent":
        config = yaml.safe_load((REPO / "configs" / "multi30k-de-en.yaml").read_text())
        config["data"] = data
        config["training"].update(epochs=1000, max_minutes=minutes)
        config["name"] = "peers-joeynmt-recurrent"
        return config
    return {
        "name": "peers-joeynmt-transformer",
        "data": data,
        "model": {
            "encoder": "self-attention", "decoder": "self-attention", "embedding_dim": 256,
            "encoder_layers": 3, "decoder_layers": 3, "heads": 4, "feed_forward_dim": 1024,
            "activation": "relu", "norm": "pre", "position_encoding": "sinusoidal",
            "score": "scaled_dot", "dropout": 0.2, "attention_dropout": 0.1,
            "tie_embeddings": "all",
        },
        "training": {
            "epochs": 1000, "max_minutes": minutes, "learning_rate": 1e-3,
            "schedule": "inverse_sqrt", "warmup_steps": 1000, "clip_norm": 1.0,
            "label_smoothing": 0.1, "average_decay": 0.999, "seed": 0,
            "checkpoint_every": 500, "eval_sentences": None, "eval_beam_size": 1,
            "patience": 6,
        },
        "decoding": {"beam_size": 5, "alpha": 0.6, "n_best": 1, "max_length_ratio": 1.5,
                     "max_length_offset": 10},
    }


def joey_config(pairing, shared, model_dir, validation_freq):
    """Joey NMT's configuration (a dict) for `pairing`, writing into `model_dir`."""
    def side(language, max_length):
        return {
            "lang": language, "max_length": max_length, "min_length": 1, "lowercase": False,
            "normalize": False, "level": "bpe", "voc_min_freq": 1,
            "voc_file": str(shared.pieces), "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": str(shared.sentencepiece_model),
                              "pretokenizer": "none"},
        }

    training = {
        "optimizer": "adam", "adam_betas": [0.9, 0.999], "loss": "crossentropy",
        "label_smoothing": 0.1, "normalization": "tokens", "clip_grad_norm": 1.0,
        "weight_decay": 0.0, "batch_size": TOKENS_PER_BATCH, "batch_type": "token",
        "batch_multiplier": 1, "early_stopping_metric": "bleu", "epochs": 1000,
        "validation_freq": validation_freq, "logging_freq": 50 if validation_freq >= 100 else 1,
        "overwrite": False,
        "shuffle": True, "print_valid_sents": [0], "keep_best_ckpts": 1, "num_workers": 0,
    }
    if pairing == "recurrent":
        # Its documented `plateau` cannot run, nor `warmupexponentialdecay` (Joey builds it
        # without its optimizer); `exponential` multiplies the rate by `decrease_factor`
        # at each epoch's start: halved about every 3,000 steps, as attncli's.
        training.update(
            scheduling="exponential", learning_rate=1e-3, learning_rate_min=1e-6,
            decrease_factor=round(0.5 ** (validation_freq / 3000), 4),
        )
        embeddings = {"embedding_dim": 256, "scale": False}
        model = {
            "initializer": "xavier_uniform", "bias_initializer": "zeros",
            "embed_initializer": "xavier_uniform", "tied_embeddings": False,
            "tied_softmax": False,
            "encoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": embeddings,
                        "hidden_size": 256, "bidirectional": True, "dropout": 0.2,
                        "num_layers": 1},
            "decoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": embeddings,
                        "hidden_size": 256, "dropout": 0.2, "hidden_dropout": 0.2,
                        "num_layers": 1, "input_feeding": True, "init_hidden": "bridge",
                        "attention": "luong"},
        }
    else:
        training.update(
            scheduling="warmupinversesquareroot", learning_rate=1e-3,
            learning_rate_warmup=1000, learning_rate_min=1e-8,
        )
        block = {"type": "transformer", "num_layers": 3, "num_heads": 4,
                 "embeddings": {"embedding_dim": 256, "scale": True, "dropout": 0.0},
                 "hidden_size": 256, "ff_size": 1024, "dropout": 0.3, "layer_norm": "pre",
                 "activation": "relu"}
        model = {
            "initializer": "xavier_uniform", "bias_initializer": "zeros",
            "embed_initializer": "xavier_uniform", "tied_embeddings": True,
            "tied_softmax": True, "encoder": block, "decoder": dict(block),
        }
    return {
        "name": f"peers-joeynmt-{pairing}",
        "joeynmt_version": "2.3.0",
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": 42,
        "data": {
            "train": str(shared.prefix("train")), "dev": str(shared.prefix("val")),
            "test": str(shared.prefix("test_2016_flickr")), "dataset_type": "plain",
            "src": side(shared_data.SOURCE, MAX_LENGTH),
            # attncli's limit counts the end token, Joey's does not.
            "trg": side(shared_data.TARGET, MAX_LENGTH - 1),
            "special_symbols": {"unk_token": "[UNK]", "unk_id": 0, "pad_token": "[PAD]",
                                "pad_id": 1, "bos_token": "[START]", "bos_id": 2,
                                "eos_token": "[END]", "eos_id": 3},
        },
        "testing": {"n_best": 1, "beam_size": 5, "beam_alpha": 1.0, "batch_size": 64,
                    "batch_type": "sentence", "eval_metrics": ["bleu"],
                    "sacrebleu_cfg": {"tokenize": "13a"}},
        "training": training,
        "model": model,
    }


def joey_validation_freq(shared, seed=0):
    """Joey's `validation_freq` for about one validation an epoch: the number of batches
    its token sampler makes of one shuffled epoch (it adds sentences in random order until
    `max(source, target) + 1` of the longest times the sentences reaches `batch_size`),
    rounded to a multiple of 50 from 100 on (Joey wants it a multiple of its
    `logging_freq`, and less than it: 50, or 1 below 100), at least 2."""
    sources, targets = shared.lengths("train")
    order = list(range(len(sources)))
    random.Random(seed).shuffle(order)
    batches, sentences, longest = 0, 0, 0
    for index in order:
        sentences += 1
        longest = max(longest, sources[index] + 1, targets[index] + 1)
        if longest * sentences >= TOKENS_PER_BATCH:
            batches, sentences, longest = batches + 1, 0, 0
    batches = max(batches + (sentences > 0), 2)
    return 50 * round(batches / 50) if batches >= 100 else batches


# ---------------------------------------------------------------- the two sides
class AttncliSide(Side):
    """`attncli train CONFIG --run-dir WORK/attncli/run`, stopped by `training.max_minutes`."""

    training_begun = re.compile(r"training epoch \d+ of \d+")
    interrupt_signal = signal.SIGTERM

    def __init__(self, core, directory, config):
        super().__init__("attncli", core, directory)
        self.config_path = self.directory / "config.yaml"
        self.run_dir = self.directory / "run"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))

    def command(self, segment, resume):
        start = ["--resume"] if resume else [str(self.config_path), "--overwrite"]
        return [sys.executable, "-m", "attncli", "train", *start, "--run-dir", self.run_dir]

    def take_kept_model(self, destination):
        for _ in range(3):  # the kept model is replaced whole; a copy may meet the swap
            if not (self.run_dir / "model").is_dir():
                return False
            try:
                shutil.copytree(self.run_dir / "model", destination, dirs_exist_ok=True)
                return True
            except (OSError, shutil.Error):
                time.sleep(1.0)
        return False

    def decode_command(self, model, source, beam):
        return [sys.executable, "-m", "attncli", "translate", model, "--input", source,
                "--beam", str(beam)]


class JoeySide(Side):
    """`python -m joeynmt train CONFIG --skip-test` in Joey's environment, one model
    directory per session (`train-1`, `train-2`, ...: Joey refuses to write into an
    existing one, or deletes it with `overwrite`), each later session starting from the
    last one's `latest.ckpt`; stopped by SIGINT at the budget (Joey then saves its
    weights and ends)."""

    training_begun = re.compile(r"EPOCH \d+")
    budget_signal = signal.SIGINT
    interrupt_signal = signal.SIGINT

    def __init__(self, core, directory, python, config):
        super().__init__("joeynmt", core, directory)
        self.python = python
        self.config = config

    def session_dir(self, segment):
        return self.directory / f"train-{segment}"

    def sessions(self):
        return sorted((path for path in self.directory.glob("train-*") if path.is_dir()),
                      key=lambda path: int(path.name.split("-")[1]))

    def command(self, segment, resume):
        config = json.loads(json.dumps(self.config))
        config["model_dir"] = str(self.session_dir(segment))
        if resume:
            latest = self.latest_checkpoint()
            if latest is not None:
                config["training"]["load_model"] = str(latest)
        if self.session_dir(segment).exists():
            shutil.rmtree(self.session_dir(segment))
        path = self.directory / f"config-{segment}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        return [self.python, "-m", "joeynmt", "train", path, "--skip-test"]

    def latest_checkpoint(self):
        for folder in reversed(self.sessions()):
            if (folder / "latest.ckpt").exists():
                return (folder / "latest.ckpt").resolve()
        return None

    def take_kept_model(self, destination):
        """The newest session's `best.ckpt` (Joey carries its best score across sessions,
        so a later one beat every earlier one), else, before any validation, the last
        weights saved."""
        for name in ("best.ckpt", "latest.ckpt"):
            for folder in reversed(self.sessions()):
                if (folder / name).exists():
                    shutil.copy2((folder / name).resolve(), destination / "model.ckpt")
                    (destination / "kept.txt").write_text(f"{(folder / name).resolve()}\n")
                    return True
        return False

    def decode_command(self, model, beam):
        """Joey's `translate` mode reading the sources on stdin. Its output goes to stdout:
        with `-o FILE` Joey 2.3 fails after translating (`BaseConfig` has no `n_best`)."""
        config = json.loads(json.dumps(self.config))
        config["model_dir"] = str(model)
        config["testing"].update(load_model=str(Path(model) / "model.ckpt"), beam_size=beam)
        path = Path(model) / f"translate-beam{beam}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        return [self.python, "-m", "joeynmt", "translate", path]


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
