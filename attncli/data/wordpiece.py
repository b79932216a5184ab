"""WordPiece vocabularies learned from words, for the `subword` tokenizer level.

`bert_vocab_from_dataset` (tensorflow-text) learns the pieces: every character, its
continuation `##c`, and the pieces seen at least `min_count` times, about `max_size` in
all; `learn_wordpieces` bounds the learner's search and trims its list to `max_size`
without losing a character, so no word of the training text is ever unknown.
"""

import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

from attncli.data.text_rules import RESERVED_TOKENS, SUFFIX_INDICATOR


def learn_wordpieces(words, max_size, min_count) -> list[str]:
    """The tokens of a WordPiece vocabulary, the 4 reserved ones first, of at most
    `max_size` tokens learned from `words` (a dataset of ragged batches of words,
    `(batch, None)` strings), pieces kept only if seen at least `min_count` times."""
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
    return _fit_wordpieces(learned, character_counts, continuing, max_size)


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
