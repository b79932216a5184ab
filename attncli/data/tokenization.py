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

Detokenization joins tokens with spaces, glues WordPiece pieces, and restores the spacing
of written text: `"hello , world ."` → `"hello, world."`, `"¿ qué ?"` → `"¿qué?"`,
`'he said " hi . "'` → `'he said "hi."'` (also “ ” and „ “),
`"$ 30"` → `"$30"`, `"don ' t"` → `"don't"`, `"3 : 30"` → `"3:30"`,
and no spaces next to Chinese or Japanese characters. BLEU is computed on this text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

from attncli.errors import DataError, shown
from attncli.files import write_text_atomically
from attncli.data.vocabulary import END, PAD, RESERVED_TOKENS, START, UNK_TOKEN, Vocabulary

LEVELS = ("char", "word", "subword")
NORMALIZATIONS = ("NFC", "NFKC", "NFD", "NFKD")

#: Stands for a space at the `char` level.
SPACE_TOKEN = "\u2581"
#: Marks a WordPiece piece that continues the previous one.
SUFFIX_INDICATOR = "##"

_KANA_HAN = r"\p{Han}\p{Hiragana}\p{Katakana}"
_WORD_DELIMITERS = rf"\s+|[\p{{P}}\p{{S}}]|[{_KANA_HAN}]"
_KEPT_DELIMITERS = rf"[\p{{P}}\p{{S}}]|[{_KANA_HAN}]"
_CLOSING = r".,!?;:%)\]}»…。，、！？；：）」』"
_OPENING = r"¿¡(\[{«（「『$£€"
_CJK_PUNCTUATION = r"。，、！？；：）」』（「『"

# (pattern, rewrite) applied in order to the space-joined tokens.
_DETOKENIZE_RULES = (
    (rf" ([{_CLOSING}])", r"\1"),
    (rf"([{_OPENING}]) ", r"\1"),
    (r"([\pL\pN]) ([-'’/]) ([\pL\pN])", r"\1\2\3"),
    (r"(\d)([.,:]) (\d)", r"\1\2\3"),
    (r'"\s([^"]*?)\s"', r'"\1"'),
    (r"“\s([^”]*?)\s”", r"“\1”"),
    (r"„\s([^“]*?)\s“", r"„\1“"),
    (rf"([{_KANA_HAN}{_CJK_PUNCTUATION}]) ", r"\1"),
    (rf" ([{_KANA_HAN}{_CJK_PUNCTUATION}])", r"\1"),
)

#: The normalisation of the TensorFlow "NMT with attention" tutorial (see docs/references.md).
TUTORIAL_NORMALIZATION = dict(
    normalization="NFKD", lowercase=True, strip_accents=True, drop_pattern=r"[^ a-z.?!,¿]"
)


class Tokenizer:
    """Normalises text and splits it into tokens; maps tokens to ids with its vocabulary.

    Normalisation, in this order: case folding (`text.case_fold_utf8`) when `lowercase`;
    accents stripped (NFKD, then combining marks removed) when `strip_accents`; the Unicode
    normal form `normalization` (`text.normalize_utf8`); characters matching `drop_pattern`
    removed; runs of whitespace collapsed to one space, ends stripped.

    Args:
        level: `"char"`, `"word"` or `"subword"`. Defaults to `"word"`.
        normalization: `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or `None`. Defaults to `"NFC"`.
        lowercase: fold case. Defaults to `False`.
        strip_accents: remove combining marks (é → e, ñ → n). Defaults to `False`.
        drop_pattern: an RE2 pattern of characters to delete after normalisation, e.g. the
            tutorial's `"[^ a-z.?!,¿]"`. Defaults to `None`.
        vocabulary: the `Vocabulary` of ids; needed by `encode`/`decode`, and by
            `tokenize` at the `subword` level (its tokens are the WordPiece pieces).
            Defaults to `None`.

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
        vocabulary: Vocabulary | None = None,
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
        self.level = level
        self.normalization = normalization
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.drop_pattern = drop_pattern
        self.vocabulary = vocabulary
        self._wordpiece = None
        if level == "subword" and vocabulary is not None:
            self._wordpiece = text.FastWordpieceTokenizer(
                vocabulary.tokens,
                suffix_indicator=SUFFIX_INDICATOR,
                token_out_type=tf.string,
                unknown_token=UNK_TOKEN,
                no_pretokenization=True,
            )

    def get_config(self) -> dict:
        """Every constructor argument except the vocabulary (saved as a text file)."""
        return {
            "level": self.level,
            "normalization": self.normalization,
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "drop_pattern": self.drop_pattern,
        }

    def with_vocabulary(self, vocabulary: Vocabulary) -> Tokenizer:
        """The same tokenizer with `vocabulary`."""
        return Tokenizer(**self.get_config(), vocabulary=vocabulary)

    def save(self, directory, name: str) -> None:
        """Writes `name.tokenizer.json` and `name.vocab.txt` into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_text_atomically(
            directory / f"{name}.tokenizer.json",
            json.dumps(self.get_config(), indent=2, ensure_ascii=False) + "\n",
        )
        self._require_vocabulary("save").save(directory / f"{name}.vocab.txt")

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
        unknown, missing = sorted(set(config) - expected), sorted(expected - set(config))
        if unknown or missing:
            what = f"unknown key {shown(unknown[0])}" if unknown else f"no {missing[0]!r}"
            raise DataError(f"{path} is damaged ({what}); copy its directory again")
        try:
            settings = cls(**config)
        except DataError as error:
            raise DataError(f"{path} is damaged ({error}); copy its directory again") from None
        vocabulary = Vocabulary.load(Path(directory) / f"{name}.vocab.txt")
        return settings.with_vocabulary(vocabulary)

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
        texts = tf.strings.regex_replace(texts, r"\s+", " ")
        return tf.strings.strip(texts)

    def split_words(self, normalized) -> tf.RaggedTensor:
        """Word-level tokens of already normalised strings `(batch,)` → `(batch, None)`."""
        return text.regex_split(normalized, _WORD_DELIMITERS, _KEPT_DELIMITERS)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokens of `texts`: a string tensor `(batch,)` → ragged strings `(batch, None)`."""
        normalized = self.normalize(texts)
        if self.level == "char":
            spaced = tf.strings.regex_replace(normalized, " ", SPACE_TOKEN)
            return tf.strings.unicode_split(spaced, "UTF-8")
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
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        if self.level == "subword":
            joined = tf.strings.regex_replace(joined, " " + SUFFIX_INDICATOR, "")
        for pattern, rewrite in _DETOKENIZE_RULES:
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
        `texts`, pieces kept only if seen at least `min_count` times. In both, ids 0-3 are
        the reserved pad, unknown, start and end tokens.
        """
        if self.level == "subword":
            return self._learn_wordpieces(texts, max_size, min_count, chunk_size)
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

    def _require_vocabulary(self, action: str) -> Vocabulary:
        if self.vocabulary is None:
            raise DataError(f"the {self.level} tokenizer needs a vocabulary to {action}")
        return self.vocabulary


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
