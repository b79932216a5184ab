"""A run's corpora: the bundled pairs or files in any of the three formats, split three ways.

`read_splits` reads the training file (in the formats of `attncli.data.readers`) and
either reads the validation and test files or carves them out of the training pairs with
`split_corpus`, a seeded permutation. `read_bundled` reads the Tatoeba Spanish-English
pairs shipped with attncli.

This module does not import TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from attncli.data.readers import Corpus, read_parallel, read_pronunciations, read_tsv
from attncli.errors import DataError

BUNDLED_CORPUS = "spa-eng.txt.gz"
BUNDLED_ABOUT = "spa-eng-about.txt"


@dataclass
class Splits:
    """A corpus split into train, validation and (possibly empty) test pairs."""

    train: Corpus
    valid: Corpus
    test: Corpus


def split_corpus(corpus: Corpus, valid=0.1, test=0, seed: int = 0, by: str = "pairs") -> Splits:
    """Carves validation and test pairs out of one corpus by a seeded permutation.

    With `by="pairs"` the order is `numpy.random.default_rng(seed).permutation(len(corpus))`:
    the last `valid` indices are validation, the `test` ones before them test, the rest
    training (with `valid=2000, seed=0` this is the split of the Tatoeba peers in
    docs/references.md). With `by="sources"` the permutation runs over the distinct sources
    (in order of first appearance) and every pair of a source goes where its source
    goes, so a CMUdict word with several pronunciations is never on both sides of the
    split; sizes then count sources.

    Args:
        corpus: the pairs to split.
        valid: a fraction in [0, 1) or a number of pairs (or sources). Defaults to 0.1.
        test: a fraction in [0, 1) or a number of pairs (or sources). Defaults to 0.
        seed: seed of the permutation. Defaults to 0.
        by: `"pairs"` or `"sources"`. Defaults to `"pairs"`.
    """
    if by == "pairs":
        groups = [[index] for index in range(len(corpus))]
    elif by == "sources":
        grouped: dict[str, list[int]] = {}
        for index, source in enumerate(corpus.sources):
            grouped.setdefault(source, []).append(index)
        groups = list(grouped.values())
    else:
        raise ValueError(f"by must be 'pairs' or 'sources'. Received: by={by!r}")
    unit = by
    if not groups:
        report = getattr(corpus, "report", None)
        why = (f": {report.summary()}" if report is not None and report.bad_lines
               else ": the corpus holds no pair")
        raise DataError(f"no usable pair was read{why}; check the corpus and data.format")
    n_valid, n_test = _count(valid, len(groups), "valid"), _count(test, len(groups), "test")
    if n_valid + n_test >= len(groups):
        raise DataError(
            f"the validation and test splits take {n_valid} + {n_test} of the {len(groups)} "
            f"{unit} read, leaving none to train on; make data.valid_size and data.test_size "
            "smaller, or read more (data.limit)"
        )
    order = np.random.default_rng(seed).permutation(len(groups))
    n_train = len(groups) - n_valid - n_test

    def pairs(chosen):
        return corpus.select([index for group in chosen for index in groups[group]])

    return Splits(
        train=pairs(order[:n_train]),
        test=pairs(order[n_train : n_train + n_test]),
        valid=pairs(order[n_train + n_test :]),
    )


def _count(size, total: int, name: str) -> int:
    if isinstance(size, float) and 0 <= size < 1:
        return int(round(size * total))
    if isinstance(size, int) and size >= 0:
        return size
    raise DataError(
        f"{name} must be a fraction in [0, 1) or a number of pairs. Received: {name}={size!r}"
    )


def bundled_corpus_path() -> Path:
    """Path of the bundled Tatoeba Spanish-English pairs (`English<TAB>Spanish`, gzip)."""
    return Path(str(resources.files("attncli") / "resources" / BUNDLED_CORPUS))


def bundled_attribution() -> str:
    """The attribution and terms of use shipped with the bundled corpus."""
    return (resources.files("attncli") / "resources" / BUNDLED_ABOUT).read_text("utf-8")


def read_bundled(source: str = "spa", strict: bool = False, limit: int | None = None) -> Corpus:
    """Reads the bundled Tatoeba pairs, Spanish to English by default.

    Args:
        source: `"spa"` (Spanish source, English target) or `"eng"` (the other way).
    """
    if source not in ("spa", "eng"):
        raise ValueError(f"source must be 'spa' or 'eng'. Received: source={source!r}")
    columns = (1, 0) if source == "spa" else (0, 1)
    return read_tsv(bundled_corpus_path(), *columns, columns=2, strict=strict, limit=limit)


FORMATS = ("tsv", "parallel", "pronunciations")


def read_corpus(
    path,
    format: str = "tsv",
    source_column: int = 0,
    target_column: int = 1,
    strict: bool = False,
    limit: int | None = None,
) -> Corpus:
    """Reads one corpus in any of the three formats.

    Args:
        path: a file, or for `format="parallel"` a pair `(source_path, target_path)`.
        format: `"tsv"`, `"parallel"` or `"pronunciations"`. Defaults to `"tsv"`.
        source_column, target_column: the sides of a `tsv` file. Default 0 and 1.
        strict, limit: as in `read_tsv`.
    """
    if format == "tsv":
        return read_tsv(path, source_column, target_column, strict=strict, limit=limit)
    if format == "pronunciations":
        return read_pronunciations(path, strict=strict, limit=limit)
    if format == "parallel":
        if isinstance(path, (str, Path)) or len(path) != 2:
            raise DataError(
                f"parallel corpora need two files (source, target). Received: path={path}"
            )
        return read_parallel(*path, strict=strict, limit=limit)
    raise DataError(
        f"corpus format must be one of {', '.join(FORMATS)}. Received: format={format!r}"
    )


def read_splits(
    train, valid=None, test=None, valid_size=0.1, test_size=0, seed: int = 0,
    split_by: str = "pairs", **reader_options
) -> Splits:
    """Train, validation and test pairs, from separate files or carved from `train`.

    Args:
        train, valid, test: paths as `read_corpus` takes them. A split without a path is
            carved from `train` by `split_corpus` (`valid_size`, `test_size`, `seed`); the
            test split is empty when it has neither a path nor a size.
        valid_size, test_size: fractions or counts for carved splits. Default 0.1 and 0.
        seed: seed of the carving permutation. Defaults to 0.
        split_by: carve `"pairs"` or whole `"sources"` (see `split_corpus`).
        **reader_options: `format`, `source_column`, `target_column`, `strict`, `limit`.
    """
    corpus = read_corpus(train, **reader_options)
    empty = Corpus([], [])
    if valid is None or (test is None and test_size):
        carved = split_corpus(
            corpus,
            valid=0 if valid is not None else valid_size,
            test=0 if test is not None else test_size,
            seed=seed,
            by=split_by,
        )
    else:
        carved = Splits(train=corpus, valid=empty, test=empty)
    return Splits(
        train=carved.train,
        valid=read_corpus(valid, **reader_options) if valid is not None else carved.valid,
        test=read_corpus(test, **reader_options) if test is not None else carved.test,
    )
