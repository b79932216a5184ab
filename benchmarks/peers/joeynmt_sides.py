"""Each toolkit's side of `benchmarks.peers.joeynmt`: Joey NMT's virtual environment, both
sides' configurations of a pairing, and the two `Side`s that train them (`side_by_side`) and
hand over their kept models. What each setting is, and why: `benchmarks.peers.joeynmt`.
"""

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.peers import shared_data
from benchmarks.peers.side_by_side import Side

REPO = Path(__file__).resolve().parents[2]
# sentencepiece below 0.2: Joey's tokenizer calls `SetVocabulary`, which 0.2 removed.
JOEY_REQUIREMENTS = ("torch==2.13.0", "joeynmt==2.3.0", "importlib-metadata",
                     "sentencepiece==0.1.99")
DEFAULT_VENV = Path.home() / ".cache" / "attncli-peers" / "joeynmt-2.3-venv"
MAX_LENGTH = 100
TOKENS_PER_BATCH = 2500


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
