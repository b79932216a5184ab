"""The tokenizer of one side: normalisation, its level's tokens, their ids, its files.

A `Tokenizer` normalises text with tensorflow-text, hands it to the class of its level
(`attncli.data.levels.LEVEL_CLASSES`: `char`, `word`, `subword` and `pretokenized` there,
`sentencepiece` in `attncli.data.sentencepiece_level`) to be cut into tokens or joined
back into text, and maps tokens to ids with its `Vocabulary`. `learn_tokenizer` makes
the tokenizer of a side's settings (`attncli.config.data.SideConfig`) with its
vocabulary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import tensorflow as tf
import tensorflow_text as text

from attncli.config.data import LEVELS, NORMALIZATIONS, check_level_options
from attncli.data.levels import LEVEL_CLASSES, split_words
from attncli.data.quiet_stderr import quiet_stderr
from attncli.data.sentencepiece_level import sentencepiece_vocabulary  # registers its level
from attncli.data.sentencepiece_models import read_sentencepiece_model, sentencepiece_file
from attncli.data.sources import side_file
from attncli.data.vocabulary import END, PAD, START, Vocabulary
from attncli.errors import DataError, shown
from attncli.files import write_atomically, write_text_atomically

#: Tokenizer settings newer than the first runs: a file without them means their defaults.
_LATER_KEYS = ("joiner", "sentencepiece_type")

#: The normalisation of the TensorFlow "NMT with attention" tutorial (see docs/references.md).
TUTORIAL_NORMALIZATION = dict(
    normalization="NFKD", lowercase=True, strip_accents=True, drop_pattern=r"[^ a-z.?!,¿]"
)


class Tokenizer:
    """Normalises text and splits it into tokens; maps tokens to ids with its vocabulary.

    Normalisation, in this order: case folding (`text.case_fold_utf8`) when `lowercase`;
    accents stripped (NFKD, then combining marks removed) when `strip_accents`; the Unicode
    normal form `normalization` (`text.normalize_utf8`); characters matching `drop_pattern`
    removed; runs of whitespace collapsed to one space, ends stripped (at the
    `sentencepiece` level only the ends: it keeps the spaces inside as written). Its level
    then cuts the normalised text into tokens (`tokenize`) and joins tokens into readable
    text (`detokenize`): see `attncli.data.levels`.

    Args:
        level: `"char"`, `"word"`, `"subword"`, `"sentencepiece"` or `"pretokenized"`.
            Defaults to `"word"`.
        normalization: `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or `None`. Defaults to `"NFC"`.
        lowercase: fold case. Defaults to `False`.
        strip_accents: remove combining marks (é → e, ñ → n). Defaults to `False`.
        drop_pattern: an RE2 pattern of characters to delete after normalisation, e.g. the
            tutorial's `"[^ a-z.?!,¿]"`. Defaults to `None`.
        joiner: at the `pretokenized` level, how pieces join into text: `"@@"`, `"▁"` or
            `None` (with spaces). Only `None` at other levels. Defaults to `None`.
        sentencepiece_type: `"unigram"` or `"bpe"`, the model `build_vocabulary` learns at
            the `sentencepiece` level. Defaults to `"unigram"`.
        vocabulary: the `Vocabulary` of ids; needed by `encode`/`decode`, and by
            `tokenize` at the `subword` and `sentencepiece` levels. Defaults to `None`.
        sentencepiece_model: bytes, a serialised SentencePiece model (a `.model` file's
            content); at the `sentencepiece` level only. Without it `build_vocabulary`
            learns one. Defaults to `None`.
        vocab_file: path of a vocabulary that `build_vocabulary` reads instead of
            learning one, at the `pretokenized` level only: a token per line, the first
            field of the line (so subword-nmt's and fairseq's `TOKEN COUNT` files and
            SentencePiece's `.vocab` files work). Defaults to `None`.

    Example:

    >>> tokenizer = Tokenizer("word", lowercase=True)
    >>> vocabulary = tokenizer.build_vocabulary(["Hello, world.", "Hello!"])
    >>> tokenizer = tokenizer.with_vocabulary(vocabulary)
    >>> ids = tokenizer.encode(tf.constant(["hello world!"]))  # ragged int32 (1, None)
    >>> tokenizer.decode(ids).numpy()
    array([b'hello world!'], dtype=object)
    """

    def __init__(
        self,
        level: str = "word",
        normalization: str | None = "NFC",
        lowercase: bool = False,
        strip_accents: bool = False,
        drop_pattern: str | None = None,
        joiner: str | None = None,
        sentencepiece_type: str = "unigram",
        vocabulary: Vocabulary | None = None,
        sentencepiece_model: bytes | None = None,
        vocab_file=None,
    ):
        if level not in LEVEL_CLASSES:
            raise DataError(
                f"tokenizer level must be one of {', '.join(LEVELS)}. "
                f"Received: level={shown(level)}"
            )
        if normalization is not None and normalization not in NORMALIZATIONS:
            raise DataError(
                f"normalization must be one of {', '.join(NORMALIZATIONS)} or None. "
                f"Received: normalization={shown(normalization)}"
            )
        for name, flag in (("lowercase", lowercase), ("strip_accents", strip_accents)):
            if not isinstance(flag, bool):
                raise DataError(f"{name} must be true or false. Received: {name}={shown(flag)}")
        if drop_pattern is not None:
            check_drop_pattern(drop_pattern)
        try:
            check_level_options(
                level, joiner=joiner, sentencepiece_type=sentencepiece_type,
                lowercase=lowercase, strip_accents=strip_accents, drop_pattern=drop_pattern,
            )
        except ValueError as error:
            raise DataError(str(error)) from None
        if sentencepiece_model is not None and level != "sentencepiece":
            raise DataError(f"a SentencePiece model is for the sentencepiece level, not {level}")
        if vocab_file is not None and level != "pretokenized":
            raise DataError(f"vocab_file is for the pretokenized level, not {level}")
        self.level = level
        self.normalization = normalization
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.drop_pattern = drop_pattern
        self.joiner = joiner
        self.sentencepiece_type = sentencepiece_type
        self.vocabulary = vocabulary
        self.sentencepiece_model = sentencepiece_model
        self.vocab_file = vocab_file
        self._level = LEVEL_CLASSES[level](self)

    @property
    def trackables(self) -> list:
        """The TensorFlow objects with state that `tokenize` and `detokenize` use in a
        graph (the SentencePiece model), which a SavedModel must track; [] at the
        levels that have none."""
        return list(self._level.trackables)

    def get_config(self) -> dict:
        """Every constructor argument except the vocabulary (saved as a text file), the
        SentencePiece model (saved as a file) and `vocab_file` (read when learning)."""
        return {
            "level": self.level,
            "normalization": self.normalization,
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "drop_pattern": self.drop_pattern,
            "joiner": self.joiner,
            "sentencepiece_type": self.sentencepiece_type,
        }

    def with_vocabulary(self, vocabulary: Vocabulary) -> Tokenizer:
        """The same tokenizer (its SentencePiece model too) with `vocabulary`."""
        return Tokenizer(
            **self.get_config(), vocabulary=vocabulary,
            sentencepiece_model=self.sentencepiece_model,
        )

    def save(self, directory, name: str) -> None:
        """Writes `name.tokenizer.json` and `name.vocab.txt` into `directory`, and at the
        `sentencepiece` level the model, `name.sentencepiece.model`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_text_atomically(
            directory / f"{name}.tokenizer.json",
            json.dumps(self.get_config(), indent=2, ensure_ascii=False) + "\n",
        )
        self._require_vocabulary("save").save(directory / f"{name}.vocab.txt")
        if self.sentencepiece_model is not None:
            write_atomically(directory / sentencepiece_file(name), self.sentencepiece_model)

    @classmethod
    def load(cls, directory, name: str) -> Tokenizer:
        """Reads what `save(directory, name)` wrote."""
        path = Path(directory) / f"{name}.tokenizer.json"
        try:
            config = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path} is missing; copy its directory again") from None
        except (OSError, ValueError, RecursionError) as error:  # JSON nested thousands deep
            raise DataError(f"cannot read tokenizer settings {path}: {error}") from None
        if not isinstance(config, dict):
            raise DataError(f"{path} is damaged: expected a mapping of settings")
        expected = set(cls("word").get_config())
        # Written by attncli before the key existed: its default.
        missing = sorted(expected - set(config) - set(_LATER_KEYS))
        unknown = sorted(set(config) - expected)
        if unknown or missing:
            what = f"unknown key {shown(unknown[0])}" if unknown else f"no {missing[0]!r}"
            raise DataError(f"{path} is damaged ({what}); copy its directory again")
        try:
            settings = cls(**config)
        except DataError as error:
            raise DataError(f"{path} is damaged ({error}); copy its directory again") from None
        vocabulary = Vocabulary.load(Path(directory) / f"{name}.vocab.txt")
        if settings.level != "sentencepiece":
            return settings.with_vocabulary(vocabulary)
        model_path = Path(directory) / sentencepiece_file(name)
        if not model_path.is_file():
            raise DataError(f"{model_path} is missing; copy its directory again")
        model = read_sentencepiece_model(model_path, "copy its directory again")
        if sentencepiece_vocabulary(model) != vocabulary:
            raise DataError(
                f"{model_path} and {name}.vocab.txt do not belong together (the model's "
                "pieces are not the vocabulary's); copy its directory again"
            )
        return cls(**config, vocabulary=vocabulary, sentencepiece_model=model)

    def normalize(self, texts) -> tf.Tensor:
        """Normalised strings, same shape as `texts`."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if self.lowercase:
            texts = text.case_fold_utf8(texts)
        if self.strip_accents:
            texts = text.normalize_utf8(texts, "NFKD")
            texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
        if self.normalization is not None:
            texts = text.normalize_utf8(texts, self.normalization)
        if self.drop_pattern is not None:
            texts = tf.strings.regex_replace(texts, self.drop_pattern, "")
        if self._level.keeps_spaces:
            return tf.strings.strip(texts)  # SentencePiece's decoder drops leading spaces
        texts = tf.strings.regex_replace(texts, r"\s+", " ")
        return tf.strings.strip(texts)

    def split_words(self, normalized) -> tf.RaggedTensor:
        """Word-level tokens of already normalised strings `(batch,)` → `(batch, None)`."""
        return split_words(normalized)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokens of `texts`: a string tensor `(batch,)` → ragged strings `(batch, None)`."""
        return self._level.split(self.normalize(texts))

    def detokenize(self, tokens) -> tf.Tensor:
        """Readable strings `(batch,)` from ragged tokens `(batch, None)`."""
        return self._level.join(tokens)

    def encode(self, texts) -> tf.RaggedTensor:
        """Token ids (int32, no start or end id) `(batch, None)` of strings `(batch,)`."""
        return self._require_vocabulary("encode").lookup(self.tokenize(texts))

    def decode(self, ids) -> tf.Tensor:
        """Readable strings `(batch,)` from ids `(batch, T)`, dense or ragged.

        Each row is cut at its first end id; pad and start ids are dropped.
        """
        vocabulary = self._require_vocabulary("decode")
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        before_end = tf.math.cumsum(tf.cast(ids == END, tf.int32), axis=1) == 0
        keep = before_end & (ids != PAD) & (ids != START)
        return self.detokenize(vocabulary.tokens_of(tf.ragged.boolean_mask(ids, keep)))

    def build_vocabulary(
        self, texts, max_size: int | None = None, min_count: int = 1, chunk_size: int = 8192
    ) -> Vocabulary:
        """Learns a vocabulary from training `texts` (a list of strings).

        `char`/`word`: the `max_size - 4` most frequent tokens seen at least `min_count`
        times (ties broken by the token's text). `subword`: a WordPiece vocabulary of at
        most `max_size` tokens learned by `bert_vocab_from_dataset` from the words of
        `texts`, pieces kept only if seen at least `min_count` times. `pretokenized`: as
        `word`, or the tokens of `vocab_file` when given. `sentencepiece`: the pieces of the
        SentencePiece model, learned first from `texts` (at most `max_size` pieces, the
        reserved ones included; `min_count` does not apply) unless the tokenizer was given
        one; the tokenizer keeps the model it learned, and `with_vocabulary` passes it on.
        In all, ids 0-3 are the reserved pad, unknown, start and end tokens.
        """
        return self._level.learn(self, texts, max_size, min_count, chunk_size)

    def _require_vocabulary(self, action: str) -> Vocabulary:
        if self.vocabulary is None:
            raise DataError(f"the {self.level} tokenizer needs a vocabulary to {action}")
        return self.vocabulary


def learn_tokenizer(side, texts, base=".") -> Tokenizer:
    """The `Tokenizer` of `side` (a `attncli.config.data.SideConfig`) with its
    vocabulary: learned from `texts` (the training side's strings), or read from the
    side's `sentencepiece_model` or `vocab_file` (relative to the folder `base`)."""
    model = None
    if side.sentencepiece_model is not None:
        path = side_file(base, side.sentencepiece_model)
        model = read_sentencepiece_model(path, "check sentencepiece_model or --data-dir")
    tokenizer = Tokenizer(
        side.level,
        normalization=side.normalization,
        lowercase=side.lowercase,
        strip_accents=side.strip_accents,
        drop_pattern=side.drop_pattern,
        joiner=side.joiner,
        sentencepiece_type=side.sentencepiece_type or "unigram",
        sentencepiece_model=model,
        vocab_file=None if side.vocab_file is None else side_file(base, side.vocab_file),
    )
    vocabulary = tokenizer.build_vocabulary(texts, max_size=side.vocab_size,
                                            min_count=side.min_count)
    return tokenizer.with_vocabulary(vocabulary)


def check_drop_pattern(pattern, name="drop_pattern"):
    """Refuse a `drop_pattern` that RE2 (TensorFlow's regular expressions) cannot compile.

    Raises:
        DataError: `"NAME is not an RE2 pattern (RE2's reason). Received: NAME='['"`.
    """
    if not isinstance(pattern, str):
        raise DataError(f"{name} must be a string. Received: {name}={shown(pattern)}")
    try:
        # RE2 logs its own complaint on stderr (fd 2) besides raising: the error says it.
        with quiet_stderr(), tf.init_scope():  # compiled now, even inside a graph
            tf.strings.regex_full_match("", pattern)
    except tf.errors.InvalidArgumentError as error:
        found = re.search(r"error: (.*?)(?: \[Op:|$)", error.message)
        reason = found.group(1) if found else "invalid"
        raise DataError(
            f"{name} is not an RE2 pattern ({shown(reason)}). Received: {name}={shown(pattern)}"
        ) from None
