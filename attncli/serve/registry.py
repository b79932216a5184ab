"""The models one server loaded, by name (`Registry`), and the engines that load them
(`ENGINES`).

A `ServedModel` (`attncli.serve.served_model`) is one name, whatever engine runs it:
`TensorFlowModel` (engine `tensorflow`, `attncli.serve.tensorflow_model`) is a run, or an
ensemble of runs (`load_ensemble`, as `attncli translate --ensemble` loads them),
searched by attncli; `ExportedModel` (engine `ctranslate2`,
`attncli.serve.exported_model`) is a CTranslate2 export, run without TensorFlow.

Models are loaded on the batcher's worker thread.
"""

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from attncli.errors import shown
from attncli.serve.exported_model import ExportedModel
from attncli.serve.limits import RequestError
from attncli.serve.tensorflow_model import TensorFlowModel


def training_max_length(directory, metadata):
    """The `data.max_length` the model in `directory` was trained with: training pairs
    with more tokens on either side were dropped (`attncli.config.data.DataConfig`), so
    a longer sentence is one it never saw whole.

    Read from the model's `metadata` (`max_length`: the shipped demo model carries it),
    else from its run's `config.yaml` when `directory` is a run's `model/` folder; None
    when neither says.
    """
    import yaml

    from attncli.training.run_directory import RunDirectory

    given = metadata.get("max_length")
    if given is None:
        run = RunDirectory(Path(directory).parent)
        if Path(directory).name != "model" or not run.marker_path.is_file():
            return None
        try:
            config = yaml.safe_load(run.config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
        data = config.get("data") if isinstance(config, dict) else None
        given = data.get("max_length") if isinstance(data, dict) else None
    return given if type(given) is int and given >= 1 else None


def load_tensorflow_model(name, directories, limits):
    """The `TensorFlowModel` of the runs' model `directories` (several: an ensemble)."""
    import tensorflow as tf

    from attncli.search.ensemble import load_ensemble

    # Each search a request asks for is traced once, by design: TensorFlow's warning that
    # many functions were traced says nothing to act on here.
    tf.get_logger().setLevel("ERROR")
    loaded = load_ensemble(directories)
    return TensorFlowModel(name, loaded, len(directories), limits,
                           training_max_length(directories[0], loaded.metadata))


def load_exported_model(name, directories, limits, compute_type="float32"):
    """The `ExportedModel` of a CTranslate2 export (`directories`: the one export),
    its weights loaded as `compute_type` (`"float32"` or `"int8"`)."""
    [directory] = directories
    return ExportedModel.load(name, directory, limits, compute_type)


class Engine(NamedTuple):
    """What runs a server's models.

    Attributes:
        load: `load(name, directories, limits, **options)` -> its `ServedModel`, on the
            batcher's thread.
        tensorflow: whether it runs TensorFlow (the server imports it, quietly, first).
    """

    load: Callable
    tensorflow: bool


#: The engines a server runs its models with, by `--engine` name.
ENGINES = {
    "tensorflow": Engine(load_tensorflow_model, tensorflow=True),
    "ctranslate2": Engine(load_exported_model, tensorflow=False),
}


class Registry:
    """The models of one server, by name; the first is the default.

    Args:
        specs: `(name, [model directory, ...])` pairs, in order; several directories
            are decoded as an ensemble.
        limits: the server's `Limits`.
        engine: the name of the engine every model runs on (`ENGINES`). Defaults to
            `"tensorflow"`.
        options: the engine's options, e.g. `{"compute_type": "int8"}` for
            `"ctranslate2"`. Defaults to none.
    """

    def __init__(self, specs, limits, engine="tensorflow", options=None):
        self.specs = list(specs)
        self.limits = limits
        self.engine = ENGINES[engine]
        self.options = dict(options or {})
        self.default = self.specs[0][0]
        self.models = {}
        self.ready = False

    def load(self, report=None):
        """Load every model and trace its searches; `report(line)` says what is done."""
        for name, directories in self.specs:
            model = self.engine.load(name, directories, self.limits, **self.options)
            model.start()
            self.models[name] = model
            if report is not None:
                report(f"model {name!r} loaded and traced")
        self.ready = True

    def get(self, name):
        """The model named `name` (None: the default).

        Raises:
            RequestError: 404 when no model has that name.
        """
        if name is None:
            name = self.default
        try:
            return self.models[name]
        except KeyError:
            names = ", ".join(repr(spec[0]) for spec in self.specs)
            raise RequestError(
                404, f"no model named {shown(name, 40)}; this server has {names}"
            ) from None
