"""A trained model in one self-contained directory.

A model directory holds everything needed to translate:

    config.json                  format, version, the ModelConfig, source_end, metadata
    model.weights.h5             the weights (Keras `save_weights`)
    source.tokenizer.json        source tokenizer settings (level, normalisation, ...)
    source.vocab.txt             source vocabulary, one token per line in id order
    target.tokenizer.json
    target.vocab.txt
    source.sentencepiece.model   the source's SentencePiece model (level `sentencepiece` only)
    target.sentencepiece.model

It is written into a temporary directory beside the destination and moved into place
with `os.replace` (`attncli.files.replace_directory`), so a reader never sees a
half-written model.

It is read back for search by `attncli.search.loading.load_model`; its export as a
TensorFlow SavedModel, served without attncli, is `attncli.search.serving`
(`attncli export RUN DIR`).
"""

import json
from pathlib import Path

from attncli.data.sentencepiece_models import sentencepiece_file
from attncli.errors import AttncliError, first_line, shown
from attncli.files import replace_directory

FORMAT = "attncli-model"
VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
# The files every model directory holds, in the order `save_model` writes them; a side at
# level `sentencepiece` adds its model (see `model_files`).
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, "source.tokenizer.json", "source.vocab.txt",
               "target.tokenizer.json", "target.vocab.txt")


class ModelFileError(AttncliError):
    """A model directory that is missing, incomplete or of another format."""


def model_files(directory):
    """The files a complete model `directory` holds: `MODEL_FILES`, then for each side whose
    `SIDE.tokenizer.json` names level `sentencepiece` its model, `SIDE.sentencepiece.model`
    (as `Tokenizer.save` writes it). A tokenizer file that cannot be read adds nothing: it
    is named when it is loaded."""
    files = list(MODEL_FILES)
    for side in ("source", "target"):
        try:
            settings = json.loads((Path(directory) / f"{side}.tokenizer.json").read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(settings, dict) and settings.get("level") == "sentencepiece":
            files.append(sentencepiece_file(side))
    return tuple(files)


def missing_model_file(directory):
    """The first of `model_files(directory)` that is not a file there, or None."""
    return next((name for name in model_files(directory)
                 if not (Path(directory) / name).is_file()), None)


def load_weights(model, path, advice, error=ModelFileError):
    """`model.load_weights(path)`, a failure raised as one line: `error` naming `path`, the
    first line of what h5py or Keras said, then `advice` (what the user can do)."""
    try:
        model.load_weights(str(path))
    except Exception as failure:  # noqa: BLE001  h5py and Keras fail in many ways.
        raise error(
            f"cannot read the weights {path} ({first_line(failure)}): {advice}"
        ) from None


def load_matching_weights(model, source_config, path, advice, error=ModelFileError):
    """Load into `model` the weights of the model of `source_config` stored at `path`
    that it shares: every variable whose path below the model's name and whose shape
    are the same. The others keep their initial values.

    Args:
        model: a built `Seq2Seq`.
        source_config: the `ModelConfig` the weights at `path` belong to.
        path: a `.weights.h5` file of that model.
        advice: what the user can do when the file cannot be read.
        error: the `AttncliError` subclass raised then. Defaults to `ModelFileError`.

    Returns:
        The paths (below the model's name) of `model`'s variables left as they were.
    """
    from attncli.model.encoder_decoder import Seq2Seq

    source = Seq2Seq(source_config)
    load_weights(source, path, advice, error=error)
    theirs = {inner_path(variable): variable for variable in source.weights}
    fresh = []
    for variable in model.weights:
        match = theirs.get(inner_path(variable))
        if match is not None and tuple(match.shape) == tuple(variable.shape):
            variable.assign(match.value)
        else:
            fresh.append(inner_path(variable))
    return fresh


def inner_path(variable):
    """A variable's path below its model's name:
    `seq2_seq_1/encoder/embedding/embeddings` -> `encoder/embedding/embeddings`."""
    return variable.path.split("/", 1)[1]


def save_model(
    directory, model, source_tokenizer, target_tokenizer, *, source_end=False, metadata=None
):
    """Writes `model` and its tokenizers into `directory`, replacing what was there.

    Args:
        directory: path of the model directory (created, or replaced as a whole).
        model: a `Seq2Seq`.
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        source_end: bool, whether sources get the end id appended (as in training).
            Defaults to False.
        metadata: a JSON-serialisable dict stored in `config.json` (for instance the
            training configuration and results). Defaults to None.
    """
    directory = Path(directory)
    config = {
        "format": FORMAT,
        "version": VERSION,
        "model": model.config.to_dict(),
        "source_end": bool(source_end),
        "metadata": metadata or {},
    }
    with replace_directory(directory) as staging:
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", "utf-8")
        model.save_weights(str(staging / WEIGHTS_FILE))
        source_tokenizer.save(staging, "source")
        target_tokenizer.save(staging, "target")


def saved_metadata(directory):
    """The metadata a model directory was saved with (its epoch and figures), or {}.

    Reads `config.json` only; {} when there is no readable model.
    """
    try:
        config = json.loads((Path(directory) / CONFIG_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    metadata = config.get("metadata") if isinstance(config, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def read_model_config(directory):
    """The checked contents of `directory`'s `config.json`, its `model` as a `ModelConfig`.

    Raises:
        ModelFileError: when the directory has no readable attncli model configuration.
    """
    from attncli.config.model import ModelConfig
    from attncli.config.schema import from_mapping

    path = Path(directory) / CONFIG_FILE
    try:
        config = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ModelFileError(f"{path.parent} is not an attncli model: no {CONFIG_FILE}") from None
    except (OSError, ValueError) as error:
        raise ModelFileError(f"cannot read {path}: {error}") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not an attncli model configuration")
    if config.get("version") != VERSION:
        raise ModelFileError(
            f"{path} has format version {shown(config.get('version'))}; "
            f"this attncli reads version {VERSION}"
        )
    expected = {"format", "version", "model", "source_end", "metadata"}
    unknown, missing = sorted(set(config) - expected), sorted(expected - set(config))
    if unknown or missing:
        what = f"unknown key {shown(unknown[0])}" if unknown else f"no {missing[0]!r}"
        raise ModelFileError(f"{path} is damaged ({what}); copy the model directory again")
    if not isinstance(config["source_end"], bool) or not isinstance(config["metadata"], dict):
        raise ModelFileError(
            f"{path} is damaged (source_end must be true or false, metadata a mapping); "
            "copy the model directory again"
        )
    try:
        model = from_mapping(ModelConfig, config["model"], "model")
    except AttncliError as error:
        raise ModelFileError(f"{path} is damaged: {error}") from None
    return {**config, "model": model}
