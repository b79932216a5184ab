"""A trained model in one self-contained directory.

A model directory holds everything needed to translate:

    config.json              format, version, the ModelConfig, source_end, metadata
    model.weights.h5         the weights (Keras `save_weights`)
    source.tokenizer.json    source tokenizer settings (level, normalisation, ...)
    source.vocab.txt         source vocabulary, one token per line in id order
    target.tokenizer.json
    target.vocab.txt

It is written into a temporary directory beside the destination and moved into place
with `os.replace` (`attncli.files.replace_directory`), so a reader never sees a
half-written model.

Its export as a TensorFlow SavedModel, served without attncli, is
`attncli.search.serving` (`attncli export RUN DIR`).
"""

import json
from pathlib import Path
from typing import NamedTuple

from attncli.errors import AttncliError, shown
from attncli.files import replace_directory

FORMAT = "attncli-model"
VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
# Every file of a model directory, in the order `save_model` writes them.
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, "source.tokenizer.json", "source.vocab.txt",
               "target.tokenizer.json", "target.vocab.txt")


class ModelFileError(AttncliError):
    """A model directory that is missing, incomplete or of another format."""


class LoadedModel(NamedTuple):
    """What `load_model` reads back.

    Attributes:
        model: the `Seq2Seq`, weights loaded.
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        source_end: whether the model was trained with the end id appended to sources.
        metadata: the dict given to `save_model` (e.g. the training configuration).
    """

    model: object
    source_tokenizer: object
    target_tokenizer: object
    source_end: bool
    metadata: dict

    def translator(self, search=None, attention_weights=True):
        """A `Translator` for this model with `search` (a `SearchConfig`, greedy if None);
        `attention_weights=False` leaves the weights out (`Hypothesis.weights` is None)."""
        from attncli.search.translation import Translator

        return Translator(
            self.model, self.source_tokenizer, self.target_tokenizer, search, self.source_end,
            attention_weights=attention_weights,
        )


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


def load_model(directory):
    """Reads a directory written by `save_model`.

    Returns:
        A `LoadedModel`.

    Raises:
        ModelFileError: when the directory is not a readable attncli model.
    """
    from attncli.model.encoder_decoder import Seq2Seq
    from attncli.data.tokenization import Tokenizer

    directory = Path(directory)
    config = _read_config(directory / CONFIG_FILE)
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        raise ModelFileError(f"{directory} is incomplete: no {WEIGHTS_FILE}")
    source_tokenizer = Tokenizer.load(directory, "source")
    target_tokenizer = Tokenizer.load(directory, "target")
    model_config = config["model"]
    for side, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
        size = getattr(model_config, f"{side}_vocab_size")
        if len(tokenizer.vocabulary) != size:
            raise ModelFileError(
                f"{directory / f'{side}.vocab.txt'} has {len(tokenizer.vocabulary)} tokens "
                f"where the model has {size}; the model directory is damaged or mixed with "
                "another's: copy it whole from its run"
            )
    model = Seq2Seq(model_config)
    try:
        model.load_weights(str(weights_path))
    except Exception as error:  # noqa: BLE001  h5py and Keras fail in many ways.
        lines = str(error).strip().splitlines()
        raise ModelFileError(
            f"cannot read the weights {weights_path} ({lines[0] if lines else type(error).__name__}"
            "): the file is damaged or belongs to another model; copy the model directory "
            "again, or train the run again"
        ) from None
    return LoadedModel(
        model=model,
        source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
        source_end=config["source_end"],
        metadata=config["metadata"],
    )


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


def _read_config(path):
    """The checked contents of a model's `config.json`, its `model` as a `ModelConfig`."""
    from attncli.config.model import ModelConfig
    from attncli.config.schema import from_mapping

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

