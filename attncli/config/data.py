"""The `data:` section of a run: which corpus, how it is split, how it is tokenized.

No TensorFlow at import time: a configuration is checked before anything heavy loads.
"""

import dataclasses
from pathlib import Path
from typing import Literal

from attncli.config.schema import check_choices
from attncli.errors import DataError

@dataclasses.dataclass(frozen=True)
class SideConfig:
    """Tokenization and vocabulary of one side (source or target).

    Args:
        level: `"char"`, `"word"` or `"subword"` (WordPiece). Defaults to `"word"`.
        normalization: Unicode normal form, `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or
            None. Defaults to `"NFC"`.
        lowercase: fold case. Defaults to False.
        strip_accents: remove accents (é → e). Defaults to False.
        drop_pattern: RE2 character class of characters to delete after
            normalisation, e.g. `"[^ a-z.?!,¿]"`. Defaults to None.
        vocab_size: int or None, the most tokens the vocabulary keeps (the 4 reserved
            included); required for `subword`. Defaults to 8000.
        min_count: int >= 1, tokens seen fewer times become unknown. Defaults to 1.
    """

    level: Literal["char", "word", "subword"] = "word"
    normalization: Literal["NFC", "NFKC", "NFD", "NFKD"] | None = "NFC"
    lowercase: bool = False
    strip_accents: bool = False
    drop_pattern: str | None = None
    vocab_size: int | None = 8000
    min_count: int = 1

    def __post_init__(self):
        check_choices(self)
        if self.vocab_size is not None and self.vocab_size < 5:
            raise ValueError(
                "vocab_size must be at least 5 (4 reserved tokens and one more). "
                f"Received: vocab_size={self.vocab_size}"
            )
        if self.level == "subword" and self.vocab_size is None:
            raise ValueError("level 'subword' needs a vocab_size. Received: vocab_size=None")
        if self.min_count < 1:
            raise ValueError(f"min_count must be >= 1. Received: min_count={self.min_count}")

    def tokenizer(self):
        """A `Tokenizer` with these settings (no vocabulary yet)."""
        from attncli.data.tokenization import Tokenizer

        return Tokenizer(
            self.level,
            normalization=self.normalization,
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            drop_pattern=self.drop_pattern,
        )


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the pairs come from and how batches are made of them.

    Args:
        format: `"bundled"` (the Tatoeba Spanish-English pairs shipped with attncli),
            `"tsv"` (tab-separated pairs), `"parallel"` (two line-aligned files) or
            `"pronunciations"` (`WORD<TAB>PH ON ES`, scored by PER and WER).
            Defaults to `"bundled"`.
        directory: folder that relative paths are read from; `--data-dir` overrides
            it. Defaults to None (the current directory).
        train, valid, test: file paths. For `parallel`, a path prefix completed by
            `.SOURCE_SUFFIX` and `.TARGET_SUFFIX` (e.g. `multi30k/train` →
            `multi30k/train.de`, `multi30k/train.en`). Without `valid` (or `test`),
            the pairs are carved out of the training file by a seeded permutation.
        source_suffix, target_suffix: file suffixes for `parallel`.
        source_column, target_column: 0-based columns for `tsv` (and which side of
            the bundled corpus is the source: `bundled_source`). Defaults to 0 and 1.
        bundled_source: `"spa"` (Spanish → English) or `"eng"`. Defaults to `"spa"`.
        valid_size, test_size: a fraction in [0, 1) or a number of pairs carved out
            of the training file when there is no separate file. Defaults to 0.05
            and 0.
        split_seed: seed of that permutation. Defaults to 0.
        split_by: carve `"pairs"` (lines) or `"sources"`: every pair of a source
            lands in the same split, so a word with several pronunciations (or a
            sentence with several translations) is never both trained on and
            validated on; sizes then count sources. Defaults to `"pairs"`.
        limit: read only the first `limit` lines of each file (the training file
            before the split, and the validation and test files): for quick trials.
            Defaults to None (all).
        strict: stop at the first bad line instead of skipping bad lines with a
            warning. Defaults to False.
        source, target: `SideConfig` of each side.
        shared_vocab: one vocabulary for both sides, learned from the source and
            target training text together (word counts summed, or WordPiece learned
            from both), so that a word spelt alike on both sides has one id; needed
            by `model.tie_embeddings: all`. The two sides must then be tokenized
            alike (every `SideConfig` key equal). The run directory still holds
            `source.vocab.txt` and `target.vocab.txt`, the same list twice.
            Defaults to False.
        source_end: append the end token to every source. Defaults to False.
        max_length: training pairs with more tokens on either side are dropped.
            Defaults to 50.
        batch_size: sentences per batch. Defaults to 64.
        tokens_per_batch: int or None; if set, batches hold about this many tokens
            (padded), which keeps the cost of a step constant. Defaults to None.
        bucketing: batch pairs of similar lengths together. Defaults to True.
    """

    format: Literal["bundled", "tsv", "parallel", "pronunciations"] = "bundled"
    directory: str | None = None
    train: str | None = None
    valid: str | None = None
    test: str | None = None
    source_suffix: str | None = None
    target_suffix: str | None = None
    source_column: int = 0
    target_column: int = 1
    bundled_source: Literal["spa", "eng"] = "spa"
    valid_size: int | float = 0.05
    test_size: int | float = 0
    split_seed: int = 0
    split_by: Literal["pairs", "sources"] = "pairs"
    limit: int | None = None
    strict: bool = False
    source: SideConfig = dataclasses.field(default_factory=SideConfig)
    target: SideConfig = dataclasses.field(default_factory=SideConfig)
    shared_vocab: bool = False
    source_end: bool = False
    max_length: int = 50
    batch_size: int = 64
    tokens_per_batch: int | None = None
    bucketing: bool = True

    def __post_init__(self):
        check_choices(self)
        if self.format != "bundled" and self.train is None:
            raise ValueError(f"format {self.format!r} needs a train file (data.train)")
        if self.format == "bundled":
            given = [name for name in ("train", "valid", "test") if getattr(self, name)]
            if given:
                raise ValueError(
                    f"format 'bundled' reads the shipped corpus, not data.{given[0]}; "
                    "set data.format to tsv, parallel or pronunciations to read files"
                )
        if self.format == "parallel" and not (self.source_suffix and self.target_suffix):
            raise ValueError("format 'parallel' needs source_suffix and target_suffix")
        for name in ("valid_size", "test_size"):
            value = getattr(self, name)
            if value < 0 or (isinstance(value, float) and value >= 1):
                raise ValueError(
                    f"{name} must be a fraction in [0, 1) or a number of pairs. "
                    f"Received: {name}={value}"
                )
        if self.source_column == self.target_column or min(
            self.source_column, self.target_column
        ) < 0:
            raise ValueError(
                "source_column and target_column must be two different columns, counted "
                f"from 0. Received: source_column={self.source_column}, "
                f"target_column={self.target_column}"
            )
        if self.split_seed < 0:
            raise ValueError(f"split_seed must be >= 0. Received: split_seed={self.split_seed}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(
                f"limit must be >= 1 (lines read from each file) or null for all. "
                f"Received: limit={self.limit}"
            )
        if self.valid is None and self.valid_size == 0:
            raise ValueError(
                "valid_size must be above 0 when there is no data.valid file: validation "
                "chooses the model that is kept. Received: valid_size=0"
            )
        for name in ("max_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1. Received: {name}={getattr(self, name)}")
        if self.tokens_per_batch is not None and not self.bucketing:
            raise ValueError("tokens_per_batch needs bucketing: true")
        if self.shared_vocab:
            self._check_sides_alike()

    def _check_sides_alike(self):
        source, target = dataclasses.asdict(self.source), dataclasses.asdict(self.target)
        differing = [name for name in source if source[name] != target[name]]
        if differing:
            received = ", ".join(
                f"source.{name}={source[name]!r}, target.{name}={target[name]!r}"
                for name in differing
            )
            raise ValueError(
                "shared_vocab: true learns one vocabulary for both sides, so they must be "
                f"tokenized alike; make {', '.join(differing)} the same on both sides. "
                f"Received: {received}"
            )

    @property
    def task(self):
        """`"pronunciation"` (PER/WER) or `"translation"` (BLEU/chrF)."""
        return "pronunciation" if self.format == "pronunciations" else "translation"


def read_splits(config, data_dir=None):
    """Read the corpus of `config` and split it into train, validation and test.

    Args:
        config: a `DataConfig`.
        data_dir: folder overriding `config.directory` for relative paths.

    Returns:
        `attncli.data.corpora.Splits`.
    """
    from attncli.data import corpora

    paths = data_paths(config, data_dir)
    if config.format == "bundled":
        train = corpora.read_bundled(config.bundled_source, strict=config.strict, limit=config.limit)
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
    """The files of `config`'s splits, checked to exist: `{"train": ..., ...}`.

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
    return paths
