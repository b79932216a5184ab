"""A trained model read back for search: the model, its tokenizers and the run's search.

    loaded = load_model("runs/default/model")
    [translation] = loaded.translator().translate(["Hace frío."])

The directory's files are those `attncli.model.saving.save_model` writes; the `decoding`
section of its `config.json` (the run's `SearchConfig`) is validated here, when the
directory is read, and offered as `LoadedModel.search`.
"""

from pathlib import Path
from typing import NamedTuple

from attncli.config.schema import ConfigError, from_mapping
from attncli.config.search import SearchConfig
from attncli.model.saving import (
    CONFIG_FILE, WEIGHTS_FILE, ModelFileError, load_weights, read_model_config,
)


class LoadedModel(NamedTuple):
    """What `load_model` reads back.

    Attributes:
        model: the `Seq2Seq`, weights loaded.
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        source_end: whether the model was trained with the end id appended to sources.
        metadata: the dict given to `save_model` (e.g. the training configuration).
        search: the run's `SearchConfig` (its `decoding` section). Defaults to
            `SearchConfig()`.
    """

    model: object
    source_tokenizer: object
    target_tokenizer: object
    source_end: bool
    metadata: dict
    search: SearchConfig = SearchConfig()

    def translator(self, decoding=None, attention_weights=True, settings=False):
        """A `Translator` for this model with `decoding` (a `Decoding`, or a
        `SearchConfig`; the run's own search, `self.search`, if None);
        `attention_weights=False` leaves the weights out (`Hypothesis.weights` is None);
        `settings=True` takes alpha and the temperature at each call (`Translator`)."""
        from attncli.search.translation import Translator

        return Translator(
            self.model, self.source_tokenizer, self.target_tokenizer,
            self.search if decoding is None else decoding, self.source_end,
            attention_weights=attention_weights, settings=settings,
        )


def load_model(directory):
    """Reads a directory written by `attncli.model.saving.save_model`.

    Returns:
        A `LoadedModel`.

    Raises:
        ModelFileError: when the directory is not a readable attncli model.
        ConfigError: when its `decoding` settings are not a valid `SearchConfig`
            (the message names `config.json`).
    """
    from attncli.data.tokenization import Tokenizer
    from attncli.model.encoder_decoder import Seq2Seq

    directory = Path(directory)
    config = read_model_config(directory)
    search = run_search(directory / CONFIG_FILE, config["metadata"])
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
    load_weights(model, weights_path, "the file is damaged or belongs to another model; copy "
                 "the model directory again, or train the run again")
    return LoadedModel(
        model=model,
        source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
        source_end=config["source_end"],
        metadata=config["metadata"],
        search=search,
    )


def run_search(path, metadata):
    """The `SearchConfig` of the `decoding` section of `metadata`, read from `path`.

    A model saved without one searches with `SearchConfig()`.

    Raises:
        ConfigError: one line naming `path` and the bad key or value.
    """
    try:
        return from_mapping(SearchConfig, metadata.get("decoding"), "decoding")
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
