"""The whole configuration of a run: `data`, `model`, `training` and `decoding`.

    run = load_run_config("configs/default.yaml", overrides=["training.epochs=3"])

Every section is a validated dataclass (see `attncli.config.schema`); the YAML file and the
`--set` overrides are merged first, then checked as a whole, so a bad key is
reported with its full path whichever of the two it came from. No TensorFlow here.
"""

import dataclasses
import math
from importlib import resources

from attncli.config.schema import ConfigError, apply_overrides, from_mapping, load_yaml
from attncli.config.data import DataConfig
from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.config.training import LOWER_IS_BETTER, STOP_METRICS, LoopConfig
from attncli.errors import shown

# The longest file name most filesystems take (NAME_MAX).
_NAME_BYTES = 255

# Vocabulary sizes are facts of the data, not choices: they come from the vocabularies.
_FROM_VOCABULARIES = ("source_vocab_size", "target_vocab_size")


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
        fitting = STOP_METRICS[self.data.task]
        if self.training.stop_metric not in (None, *fitting):
            raise ValueError(
                f"training.stop_metric must be {', '.join(fitting[:-1])} or {fitting[-1]} "
                f"for a {self.data.task} task (data.format={self.data.format}). Received: "
                f"training.stop_metric={self.training.stop_metric}"
            )

    @property
    def stop_metric(self):
        """The validation figure that keeps the best model and counts patience:
        `training.stop_metric`, or the task's own (`"bleu"`, or `"wer"`)."""
        return self.training.stop_metric or STOP_METRICS[self.data.task][0]

    @property
    def stop_figure(self):
        """The key of the stop metric in an evaluation's record (`"valid_loss"` for loss)."""
        return "valid_loss" if self.stop_metric == "loss" else self.stop_metric

    def maximised(self, figures):
        """The stop metric of an evaluation's `figures` (a record) as a value to maximise:
        the figure itself (BLEU, chrF) or minus it (loss, PER, WER)."""
        value = figures[self.stop_figure]
        return -value if self.stop_metric in LOWER_IS_BETTER else value

    def shown_metric(self, maximised):
        """The stop metric as users read it, from `maximised`'s value (None for -inf)."""
        if not math.isfinite(maximised):
            return None
        return -maximised if self.stop_metric in LOWER_IS_BETTER else maximised

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
    if model.get("tie_embeddings") == "all" and not config.data.shared_vocab:
        raise ConfigError(
            "model.tie_embeddings: 'all' gives the source and target one embedding matrix, "
            "which needs one vocabulary for both sides: set data.shared_vocab: true "
            "(or tie_embeddings: target). Received: data.shared_vocab=False"
        )
    return dataclasses.replace(config, model=dict(model))


def load_run_config(path=None, overrides=()):
    """Read a run configuration from YAML (the bundled default if `path` is None)."""
    mapping = load_yaml(path) if path is not None else load_yaml(default_config_path())
    apply_overrides(mapping, overrides)
    return run_config_from_mapping(mapping)


def default_config_path():
    """The `default.yaml` shipped with attncli: the bundled corpus, ten minutes on a CPU."""
    return resources.files("attncli") / "configs" / "default.yaml"
