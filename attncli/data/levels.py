"""Tokenizer levels: how normalised text is cut into tokens, and tokens joined into text.

One class per level, each with the interface of `Level` and registered by its name in
`LEVEL_CLASSES` (`@registered`); the `Tokenizer` of `attncli.data.tokenization` normalises
text, then hands it to the class of its level. A new level is its class here (or in a
module of its own that `tokenization` imports, as `sentencepiece_level`) and its name in
`attncli.config.data.LEVELS`, which the configuration checks before TensorFlow loads.

- `char` (`CharLevel`): one token per Unicode character; a space becomes the visible
  token `▁` so the vocabulary file stays one token per line and joining restores the
  spaces.
- `word` (`WordLevel`): split on whitespace; every punctuation mark or symbol (Unicode
  categories P and S) is a token of its own; every Han, Hiragana and Katakana character
  is a token of its own, so Chinese written without spaces still splits
  (tensorflow-text has no Chinese word segmenter that works offline, and characters are
  the usual unit for Chinese NMT at this scale). Done with one `text.regex_split`.
- `subword` (`SubwordLevel`): the `word` split, then each word cut into WordPiece
  pieces (`##` marks a piece that continues a word) with `text.FastWordpieceTokenizer`;
  the piece vocabulary is learned from training text (`attncli.data.wordpiece`).
- `sentencepiece`: `attncli.data.sentencepiece_level`.
- `pretokenized` (`PretokenizedLevel`): the text's own pieces, split on whitespace,
  nothing added or removed (text cut into BPE or SentencePiece pieces beforehand);
  `joiner` says how the pieces join into text again: `"@@"` (subword-nmt: `Mach@@ en` →
  `Machen`), `"▁"` (SentencePiece pieces: `▁Die ▁Kat ze` → `Die Katze`) or None (pieces
  joined with spaces).

Joining at the `word` and `subword` levels puts spaces between tokens, glues WordPiece
pieces, and restores the spacing of written text (`attncli.data.text_rules`):
`"hello , world ."` → `"hello, world."`, `"¿ qué ?"` → `"¿qué?"`,
`'he said " hi . "'` → `'he said "hi."'` (also “ ” and „ “), `"$ 30"` → `"$30"`,
`"don ' t"` → `"don't"`, `"3 : 30"` → `"3:30"`, and no spaces next to Chinese or
Japanese characters. BLEU is computed on this text.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from attncli.config.data import BPE_JOINER
from attncli.data.pipeline import without_autotune
from attncli.data.text_rules import (
    DETOKENIZE_RULES, KEPT_DELIMITERS, SPACE_TOKEN, SUFFIX_INDICATOR, UNK_TOKEN, WORD_DELIMITERS,
)
from attncli.data.vocabulary import Vocabulary, read_vocab_file
from attncli.data.wordpiece import learn_wordpieces
from attncli.errors import DataError

#: Each tokenizer level's class, by the level's name (`data.source.level`).
LEVEL_CLASSES: dict[str, type] = {}


def registered(level_class):
    """Class decorator: `level_class` is the level of its `name` (`LEVEL_CLASSES`)."""
    known = LEVEL_CLASSES.get(level_class.name)
    where = (level_class.__module__, level_class.__qualname__)
    if known is not None and (known.__module__, known.__qualname__) != where:
        raise ValueError(f"tokenizer level {level_class.name!r} has a class already: "
                         f"{known.__qualname__}")
    LEVEL_CLASSES[level_class.name] = level_class
    return level_class


class Level:
    """One tokenizer level: cuts normalised text into tokens, joins tokens into text, and
    learns the vocabulary of its tokens.

    A subclass names its level and overrides `split` and `join`; one whose tokens need
    a vocabulary (or a model) to be cut builds its op from the tokenizer's in
    `__init__`, and one that learns more than token counts overrides `learn`.

    Args:
        tokenizer: the `attncli.data.tokenization.Tokenizer` the level works for; a
            level reads the settings it needs from it when it is made.

    Attributes:
        name: the level's name, as `data.source.level` spells it.
        keeps_spaces: whether normalisation leaves the spaces inside a text as written
            (SentencePiece reads them) instead of collapsing each run to one space.
        trackables: the TensorFlow objects with state that `split` and `join` use in a
            graph, which a SavedModel must track.

    Methods:
        split(normalized): the tokens of normalised strings `(batch,)`, ragged strings
            `(batch, None)`.
        join(tokens): readable strings `(batch,)` from ragged tokens `(batch, None)`.
        learn(tokenizer, texts, max_size, min_count, chunk_size): the `Vocabulary` of
            the training strings `texts`: here the `max_size - 4` most frequent tokens
            seen at least `min_count` times (ties broken by the token's text), after the
            4 reserved ones.
    """

    name: str
    keeps_spaces = False
    trackables = ()

    def __init__(self, tokenizer):
        pass

    def split(self, normalized) -> tf.RaggedTensor:
        raise NotImplementedError

    def join(self, tokens) -> tf.Tensor:
        raise NotImplementedError

    def learn(self, tokenizer, texts, max_size, min_count, chunk_size) -> Vocabulary:
        counts: dict[str, int] = {}
        for start in range(0, len(texts), chunk_size):
            tokens = tokenizer.tokenize(tf.constant(texts[start : start + chunk_size])).flat_values
            unique, count = np.unique(tokens.numpy(), return_counts=True)
            for token, n in zip(unique, count):
                token = token.decode("utf-8")
                counts[token] = counts.get(token, 0) + int(n)
        return Vocabulary.from_counts(counts, max_size=max_size, min_count=min_count)


@registered
class CharLevel(Level):
    """`char`: one token per character, a space spelt `▁`."""

    name = "char"

    def split(self, normalized):
        spaced = tf.strings.regex_replace(normalized, " ", SPACE_TOKEN)
        return tf.strings.unicode_split(spaced, "UTF-8")

    def join(self, tokens):
        joined = tf.strings.reduce_join(tokens, axis=-1)
        return tf.strings.regex_replace(joined, SPACE_TOKEN, " ")


@registered
class WordLevel(Level):
    """`word`: words, punctuation marks and symbols, Han and kana characters."""

    name = "word"

    def split(self, normalized):
        return split_words(normalized)

    def join(self, tokens):
        return _written_spacing(tf.strings.reduce_join(tokens, axis=-1, separator=" "))


@registered
class SubwordLevel(WordLevel):
    """`subword`: each word of the `word` split cut into WordPiece pieces of the
    tokenizer's vocabulary."""

    name = "subword"

    def __init__(self, tokenizer):
        self._wordpiece = None
        if tokenizer.vocabulary is not None:
            self._wordpiece = text.FastWordpieceTokenizer(
                tokenizer.vocabulary.tokens,
                suffix_indicator=SUFFIX_INDICATOR,
                token_out_type=tf.string,
                unknown_token=UNK_TOKEN,
                no_pretokenization=True,
            )

    def split(self, normalized):
        words = split_words(normalized)
        if self._wordpiece is None:
            raise DataError("the subword tokenizer needs a vocabulary to tokenize at the "
                            "subword level")
        pieces = self._wordpiece.tokenize(words.flat_values)  # (total_words, None)
        return words.with_flat_values(pieces).merge_dims(1, 2)

    def join(self, tokens):
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return _written_spacing(tf.strings.regex_replace(joined, " " + SUFFIX_INDICATOR, ""))

    def learn(self, tokenizer, texts, max_size, min_count, chunk_size):
        """A WordPiece vocabulary of at most `max_size` tokens learned from the words of
        `texts`, pieces kept only if seen at least `min_count` times."""
        if max_size is None:
            raise DataError("a subword vocabulary needs a maximum size (max_size)")
        texts = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))
        words = without_autotune(texts.batch(chunk_size).map(
            lambda batch: split_words(tokenizer.normalize(batch))))
        return Vocabulary(learn_wordpieces(words, max_size, min_count))


@registered
class PretokenizedLevel(Level):
    """`pretokenized`: the pieces given, split on whitespace and joined by `joiner`."""

    name = "pretokenized"

    def __init__(self, tokenizer):
        self.joiner = tokenizer.joiner

    def split(self, normalized):
        return tf.strings.split(normalized)

    def join(self, tokens):
        if self.joiner == SPACE_TOKEN:
            joined = tf.strings.reduce_join(tokens, axis=-1)
            spaced = tf.strings.regex_replace(joined, SPACE_TOKEN, " ")
            return tf.strings.regex_replace(spaced, "^ ", "")
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        if self.joiner == BPE_JOINER:
            # subword-nmt's own undoing: sed -r 's/(@@ )|(@@ ?$)//g'
            joined = tf.strings.regex_replace(joined, "@@ |@@$", "")
        return joined

    def learn(self, tokenizer, texts, max_size, min_count, chunk_size):
        """The tokens of the tokenizer's `vocab_file` when it has one, else counted."""
        if tokenizer.vocab_file is not None:
            return read_vocab_file(tokenizer.vocab_file)
        return super().learn(tokenizer, texts, max_size, min_count, chunk_size)


def split_words(normalized) -> tf.RaggedTensor:
    """Word-level tokens of normalised strings `(batch,)` → `(batch, None)`."""
    return text.regex_split(normalized, WORD_DELIMITERS, KEPT_DELIMITERS)


def _written_spacing(joined):
    """Space-joined tokens `(batch,)` with the spacing of written text."""
    for pattern, rewrite in DETOKENIZE_RULES:
        joined = tf.strings.regex_replace(joined, pattern, rewrite)
    return joined
