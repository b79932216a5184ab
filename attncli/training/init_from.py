"""Fine-tuning: a new run that starts from the model another run kept.

    attncli train finetune.yaml --init-from runs/default

The new run takes RUN's kept model (`RUN/model`: its weights, and its vocabularies and
tokenizer files, copied into the new run, which learns no vocabulary of its own); its
optimizer starts fresh and its learning-rate schedule at step 0. The new configuration
must build the same model: every `model:` key equal to RUN's but `dropout` and
`attention_dropout` (they shape no weight), and every tokenization and vocabulary key of
`data:` equal (`source`, `target`, `shared_vocab`, `source_end`).

Two changes of architecture are allowed. A model may gain an alignment layer
(`model.alignment_layer`, trained by guided alignment). A run with a recurrent encoder may
grow into a cascade (`encoder: cascade`, the recurrent layers of Chen et al. 2018 with self-attention
blocks stacked on them). The keys that shape only the blocks are the new configuration's
to set; every other key stays RUN's. The weights the two models share (same path, same
shape) are RUN's, the rest start fresh (`attncli.training.initial_weights` says which).

Where the run came from is written into it (`init_from.json`, `train.log`, and the kept
model's metadata), so a fine-tuning run that is resumed continues from its own checkpoint;
only a run killed before its first checkpoint starts from RUN again.

No TensorFlow here: the checks run before it is imported.
"""

import dataclasses
import hashlib
import json
from pathlib import Path

from attncli.config.model import ModelSettings
from attncli.config.run import run_config_from_mapping
from attncli.config.yaml_files import load_yaml
from attncli.errors import AttncliError, shown
from attncli.files import write_json_atomically
from attncli.model.saving import (
    CONFIG_FILE, WEIGHTS_FILE, missing_model_file, read_model_config,
)
from attncli.training.run_directory import RunDirectory

# Model keys that shape no weight: fine-tuning may change them.
FREE_MODEL_KEYS = ("dropout", "attention_dropout")
# Model keys that shape only a cascade's blocks: a recurrent run grown into a cascade
# takes them from the new configuration ...
BLOCK_KEYS = ("encoder_blocks", "encoder_norm_gain")
# ... and these too, unless a self-attention decoder's blocks read them as well.
SHARED_BLOCK_KEYS = ("heads", "feed_forward_dim", "activation", "norm")
# The data keys that decide the vocabularies and how text becomes ids.
_DATA_KEYS = ("shared_vocab", "source_end")


@dataclasses.dataclass(frozen=True)
class InitFrom:
    """The kept model a run starts from.

    Attributes:
        run: the absolute path of the run it comes from.
        model_dir: that run's kept model directory, `run/model`.
        metadata: the kept model's metadata (its epoch and validation figures).
        weights_sha256: the SHA-256 of its weights when the new run started from
            them, or None (before the new run recorded it).
    """

    run: Path
    model_dir: Path
    metadata: dict
    weights_sha256: str | None = None

    @property
    def weights_path(self):
        return self.model_dir / WEIGHTS_FILE

    def describe(self):
        """`runs/default/model (epoch 3, valid bleu 31.2)`: what the run starts from."""
        figures = [f"epoch {self.metadata['epoch']}"] if "epoch" in self.metadata else []
        for key in ("bleu", "chrf", "wer", "per", "valid_loss"):
            value = self.metadata.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                figures.append(f"valid {key.removeprefix('valid_')} {value:.4g}")
        return f"{self.model_dir}" + (f" ({', '.join(figures)})" if figures else "")

    def record(self):
        """What `init_from.json` holds: where the weights came from, and their SHA-256."""
        return {
            "run": str(self.run),
            "model": str(self.model_dir),
            "weights_sha256": self.weights_digest(),
            "metadata": self.metadata,
        }

    def weights_digest(self):
        """The SHA-256 of the kept model's weights file, in hex."""
        digest = hashlib.sha256()
        with open(self.weights_path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def check_unchanged(self):
        """Raise when the weights are no longer those the new run recorded at its start
        (RUN trained again, or its model replaced, before the new run's first checkpoint).

        Raises:
            AttncliError: one line naming the weights file.
        """
        if self.weights_sha256 is None:
            return
        try:
            unchanged = self.weights_digest() == self.weights_sha256
        except OSError as error:
            raise AttncliError(
                f"cannot read {self.weights_path} ({error.strerror or error}), the weights "
                "this run started from: put them back, or start again with --overwrite"
            ) from None
        if not unchanged:
            raise AttncliError(
                f"{self.weights_path} has changed since this run started from it (its "
                "SHA-256 is not the one in init_from.json): put those weights back, or "
                "start again with --overwrite"
            )


def check_init_from(path, config):
    """The kept model of the run at `path`, checked against the new run's `config`.

    Args:
        path: the run directory given to `--init-from`.
        config: the new run's `RunConfig`.

    Returns:
        An `InitFrom`.

    Raises:
        AttncliError: one line naming the missing or damaged file, or the first
            model, tokenization or vocabulary key whose value differs from RUN's.
    """
    run = RunDirectory.open(path)
    if not run.config_path.is_file():
        raise AttncliError(
            f"{run.config_path} is missing: --init-from needs the configuration the run "
            "trained with, to check the new one builds the same model"
        )
    try:
        saved = run_config_from_mapping(load_yaml(run.config_path))
    except AttncliError as error:
        raise AttncliError(f"{run.config_path} is damaged: {error}") from None
    model_dir = run.model_dir
    if not (model_dir / CONFIG_FILE).is_file():
        raise AttncliError(
            f"{model_dir / CONFIG_FILE} is missing: {run.path} has kept no model to start "
            "from; train it until it keeps one (after its first evaluation)"
        )
    kept = read_model_config(model_dir)
    missing = missing_model_file(model_dir)
    if missing is not None:
        raise AttncliError(
            f"{model_dir / missing} is missing: the kept model is incomplete; copy the run "
            "again, or give another --init-from"
        )
    keys = _model_keys(kept["model"], config.model)
    _check_same(
        {key: getattr(kept["model"], key) for key in keys},
        {key: getattr(config.model, key) for key in keys},
        "model", model_dir / CONFIG_FILE,
        "fine-tuning keeps RUN's architecture (a recurrent encoder may only grow into a "
        "cascade)",
    )
    if kept["source_end"] != config.data.source_end:
        _differs("data.source_end", config.data.source_end, kept["source_end"],
                 model_dir / CONFIG_FILE, "fine-tuning keeps RUN's vocabularies")
    for side in ("source", "target"):
        _check_same(
            dataclasses.asdict(getattr(saved.data, side)),
            dataclasses.asdict(getattr(config.data, side)),
            f"data.{side}", run.config_path, "fine-tuning keeps RUN's vocabularies",
        )
    _check_same(
        {key: getattr(saved.data, key) for key in _DATA_KEYS},
        {key: getattr(config.data, key) for key in _DATA_KEYS},
        "data", run.config_path, "fine-tuning keeps RUN's vocabularies",
    )
    return InitFrom(run=run.path.resolve(), model_dir=model_dir.resolve(),
                    metadata=kept["metadata"])


def take_tokenization(path, config):
    """`config` with each side's tokenization (`data.source`, `data.target`) that it
    leaves at the defaults taken from the run at `path`, and what was taken.

    A fine-tuning run must tokenize as RUN did; a config that says nothing of a side
    (every key at its default) means "as RUN", so that side is RUN's rather than a
    difference to refuse. A side set to anything else is left for `check_init_from`
    to compare.

    Returns:
        `(config, taken)`: `taken` the keys taken (`["data.source"]`), [] for none (also
        when RUN's configuration cannot be read: `check_init_from` names that).
    """
    from attncli.config.data import SideConfig

    try:
        saved = run_config_from_mapping(load_yaml(RunDirectory.open(path).config_path))
    except (AttncliError, OSError):
        return config, []
    sides, taken = {}, []
    for side in ("source", "target"):
        ours, theirs = getattr(config.data, side), getattr(saved.data, side)
        if ours == SideConfig() and theirs != ours:
            sides[side] = theirs
            taken.append(f"data.{side}")
    if not taken:
        return config, []
    return dataclasses.replace(config, data=dataclasses.replace(config.data, **sides)), taken


def grows_into_cascade(kept, model):
    """Whether a run whose kept model has settings `kept` starts a model of settings
    `model` by growing its recurrent encoder into a cascade."""
    return kept.encoder == "rnn" and model.encoder == "cascade"


def gains_alignment_layer(kept, model):
    """Whether a model of settings `model` adds an alignment layer to RUN's (`kept`)."""
    return model.alignment_layer and (
        not kept.alignment_layer or kept.alignment_context != model.alignment_context)


def _model_keys(kept, model):
    """The model keys that must be equal to RUN's."""
    free = FREE_MODEL_KEYS
    if gains_alignment_layer(kept, model):
        free += ("alignment_layer", "alignment_context")
    if grows_into_cascade(kept, model):
        free += ("encoder",) + BLOCK_KEYS
        if kept.decoder != "self-attention":
            free += SHARED_BLOCK_KEYS
    return [field.name for field in dataclasses.fields(ModelSettings)
            if field.name not in free]


def _check_same(theirs, ours, prefix, source, reason):
    for key, value in theirs.items():
        if ours[key] != value:
            _differs(f"{prefix}.{key}", ours[key], value, source, reason)


def _differs(key, ours, theirs, source, reason):
    raise AttncliError(
        f"--init-from: {key} is {shown(ours)} here but {shown(theirs)} in {source}; "
        f"{reason}: set it as RUN has it, or train without --init-from"
    )


def write_record(run, init_from):
    """Write `init_from.json` into `run` (a `RunDirectory`) and log it."""
    write_json_atomically(run.init_from_path, init_from.record())
    run.log(f"initialised from {init_from.describe()}")


def read_record(run):
    """The `InitFrom` recorded in `run`, or None for a run that started from scratch.

    Raises:
        AttncliError: when `init_from.json` is damaged.
    """
    path = run.init_from_path
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return InitFrom(run=Path(record["run"]), model_dir=Path(record["model"]),
                        metadata=dict(record.get("metadata") or {}),
                        weights_sha256=record.get("weights_sha256"))
    except (OSError, ValueError, KeyError, TypeError):
        raise AttncliError(
            f"{path} is unreadable or damaged; it names the run this one started from: "
            "put it back, or start again with --overwrite"
        ) from None
