"""What a translation is, as every engine returns it (`attncli.search.translation`'s
TensorFlow search, `attncli.export.ctranslate2_engine`'s CTranslate2): nothing here
imports TensorFlow."""

from typing import NamedTuple

import numpy as np


class Hypothesis(NamedTuple):
    """One translation of a sentence.

    Attributes:
        text: the detokenized translation, end-of-sentence excluded.
        tokens: the emitted target tokens, `[END]` last when it was emitted.
        score: `log P / lp` (see `attncli.search.decoding`).
        weights: float32 array `(len(tokens), len(source_tokens))`: row `t` is the
            attention over the source when `tokens[t]` was emitted. None when the
            `Translator` does not collect weights.
        token_log_probs: list of float, one per token: `log p(tokens[t] | tokens[:t],
            source)` as the search scored it (an ensemble's: of its members' mean
            distribution; a sampled token's: under the model itself, temperature 1,
            no cut), so their sum is `log P = score * lp`. None where not known.
    """

    text: str
    tokens: list
    score: float
    weights: np.ndarray
    token_log_probs: list = None


class Translation(NamedTuple):
    """A source sentence, its tokens as the model read them, and its n best translations."""

    source: str
    source_tokens: list
    hypotheses: list
