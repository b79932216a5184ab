"""The whole configuration of a run: `data`, `model`, `training` and `decoding`.

    run = load_run_config("configs/default.yaml", overrides=["training.epochs=3"])

Every section is a validated dataclass (see `attncli.config.schema`); the YAML file and the
`--set` overrides are merged first, then checked as a whole, so a bad key is
reported with its full path whichever of the two it came from. No TensorFlow here.
"""

import dataclasses
from importlib import resources

from attncli.config.schema import ConfigError, from_mapping
from attncli.config.yaml_files import apply_overrides, load_yaml
from attncli.config.data import DataConfig
from attncli.config.model import ModelSettings
from attncli.config.search import SearchConfig
from attncli.config.training import STOP_METRICS, LoopConfig
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
        model: `ModelSettings` (its `sized` adds the vocabulary sizes, taken from
            the data).
        training: `LoopConfig`.
        decoding: `SearchConfig`, the default search of `attncli translate`.
    """

    name: str = "default"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelSettings = dataclasses.field(default_factory=ModelSettings)
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
        guided = self.training.guided_alignment
        if self.training.stop_metric == "alignment" and guided is None:
            raise ValueError(
                "training.stop_metric alignment is guided alignment's loss on the "
                "validation pairs: set training.guided_alignment and data.alignments, or "
                "choose another stop_metric"
            )
        if (guided is None) != (self.data.alignments is None):
            raise ValueError(
                "training.guided_alignment trains on the word alignments of data.alignments: "
                "give both or neither. Received: "
                f"data.alignments={self.data.alignments!r} with training.guided_alignment="
                f"{None if guided is None else dataclasses.asdict(guided)}"
            )
        if guided is not None:
            try:
                guided.supervised(self.model)
            except ValueError as error:
                raise ValueError(f"training.{error}") from None
        elif self.model.alignment_layer:
            raise ValueError(
                "model.alignment_layer learns from guided alignment alone: set "
                "training.guided_alignment and data.alignments, or leave it false"
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
    mapping["model"] = model
    config = from_mapping(RunConfig, mapping)
    if config.model.tie_embeddings == "all" and not config.data.shared_vocab:
        raise ConfigError(
            "model.tie_embeddings: 'all' gives the source and target one embedding matrix, "
            "which needs one vocabulary for both sides: set data.shared_vocab: true "
            "(or tie_embeddings: target). Received: data.shared_vocab=False"
        )
    return config


def load_run_config(path=None, overrides=()):
    """Read a run configuration from YAML (the bundled default if `path` is None)."""
    mapping = load_yaml(path) if path is not None else load_yaml(default_config_path())
    apply_overrides(mapping, overrides)
    return run_config_from_mapping(mapping)


def default_config_path():
    """The `default.yaml` shipped with attncli: the bundled corpus, ten minutes on a CPU."""
    return resources.files("attncli") / "configs" / "default.yaml"
