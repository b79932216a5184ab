"""The whole configuration of a run: `data`, `model`, `training` and `decoding`.

    run = load_run_config("configs/default.yaml", overrides=["training.epochs=3"])

Every section is a validated dataclass (see `attncli.config.schema`); the YAML file and the
`--set` overrides are merged first, then checked as a whole, so a bad key is
reported with its full path whichever of the two it came from. No TensorFlow here.
"""

import dataclasses
from importlib import resources
from typing import Literal

from attncli.config.schema import ConfigError, apply_overrides, from_mapping, load_yaml
from attncli.config.data import DataConfig
from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.config.training import TrainingConfig
from attncli.errors import shown

# The longest file name most filesystems take (NAME_MAX).
_NAME_BYTES = 255

# Vocabulary sizes are facts of the data, not choices: they come from the vocabularies.
_FROM_VOCABULARIES = ("source_vocab_size", "target_vocab_size")


@dataclasses.dataclass(frozen=True)
class LoopConfig(TrainingConfig):
    """The `training:` section: the training step's settings plus the loop's.

    Args (beyond `TrainingConfig`'s optimiser, schedule and loss):
        epochs: int >= 1, passes over the training pairs. Defaults to 10.
        max_minutes: float or None, stop (with a checkpoint and the best model kept)
            once training has run this long. Defaults to None.
        patience: int or None, stop after this many evaluations without a better
            validation metric. Defaults to None (never stop early).
        seed: int in [0, 2**32 - 1], seeds weights, dropout and data order. Defaults to 0.
        checkpoint_every: int >= 1, steps between checkpoints (one is also written
            at the end of each epoch and on interruption). Defaults to 500.
        eval_sentences: int or None, distinct validation sources decoded for the
            metric after each epoch, each scored against all of its references (all
            pairs count for the loss). Defaults to 500.
        eval_beam_size: int >= 1, the beam used for that metric. Defaults to 1.
        distribute: `"none"` (one device), `"mirrored"` (every GPU of this machine,
            or its logical CPU devices) or `"multi-worker"` (the machines of
            `TF_CONFIG`): TensorFlow's strategy that trains on them. Each batch of
            `data.batch_size` sentences is split across the replicas, so the run
            learns as on one device (exactly without dropout; with dropout the
            replicas draw the same masks for their rows). Defaults to `"none"`.
        cpu_replicas: int >= 1 or None; with `"mirrored"` on a machine without
            GPUs, split the CPU into this many logical devices, one replica each
            (to try or test a distributed setup; the replicas share the cores).
            Defaults to None (the CPU is one device).
    """

    epochs: int = 10
    max_minutes: float | None = None
    patience: int | None = None
    seed: int = 0
    checkpoint_every: int = 500
    eval_sentences: int | None = 500
    eval_beam_size: int = 1
    distribute: Literal["none", "mirrored", "multi-worker"] = "none"
    cpu_replicas: int | None = None

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.seed < 2**32:
            raise ValueError(
                f"seed must be in [0, 2**32 - 1] (what TensorFlow and NumPy accept). "
                f"Received: seed={self.seed}"
            )
        for name in ("epochs", "checkpoint_every", "eval_beam_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("patience", "eval_sentences", "cpu_replicas"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be positive or null, got {self.max_minutes}")
        if self.cpu_replicas is not None and self.distribute != "mirrored":
            raise ValueError(
                f"cpu_replicas splits the CPU for distribute: mirrored only, got "
                f"cpu_replicas={self.cpu_replicas} with distribute: {self.distribute}"
            )


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a run needs to be repeated.

    Args:
        name: str, the run's name; its directory defaults to `runs/NAME`.
        data: `DataConfig`.
        model: `ModelConfig` without the vocabulary sizes (taken from the data).
        training: `LoopConfig`.
        decoding: `SearchConfig`, the default search of `attncli translate`.
    """

    name: str = "default"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: dict = dataclasses.field(default_factory=dict)
    training: LoopConfig = dataclasses.field(default_factory=LoopConfig)
    decoding: SearchConfig = dataclasses.field(default_factory=SearchConfig)

    def __post_init__(self):
        if (
            not self.name or self.name in (".", "..") or "/" in self.name or "\\" in self.name
            or not self.name.isprintable()
            or len(self.name.encode("utf-8", "surrogatepass")) > _NAME_BYTES
        ):
            raise ValueError(
                "name must be a plain folder name (it names runs/NAME): printable, no / or "
                f"\\, at most {_NAME_BYTES} bytes. Received: name={shown(self.name)}"
            )

    def model_config(self, source_vocab_size, target_vocab_size):
        """The `ModelConfig` of this run for vocabularies of the given sizes."""
        return ModelConfig(
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            **self.model,
        )


def run_config_from_mapping(mapping):
    """Validate a whole configuration mapping (YAML and overrides merged)."""
    if not isinstance(mapping, dict):
        raise ConfigError("the configuration must be a mapping of sections")
    mapping = dict(mapping)
    model = mapping.get("model") or {}
    if not isinstance(model, dict):
        raise ConfigError("model: expected a mapping of keys to values")
    for key in _FROM_VOCABULARIES:
        if key in model:
            side = key.split("_")[0]
            raise ConfigError(
                f"model.{key}: set by the vocabulary; choose its size with "
                f"data.{side}.vocab_size instead"
            )
    # Validated with stand-in vocabulary sizes, so a bad model key fails now, not
    # after the corpus has been read.
    from_mapping(ModelConfig, {**model, "source_vocab_size": 5, "target_vocab_size": 5},
                 "model")
    mapping.pop("model", None)
    config = from_mapping(RunConfig, mapping)
    return dataclasses.replace(config, model=dict(model))


def load_run_config(path=None, overrides=()):
    """Read a run configuration from YAML (the bundled default if `path` is None)."""
    mapping = load_yaml(path) if path is not None else load_yaml(default_config_path())
    apply_overrides(mapping, overrides)
    return run_config_from_mapping(mapping)


def default_config_path():
    """The `default.yaml` shipped with attncli: the bundled corpus, ten minutes on a CPU."""
    return resources.files("attncli") / "configs" / "default.yaml"
