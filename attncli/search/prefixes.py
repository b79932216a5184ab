"""What a target prefix may be: the refusals of every engine that forces one (the
TensorFlow search, `attncli.search.translation.Translator`, and the CTranslate2 engine,
`attncli.export.ctranslate2_engine.ExportedTranslator`), each with its own tokenizer.
Nothing here imports TensorFlow.

A prefix is forced token by token, then the search goes on; it cannot be forced when it
writes a reserved token (`[START]`, `[END]`, `[PAD]`), has no token the target tokenizer
keeps, has none the target vocabulary knows (it would force `[UNK]` only), or has as many
tokens as its sentence's translation may have, `ceil(max_length_ratio x source tokens) +
max_length_offset`: the maximum counts the prefix, which must leave room for one more.
"""

import math

import numpy as np

from attncli.data.text_rules import END_TOKEN, PAD_TOKEN, START_TOKEN
from attncli.errors import shown

#: Tokens a prefix may not write ([UNK] is what an unknown word forces).
RESERVED = (PAD_TOKEN, START_TOKEN, END_TOKEN)


class PrefixError(ValueError):
    """A prefix the model cannot be made to begin its translation with (one line).

    Attributes:
        index: the position of the text whose prefix it is.
    """

    def __init__(self, message, index):
        super().__init__(message)
        self.index = index


def check_written(prefix, index):
    """Raises `PrefixError` if `prefix` writes a reserved token, in any case: whether a
    tokenizer keeps it whole or cuts it into `[`, `end`, `]`."""
    written = [token for token in RESERVED if token.lower() in prefix.lower()]
    if written:
        raise PrefixError(f"the prefix {shown(prefix)} writes the reserved "
                          f"token{'s' if len(written) > 1 else ''} "
                          f"{', '.join(written)}; leave it out", index)


def check_tokens(prefix, tokens, known, text, source_length, search, index):
    """Raises `PrefixError` if the target `tokens` of `prefix` (a list of str) cannot be
    forced on the translation of `text`, `source_length` tokens as the model reads it,
    under `search` (a `SearchConfig`); `known`: the target vocabulary without `[UNK]`."""
    shown_prefix = shown(prefix)
    if not tokens:
        raise PrefixError(f"the prefix {shown_prefix} has no token the target tokenizer "
                          "keeps; give words the model writes", index)
    if not set(tokens) & known:
        raise PrefixError(f"the prefix {shown_prefix} has no token of the model's target "
                          "vocabulary: forced, it would be [UNK] only; give words the "
                          "model writes", index)
    # in float32, as the search computes it (attncli.search.search_steps)
    scaled = np.float32(search.max_length_ratio) * np.float32(source_length)
    longest = math.ceil(float(scaled)) + search.max_length_offset
    if len(tokens) >= longest:
        raise PrefixError(
            f"the prefix {shown_prefix} has {len(tokens)} tokens and the translation of "
            f"{shown(text)} at most {longest} (max_length_ratio {search.max_length_ratio} "
            f"x {source_length} source tokens + max_length_offset "
            f"{search.max_length_offset}); shorten the prefix", index,
        )
