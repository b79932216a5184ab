"""Normalisation, tokenization and detokenization of text with tensorflow-text.

Three levels:

- `char`: one token per Unicode character; a space becomes the visible token `▁` so the
  vocabulary file stays one token per line and detokenization restores the spaces.
- `word`: split on whitespace; every punctuation mark or symbol (Unicode categories P and
  S) is a token of its own; every Han, Hiragana and Katakana character is a token of its
  own, so Chinese written without spaces still splits (tensorflow-text has no Chinese word
  segmenter that works offline, and characters are the usual unit for Chinese NMT at this
  scale). Done with one `text.regex_split`.
- `subword`: the `word` split, then each word cut into WordPiece pieces (`##` marks a
  piece that continues a word) with `text.FastWordpieceTokenizer`; the piece vocabulary is
  learned from training text by `bert_vocab_from_dataset`.
- `sentencepiece`: SentencePiece pieces (`▁` marks a piece that starts after a space)
  with `text.SentencepieceTokenizer`, from a unigram or BPE model learned from training
  text by the `sentencepiece` library, or from a `.model` file given. A learned model
  keeps every character and space as written (identity normaliser, spaces not
  collapsed, unseen characters as UTF-8 byte pieces), so detokenizing gives the
  normalised text back exactly.
- `pretokenized`: the text's own pieces, split on whitespace, nothing added or removed
  (text cut into BPE or SentencePiece pieces beforehand); `joiner` says how the pieces
  join into text again: `"@@"` (subword-nmt: `Mach@@ en` → `Machen`), `"▁"` (SentencePiece
  pieces: `▁Die ▁Kat ze` → `Die Katze`) or None (pieces joined with spaces).

Detokenization at the `char`, `word` and `subword` levels joins tokens with spaces, glues
WordPiece pieces, and restores the spacing of written text: `"hello , world ."` → `"hello, world."`, `"¿ qué ?"` → `"¿qué?"`,
`'he said " hi . "'` → `'he said "hi."'` (also “ ” and „ “),
`"$ 30"` → `"$30"`, `"don ' t"` → `"don't"`, `"3 : 30"` → `"3:30"`,
and no spaces next to Chinese or Japanese characters. BLEU is computed on this text.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

from attncli.config.data import BPE_JOINER, check_level_options
from attncli.data.sentencepiece_models import read_sentencepiece_model, sentencepiece_file
from attncli.data.text_rules import (  # noqa: F401 (SPACE_TOKEN, SUFFIX_INDICATOR: read from here)
    DETOKENIZE_RULES, KEPT_DELIMITERS, SPACE_TOKEN, SUFFIX_INDICATOR, WORD_DELIMITERS,
)
from attncli.errors import DataError, clipped, shown
from attncli.files import write_atomically, write_text_atomically
from attncli.data.vocabulary import (
    END, END_TOKEN, PAD, PAD_TOKEN, RESERVED_TOKENS, START, START_TOKEN, UNK, UNK_TOKEN, Vocabulary,
)

LEVELS = ("char", "word", "subword", "sentencepiece", "pretokenized")
NORMALIZATIONS = ("NFC", "NFKC", "NFD", "NFKD")

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
    `sentencepiece` level only the ends: it keeps the spaces inside as written).

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
        if level not in LEVELS:
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
        self._wordpiece = None
        self._sentencepiece = None
        if level == "subword" and vocabulary is not None:
            self._wordpiece = text.FastWordpieceTokenizer(
                vocabulary.tokens,
                suffix_indicator=SUFFIX_INDICATOR,
                token_out_type=tf.string,
                unknown_token=UNK_TOKEN,
                no_pretokenization=True,
            )
        if sentencepiece_model is not None:
            # The op logs one line of its own on stderr when a model has no normalisation
            # rule (the identity one learned models have): not for the user to read.
            with _quiet_stderr(), tf.init_scope():
                self._sentencepiece = _SentencepieceTokenizer(sentencepiece_model)

    @property
    def trackables(self) -> list:
        """The TensorFlow objects with state that `tokenize` and `detokenize` use in a
        graph (the SentencePiece model), which a SavedModel must track; [] at the
        levels that have none."""
        return [] if self._sentencepiece is None else [self._sentencepiece]

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
        if self.level == "sentencepiece":
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
        if self.level == "sentencepiece":
            return tf.strings.strip(texts)  # SentencePiece's decoder drops leading spaces
        texts = tf.strings.regex_replace(texts, r"\s+", " ")
        return tf.strings.strip(texts)

    def split_words(self, normalized) -> tf.RaggedTensor:
        """Word-level tokens of already normalised strings `(batch,)` → `(batch, None)`."""
        return text.regex_split(normalized, WORD_DELIMITERS, KEPT_DELIMITERS)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokens of `texts`: a string tensor `(batch,)` → ragged strings `(batch, None)`."""
        normalized = self.normalize(texts)
        if self.level == "char":
            spaced = tf.strings.regex_replace(normalized, " ", SPACE_TOKEN)
            return tf.strings.unicode_split(spaced, "UTF-8")
        if self.level == "pretokenized":
            return tf.strings.split(normalized)
        if self.level == "sentencepiece":
            return self._require_sentencepiece("tokenize").tokenize(normalized)
        words = self.split_words(normalized)
        if self.level == "word":
            return words
        if self._wordpiece is None:
            self._require_vocabulary("tokenize at the subword level")
        pieces = self._wordpiece.tokenize(words.flat_values)  # (total_words, None)
        return words.with_flat_values(pieces).merge_dims(1, 2)

    def detokenize(self, tokens) -> tf.Tensor:
        """Readable strings `(batch,)` from ragged tokens `(batch, None)`."""
        if self.level == "char":
            joined = tf.strings.reduce_join(tokens, axis=-1)
            return tf.strings.regex_replace(joined, SPACE_TOKEN, " ")
        if self.level == "sentencepiece":
            return self._require_sentencepiece("detokenize").detokenize(tokens)
        if self.level == "pretokenized":
            return _join_pieces(tokens, self.joiner)
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        if self.level == "subword":
            joined = tf.strings.regex_replace(joined, " " + SUFFIX_INDICATOR, "")
        for pattern, rewrite in DETOKENIZE_RULES:
            joined = tf.strings.regex_replace(joined, pattern, rewrite)
        return joined

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
        if self.level == "subword":
            return self._learn_wordpieces(texts, max_size, min_count, chunk_size)
        if self.level == "sentencepiece":
            if self.sentencepiece_model is None:
                self.sentencepiece_model = self._learn_sentencepiece(texts, max_size, chunk_size)
            return sentencepiece_vocabulary(self.sentencepiece_model)
        if self.vocab_file is not None:
            return read_vocab_file(self.vocab_file)
        counts: dict[str, int] = {}
        for start in range(0, len(texts), chunk_size):
            tokens = self.tokenize(tf.constant(texts[start : start + chunk_size])).flat_values
            unique, count = np.unique(tokens.numpy(), return_counts=True)
            for token, n in zip(unique, count):
                token = token.decode("utf-8")
                counts[token] = counts.get(token, 0) + int(n)
        return Vocabulary.from_counts(counts, max_size=max_size, min_count=min_count)

    def _learn_wordpieces(self, texts, max_size, min_count, chunk_size) -> Vocabulary:
        if max_size is None:
            raise DataError("a subword vocabulary needs a maximum size (max_size)")
        texts = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))
        words = texts.batch(chunk_size).map(lambda batch: self.split_words(self.normalize(batch)))
        character_counts, continuing, word_count = _character_counts(words)
        # The learner binary-searches the count a piece needs to be kept, by default up to
        # the count of the most frequent word: 16 rounds of pure Python on Multi30k. A
        # vocabulary whose pieces are all seen t times covers max_size * t of the
        # (at most about 1.5 per word) pieces in the text, so t < 2 * words / max_size;
        # searching below that bound halves the rounds. Were it ever too low, the learned
        # list would be too long and `_fit_wordpieces` would trim its rarest pieces.
        highest_count = max(min_count + 1, 2 * word_count // max_size)
        learned = bert_vocab_from_dataset.bert_vocab_from_dataset(
            # Batches of sentences, not single ones: the learner counts words per element.
            words.map(lambda rows: tf.strings.reduce_join(rows, axis=-1, separator=" ")),
            vocab_size=max_size,
            reserved_tokens=list(RESERVED_TOKENS),
            bert_tokenizer_params={"lower_case": False},
            learn_params={"lower_thresh": max(1, min_count), "upper_thresh": highest_count},
        )
        return Vocabulary(_fit_wordpieces(learned, character_counts, continuing, max_size))

    def _learn_sentencepiece(self, texts, max_size, chunk_size) -> bytes:
        """A SentencePiece model learned from `texts`, normalised as this tokenizer does."""
        import sentencepiece

        if max_size is None:
            raise DataError("a sentencepiece vocabulary needs a maximum size (vocab_size)")
        normalized = []
        for start in range(0, len(texts), chunk_size):
            chunk = self.normalize(tf.constant(list(texts[start : start + chunk_size])))
            normalized.extend(line.decode("utf-8") for line in chunk.numpy())
        model = io.BytesIO()
        try:
            with _quiet_stderr():
                sentencepiece.SentencePieceTrainer.train(
                    sentence_iterator=iter([line for line in normalized if line.strip()]),
                    model_writer=model,
                    model_type=self.sentencepiece_type,
                    vocab_size=max_size,
                    # A smaller corpus gives a smaller vocabulary rather than an error.
                    hard_vocab_limit=False,
                    # Text comes back exactly: no normalisation of its own (attncli's
                    # runs before), spaces kept as written, every character a piece, and
                    # a character never seen in training spelt as its UTF-8 bytes.
                    normalization_rule_name="identity",
                    remove_extra_whitespaces=False,
                    character_coverage=1.0,
                    byte_fallback=True,
                    # The reserved tokens get attncli's names and ids: the model's ids
                    # are the vocabulary's.
                    pad_id=PAD, unk_id=UNK, bos_id=START, eos_id=END,
                    pad_piece=PAD_TOKEN, unk_piece=UNK_TOKEN, bos_piece=START_TOKEN,
                    eos_piece=END_TOKEN, unk_surface=UNK_TOKEN,
                    num_threads=os.cpu_count() or 1,
                    minloglevel=2,
                )
        except RuntimeError as error:
            cannot = (f"SentencePiece cannot learn a {self.sentencepiece_type} model of "
                      f"vocab_size={max_size} from this text")
            # Its floor, as it states it: "Vocabulary size is smaller than required_chars.
            # 300 vs 371." (its reserved and byte pieces, then every character of the text).
            floor = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
            if floor:
                raise DataError(
                    f"{cannot}: it needs at least {floor[1]} pieces here (its 256 byte pieces, "
                    "the 4 reserved tokens and every character of the text); raise vocab_size "
                    f"to {floor[1]} or more"
                ) from None
            reason = str(error).strip().splitlines()[-1] if str(error).strip() else "failed"
            raise DataError(f"{cannot} ({clipped(reason)}); change vocab_size") from None
        return model.getvalue()

    def _require_sentencepiece(self, action: str):
        if self._sentencepiece is None:
            raise DataError(
                f"the sentencepiece tokenizer needs its model and vocabulary to {action} "
                "(build_vocabulary, then with_vocabulary)"
            )
        return self._sentencepiece

    def _require_vocabulary(self, action: str) -> Vocabulary:
        if self.vocabulary is None:
            raise DataError(f"the {self.level} tokenizer needs a vocabulary to {action}")
        return self.vocabulary


class _SentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """A SentencePiece model as a TensorFlow resource named after its content.

    tensorflow-text names its own by a counter of the graph that creates it
    (`_0_SentencepieceOp`): a SavedModel restores the source's and the target's under that
    one name, and the second side then runs the first side's model (measured: the target
    tokenized with the source's pieces). Named by the model's SHA-256, two models never
    share a resource, and the same model may.
    """

    def __init__(self, model: bytes):
        super().__init__()
        self._model = model
        self._shared_name = "attncli_sentencepiece_" + hashlib.sha256(model).hexdigest()
        _ = self.resource_handle  # created now, as tensorflow-text's own is

    def _create_resource(self):
        return gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._shared_name
        )


class _SentencepieceTokenizer(text.SentencepieceTokenizer):
    """tensorflow-text's tokenizer (pieces as strings) on a `_SentencepieceModel`."""

    def __init__(self, model: bytes):
        super().__init__(model, out_type=tf.string)
        self._model_resource = _SentencepieceModel(model)


def sentencepiece_vocabulary(model: bytes) -> Vocabulary:
    """The `Vocabulary` of a SentencePiece model: the 4 reserved tokens, then every piece
    of the model that is neither a control symbol nor its unknown piece, in the model's
    order. A model attncli learned has the reserved tokens as its first 4 pieces, so
    its ids are the vocabulary's."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    pieces = [
        processor.id_to_piece(index) for index in range(processor.get_piece_size())
        if not (processor.is_control(index) or processor.is_unknown(index))
    ]
    return Vocabulary(list(RESERVED_TOKENS) + [p for p in pieces if p not in RESERVED_TOKENS])


def read_vocab_file(path) -> Vocabulary:
    """The `Vocabulary` of a vocabulary file given for `pretokenized` pieces.

    A token per line: the line's first whitespace-separated field (a count or score
    after it, as in subword-nmt's, fairseq's and SentencePiece's files, is ignored),
    blank lines skipped; the 4 reserved tokens first, then the file's tokens in order
    (each once, a reserved one where it is not repeated).

    Raises:
        DataError: one line naming the file when it cannot be read or holds no token.
    """
    try:
        content = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise DataError(f"cannot read the vocabulary file {path} ({reason}); "
                        "check data.source/target.vocab_file") from None
    tokens = list(RESERVED_TOKENS)
    seen = set(tokens)
    for line in content.splitlines():
        fields = line.split()
        if fields and fields[0] not in seen:
            seen.add(fields[0])
            tokens.append(fields[0])
    if len(tokens) == len(RESERVED_TOKENS):
        raise DataError(f"the vocabulary file {path} holds no token; give one token a line")
    return Vocabulary(tokens)


def _join_pieces(pieces, joiner):
    """Text of `pretokenized` pieces `(batch, None)` → `(batch,)`, by `joiner`'s convention."""
    if joiner == SPACE_TOKEN:
        joined = tf.strings.reduce_join(pieces, axis=-1)
        spaced = tf.strings.regex_replace(joined, SPACE_TOKEN, " ")
        return tf.strings.regex_replace(spaced, "^ ", "")
    joined = tf.strings.reduce_join(pieces, axis=-1, separator=" ")
    if joiner == BPE_JOINER:
        # subword-nmt's own undoing: sed -r 's/(@@ )|(@@ ?$)//g'
        joined = tf.strings.regex_replace(joined, "@@ |@@$", "")
    return joined


def check_drop_pattern(pattern, name="drop_pattern"):
    """Refuse a `drop_pattern` that RE2 (TensorFlow's regular expressions) cannot compile.

    Raises:
        DataError: `"NAME is not an RE2 pattern (RE2's reason). Received: NAME='['"`.
    """
    if not isinstance(pattern, str):
        raise DataError(f"{name} must be a string. Received: {name}={shown(pattern)}")
    try:
        # RE2 logs its own complaint on stderr (fd 2) besides raising: the error says it.
        with _quiet_stderr(), tf.init_scope():  # compiled now, even inside a graph
            tf.strings.regex_full_match("", pattern)
    except tf.errors.InvalidArgumentError as error:
        found = re.search(r"error: (.*?)(?: \[Op:|$)", error.message)
        reason = found.group(1) if found else "invalid"
        raise DataError(
            f"{name} is not an RE2 pattern ({shown(reason)}). Received: {name}={shown(pattern)}"
        ) from None


@contextlib.contextmanager
def _quiet_stderr():
    """Within it, what the C++ libraries write on stderr (fd 2) is dropped."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _character_counts(words) -> tuple[dict, set, int]:
    """How often each character occurs in `words` (a dataset of ragged word batches), the
    set of characters that occur after the first position of a word, and the number of
    words."""
    counts, continuing, word_count = {}, set(), 0
    for batch in words:
        word_count += int(tf.size(batch.flat_values))
        characters = tf.strings.unicode_split(batch.flat_values, "UTF-8")
        unique, count = np.unique(characters.flat_values.numpy(), return_counts=True)
        for character, n in zip(unique, count):
            character = character.decode("utf-8")
            counts[character] = counts.get(character, 0) + int(n)
        continuing.update(c.decode("utf-8") for c in np.unique(characters[:, 1:].flat_values))
    return counts, continuing, word_count


def _fit_wordpieces(learned, character_counts, continuing, max_size) -> list[str]:
    """Trims a learned WordPiece list to `max_size` without losing characters.

    The learner lists every character `c` and its continuation `##c` (so no seen word is
    ever unknown), but puts them where their counts fall, often past `max_size`, and adds
    `##c` for characters that never continue a word (Chinese characters, which are words
    of their own here). This drops those useless `##c`, then the last multi-character
    pieces, and only if the characters alone do not fit, the rarest characters.
    """
    def continued(token):  # "c" for the continuation "##c" of a character, else None
        rest = token[len(SUFFIX_INDICATOR) :]
        return rest if token.startswith(SUFFIX_INDICATOR) and rest in character_counts else None

    wanted = continuing | {None}
    useful = [token for token in learned if continued(token) in wanted]
    characters = {token for token in useful if token in character_counts or continued(token)}
    protected = characters | set(RESERVED_TOKENS)
    pieces = [token for token in useful if token not in protected]
    surplus = len(useful) - max_size
    dropped = set(pieces[max(0, len(pieces) - surplus) :]) if surplus > 0 else set()
    surplus -= len(dropped)
    by_rarity = sorted(character_counts, key=lambda c: (character_counts[c], c))
    for character in by_rarity:
        for token in (character, SUFFIX_INDICATOR + character):
            if surplus > 0 and token in characters:
                dropped.add(token)
                surplus -= 1
    return [token for token in useful if token not in dropped]
