"""The `data:` section of a run: which corpus, how it is split, how it is tokenized.

Only the typed settings, and the names they take (tokenizer levels, normal forms,
joiners) which the data floor reads too; the files they name are found and read by
`attncli.data.sources`. No TensorFlow at import time: a configuration is checked before
anything heavy loads.
"""

import dataclasses
from typing import Literal

from attncli.config.schema import check_choices

#: The tokenizer levels (a class each: `attncli.data.levels.LEVEL_CLASSES`).
LEVELS = ("char", "word", "subword", "sentencepiece", "pretokenized")
#: The Unicode normal forms a side may apply.
NORMALIZATIONS = ("NFC", "NFKC", "NFD", "NFKD")
#: The SentencePiece models the `sentencepiece` level learns.
SENTENCEPIECE_TYPES = ("unigram", "bpe")
#: Ends a subword-nmt BPE piece that the next one continues (`Mach@@ en`).
BPE_JOINER = "@@"
#: Starts a SentencePiece piece that follows a space (`▁Die ▁Kat ze`).
SENTENCEPIECE_SPACE = "\u2581"
#: How `pretokenized` pieces join into text (or null: with spaces).
JOINERS = (BPE_JOINER, SENTENCEPIECE_SPACE)
#: What a side's settings would change in the pieces a `pretokenized` side is given.
_PIECE_CHANGING = ("lowercase", "strip_accents", "drop_pattern")


@dataclasses.dataclass(frozen=True)
class SideConfig:
    """Tokenization and vocabulary of one side (source or target).

    Args:
        level: `"char"`, `"word"`, `"subword"` (WordPiece learned by tensorflow-text),
            `"sentencepiece"` (a SentencePiece model learned from the training side, or
            the file `sentencepiece_model`) or `"pretokenized"` (the text is already
            pieces: split on spaces, nothing added or removed; see `joiner`). Defaults to
            `"word"`.
        normalization: Unicode normal form, `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or
            None. Defaults to `"NFC"`.
        lowercase: fold case. Not with `pretokenized`. Defaults to False.
        strip_accents: remove accents (é → e). Not with `pretokenized`. Defaults to False.
        drop_pattern: RE2 character class of characters to delete after
            normalisation, e.g. `"[^ a-z.?!,¿]"`. Not with `pretokenized`. Defaults to
            None.
        vocab_size: int or None, the most tokens the vocabulary keeps (the 4 reserved
            included); required for `subword` and a learned `sentencepiece` model (whose
            pieces include the 256 UTF-8 bytes that spell characters never seen in
            training). Defaults to 8000.
        min_count: int >= 1, tokens seen fewer times become unknown (not for
            `sentencepiece`). Defaults to 1.
        sentencepiece_type: `"unigram"` or `"bpe"`, the SentencePiece model learned at
            level `sentencepiece`; null means unigram. Not with `sentencepiece_model`,
            whose file has its own. Defaults to None.
        sentencepiece_model: path of an existing SentencePiece `.model` file to use
            instead of learning one (level `sentencepiece`), relative to
            `data.directory` (or `--data-dir`) unless absolute. The run keeps a copy.
            Its own normalisation rule runs after attncli's normalisation. Defaults to
            None.
        joiner: how `pretokenized` pieces are joined into the text a translation
            prints: `"@@"` (subword-nmt BPE: `Mach@@ en` → `Machen`), `"▁"`
            (SentencePiece pieces: `▁Die ▁Kat ze` → `Die Katze`) or null (the pieces
            joined with spaces). Only at level `pretokenized`. Defaults to None.
        vocab_file: path of an existing vocabulary for `pretokenized` pieces, used
            instead of learning one: a token per line, its first field (so a
            subword-nmt or fairseq `TOKEN COUNT` file, or a SentencePiece `.vocab`,
            works); relative to `data.directory` (or `--data-dir`) unless absolute.
            Defaults to None.
    """

    level: Literal[LEVELS] = "word"
    normalization: Literal[NORMALIZATIONS] | None = "NFC"
    lowercase: bool = False
    strip_accents: bool = False
    drop_pattern: str | None = None
    vocab_size: int | None = 8000
    min_count: int = 1
    sentencepiece_type: Literal[SENTENCEPIECE_TYPES] | None = None
    sentencepiece_model: str | None = None
    joiner: Literal[JOINERS] | None = None
    vocab_file: str | None = None

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
        for name, level in (("sentencepiece_model", "sentencepiece"),
                            ("sentencepiece_type", "sentencepiece"),
                            ("vocab_file", "pretokenized")):
            value = getattr(self, name)
            if value is not None and self.level != level:
                raise ValueError(
                    f"{name} is for level {level}, not {self.level}: remove it or set "
                    f"level: {level}. Received: {name}={value!r}"
                )
        for name in ("sentencepiece_model", "vocab_file"):
            if getattr(self, name) == "":
                raise ValueError(f"{name} must be a file path or null. Received: {name}=''")
        if self.sentencepiece_model is not None and self.sentencepiece_type is not None:
            raise ValueError(
                "sentencepiece_type chooses the model to learn; the model file "
                f"{self.sentencepiece_model!r} has its own: remove sentencepiece_type"
            )
        if (self.level == "sentencepiece" and self.sentencepiece_model is None
                and self.vocab_size is None):
            raise ValueError(
                "level 'sentencepiece' learns a model of vocab_size pieces: give vocab_size, "
                "or an existing model as sentencepiece_model. Received: vocab_size=None"
            )
        check_level_options(
            self.level, joiner=self.joiner, lowercase=self.lowercase,
            strip_accents=self.strip_accents, drop_pattern=self.drop_pattern,
        )


def check_level_options(level, *, joiner=None, sentencepiece_type="unigram",
                        lowercase=False, strip_accents=False, drop_pattern=None):
    """Refuse settings that do not go with tokenizer `level`, in one line.

    Raises:
        ValueError: a joiner at a level other than `pretokenized`, an unknown joiner or
            SentencePiece type, or a `pretokenized` side with settings that would change
            its pieces.
    """
    if joiner is not None and joiner not in JOINERS:
        raise ValueError(
            f"joiner must be {' or '.join(repr(j) for j in JOINERS)} or null. "
            f"Received: joiner={joiner!r}"
        )
    if joiner is not None and level != "pretokenized":
        raise ValueError(
            f"joiner is for level pretokenized (pieces given in the text); level {level} "
            f"joins its own tokens: remove joiner. Received: joiner={joiner!r}"
        )
    if sentencepiece_type not in SENTENCEPIECE_TYPES:
        raise ValueError(
            f"sentencepiece_type must be one of {', '.join(SENTENCEPIECE_TYPES)}. "
            f"Received: sentencepiece_type={sentencepiece_type!r}"
        )
    if level == "pretokenized":
        given = {"lowercase": lowercase, "strip_accents": strip_accents,
                 "drop_pattern": drop_pattern is not None}
        changing = [name for name in _PIECE_CHANGING if given[name]]
        if changing:
            raise ValueError(
                f"level pretokenized keeps the pieces it is given as they are, and "
                f"{changing[0]} would change them: apply it before the text is cut into "
                f"pieces, and remove it here"
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
        alignments: path of word alignments of the training pairs for
            `training.guided_alignment`, relative to `directory` (or `--data-dir`)
            unless absolute: a Pharaoh file (fast_align's, eflomal's), one line per line
            of the training file (of each file, for `parallel`), links `i-j` of source
            word `i` and target word `j` counted from 0, words being the line's
            whitespace-separated words as written. Line n holds the links of line n,
            whether or not that line's pair is trained on (a bad or blank line, a pair
            carved into validation or test or longer than `max_length` keeps its line
            and is not trained on); a blank line has no links. Formats `parallel` and
            `tsv` only. Defaults to None.
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
    alignments: str | None = None

    def __post_init__(self):
        check_choices(self)
        if self.alignments is not None and self.format not in ("parallel", "tsv"):
            raise ValueError(
                "alignments are read beside a parallel or tsv training file, not format "
                f"{self.format!r}. Received: alignments={self.alignments!r}"
            )
        if self.alignments == "":
            raise ValueError("alignments must be a file path or null. Received: alignments=''")
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
