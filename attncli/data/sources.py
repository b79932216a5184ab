"""The files a run's `data:` section names, found and read.

`read_splits` reads the corpus of a `attncli.config.data.DataConfig` and splits it into
train, validation and test (`attncli.data.corpora`); `data_paths` finds every file the
section names (the splits, the word alignments, each side's SentencePiece model or
vocabulary file) and refuses a missing one in one line, before anything is read.

No TensorFlow at import time: `attncli train` checks the files before TensorFlow loads.
"""

from pathlib import Path

from attncli.data import corpora
from attncli.data.sentencepiece_models import read_sentencepiece_model
from attncli.errors import DataError


def read_splits(config, data_dir=None):
    """Read the corpus of `config` and split it into train, validation and test.

    Args:
        config: a `attncli.config.data.DataConfig`.
        data_dir: folder overriding `config.directory` for relative paths.

    Returns:
        `attncli.data.corpora.Splits`.

    Raises:
        DataError: a file missing, or no validation pair.
    """
    paths = data_paths(config, data_dir)
    if config.format == "bundled":
        train = corpora.read_bundled(
            config.bundled_source, strict=config.strict, limit=config.limit
        )
        return _with_validation(config, paths, corpora.split_corpus(
            train, valid=config.valid_size, test=config.test_size, seed=config.split_seed,
            by=config.split_by,
        ))
    return _with_validation(config, paths, corpora.read_splits(
        paths["train"],
        paths["valid"],
        paths["test"],
        valid_size=config.valid_size,
        test_size=config.test_size,
        seed=config.split_seed,
        split_by=config.split_by,
        format=config.format,
        source_column=config.source_column,
        target_column=config.target_column,
        strict=config.strict,
        limit=config.limit,
    ))


def _with_validation(config, paths, splits):
    """`splits`, checked to hold validation pairs: they choose the model that is kept."""
    if not len(splits.valid):
        why = (
            "data.valid has no pairs" if paths["valid"] is not None else
            f"data.valid_size={config.valid_size} carves no pair out of {len(splits.train)}"
        )
        raise DataError(
            f"data: the validation split is empty ({why}); validation chooses the model "
            "that is kept: give it pairs"
        )
    return splits


def data_paths(config, data_dir=None):
    """The files of `config`'s splits, checked to exist: `{"train": ..., ...}`, and
    `"alignments"` when `config.alignments` names a file.

    A `parallel` split is a `(source_path, target_path)` pair; a split without a
    file (carved from train, or the bundled corpus) is None.

    Raises:
        DataError: naming the first file that is missing.
    """
    base = Path(data_dir or config.directory or ".")
    paths = {}
    for name in ("train", "valid", "test"):
        path = getattr(config, name) if config.format != "bundled" else None
        if path is None:
            paths[name] = None
            continue
        if config.format == "parallel":
            found = tuple(
                base / f"{path}.{suffix}" for suffix in (config.source_suffix, config.target_suffix)
            )
        else:
            found = (base / path,)
        for candidate in found:
            if not candidate.is_file():
                raise DataError(
                    f"data.{name}: no such file {candidate}; check the path or pass --data-dir"
                )
        paths[name] = found if config.format == "parallel" else found[0]
    if config.alignments is not None:
        paths["alignments"] = base / config.alignments
        if not paths["alignments"].is_file():
            raise DataError(
                f"data.alignments: no such file {paths['alignments']}; check the path or "
                "pass --data-dir"
            )
    check_side_files(config, base)
    return paths


def check_side_files(config, base):
    """Check the files the sides of `config` name (`sentencepiece_model`, `vocab_file`)
    exist under `base` (a SentencePiece model also that it is one).

    Raises:
        DataError: naming the first key and file that is missing or damaged.
    """
    for side in ("source", "target"):
        settings = getattr(config, side)
        for name in ("sentencepiece_model", "vocab_file"):
            if getattr(settings, name) is None:
                continue
            path = side_file(base, getattr(settings, name))
            if not path.is_file():
                raise DataError(
                    f"data.{side}.{name}: no such file {path}; check the path or pass --data-dir"
                )
            if name == "sentencepiece_model":
                read_sentencepiece_model(path, f"check data.{side}.{name}")


def side_file(base, path):
    """`path` (a side's `sentencepiece_model` or `vocab_file`) read from the folder
    `base` unless absolute."""
    return Path(base or ".") / path
