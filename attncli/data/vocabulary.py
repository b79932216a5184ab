"""Vocabularies: tokens ↔ int32 ids, with pad, unknown, start and end reserved as ids 0-3.

Saved as plain UTF-8 text, one token per line in id order, beside a trained model.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from attncli.data.text_rules import (  # noqa: F401 (read from here too)
    END_TOKEN, PAD_TOKEN, RESERVED_TOKENS, START_TOKEN, UNK_TOKEN,
)
from attncli.errors import DataError, clipped, shown
from attncli.files import write_text_atomically

PAD, UNK, START, END = 0, 1, 2, 3


class Vocabulary:
    """An ordered list of distinct tokens; a token's id is its position.

    Args:
        tokens: every token in id order; the first four must be `RESERVED_TOKENS`
            (`[PAD]`, `[UNK]`, `[START]`, `[END]`, ids `PAD`=0, `UNK`=1, `START`=2,
            `END`=3). Tokens are non-empty and contain no line break.

    `lookup` and `tokens_of` are TensorFlow ops (they run inside `tf.function` and
    `tf.data`); an unknown token maps to `UNK`.
    """

    def __init__(self, tokens):
        tokens = list(tokens)
        if tuple(tokens[:4]) != RESERVED_TOKENS:
            raise DataError(
                f"a vocabulary must start with {', '.join(RESERVED_TOKENS)}. "
                f"Received: {clipped(', '.join(tokens[:4])) or 'nothing'}"
            )
        seen = set()
        for token in tokens:
            if not token or "\n" in token or "\r" in token:
                raise DataError(f"vocabulary token {shown(token)} is empty or has a line break")
            if token in seen:
                raise DataError(f"vocabulary token {shown(token)} appears twice")
            seen.add(token)
        self.tokens = tokens
        self._ids = {token: index for index, token in enumerate(tokens)}
        self._table = None
        self._token_tensor = None

    @classmethod
    def from_counts(cls, counts, max_size: int | None = None, min_count: int = 1) -> Vocabulary:
        """The most frequent tokens of `counts` (a mapping token → count).

        Args:
            counts: how often each token was seen in the training text.
            max_size: the vocabulary size including the 4 reserved tokens (so at most
                `max_size - 4` counted tokens). Defaults to `None`: no limit.
            min_count: tokens seen fewer times are left out. Defaults to 1.

        Order: by count, most frequent first; ties broken by the token's text (code
        points), so the same counts always give the same vocabulary.
        """
        if max_size is not None and max_size < len(RESERVED_TOKENS) + 1:
            raise DataError(
                f"max_size must be at least 5 (4 reserved tokens). Received: max_size={max_size}"
            )
        if min_count < 1:
            raise DataError(f"min_count must be at least 1. Received: min_count={min_count}")
        kept = sorted(
            (
                (token, count)
                for token, count in counts.items()
                if count >= min_count and token not in RESERVED_TOKENS
            ),
            key=lambda item: (-item[1], item[0]),
        )
        if max_size is not None:
            kept = kept[: max_size - len(RESERVED_TOKENS)]
        return cls(list(RESERVED_TOKENS) + [token for token, _ in kept])

    def save(self, path) -> None:
        """Writes one token per line, in id order."""
        write_text_atomically(path, "".join(token + "\n" for token in self.tokens))

    @classmethod
    def load(cls, path) -> Vocabulary:
        """Reads a file written by `save`."""
        try:
            content = Path(path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            if isinstance(error, FileNotFoundError):
                raise DataError(
                    f"cannot read vocabulary {path}: it is missing; copy its directory again"
                ) from None
            raise DataError(f"cannot read vocabulary {path}: {error}") from None
        try:
            return cls(
                content.split("\n")[:-1] if content.endswith("\n") else content.split("\n")
            )
        except DataError as error:
            raise DataError(
                f"{path} is damaged ({error}); copy its directory again"
            ) from None

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def id_of(self, token: str) -> int:
        """The id of one token (Python), `UNK` if unknown."""
        return self._ids.get(token, UNK)

    def lookup(self, tokens):
        """int32 ids of string `tokens`, dense or ragged, same shape."""
        if self._table is None:
            with tf.init_scope():  # created eagerly once, even when first used in a graph
                self._table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(self.tokens), tf.range(len(self.tokens), dtype=tf.int32)
                    ),
                    default_value=UNK,
                )
        if isinstance(tokens, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self._table.lookup, tokens)
        return self._table.lookup(tf.convert_to_tensor(tokens, tf.string))

    def tokens_of(self, ids):
        """String tokens of int `ids`, dense or ragged, same shape."""
        if self._token_tensor is None:
            with tf.init_scope():
                self._token_tensor = tf.constant(self.tokens)
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(tf.gather, self._token_tensor, ids)
        return tf.gather(self._token_tensor, ids)


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
