"""The worked examples of `attncli score-demo`, as their articles give them.

`SEQ2SEQ` is the dot-product example of "Attn: Illustrated Attention", `SELF_ATTENTION`
the eight-step example of "Illustrated: Self-Attention" (Raimi Karim, Towards Data
Science, 2019), each with the figures its article printed (`ArticleFigures`), which
score-demo compares with the exact ones.
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class DemoInputs:
    """Queries `(Tq, d_q)`, keys `(Tv, d_k)`, values `(Tv, d_v)`, as float32 arrays.

    `valid_length` masks the keys from that position on (None: all keys are valid).
    `parameters` maps a layer weight's name (`W_a`, `v_a`, `W_q`, ...) to the value the
    layer must use instead of its seeded initialisation.
    """

    query: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    valid_length: int | None = None
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ArticleFigures:
    """What the article a worked example comes from printed for the first query, to
    compare with exact values; `source` names the article."""

    weights: tuple
    context: tuple
    source: str


# The articles the worked examples come from (Towards Data Science, 2019).
ILLUSTRATED_ATTENTION = 'Raimi Karim\'s "Attn: Illustrated Attention" (2019)'
ILLUSTRATED_SELF_ATTENTION = 'Raimi Karim\'s "Illustrated: Self-Attention" (2019)'


@dataclass(frozen=True)
class Seq2SeqExample:
    """The dot-product example of "Attn: Illustrated Attention" (Raimi Karim, 2019): one
    decoder state, four encoder states."""

    inputs: DemoInputs
    article: ArticleFigures


@dataclass(frozen=True)
class SelfAttentionExample:
    """The eight-step example of "Illustrated: Self-Attention" (Raimi Karim, 2019).

    `inputs` `(T, d)`; `parameters` holds `W_q`, `W_k`, `W_v`, each `(d, 3)`, applied as
    `inputs @ W`.
    """

    inputs: np.ndarray
    parameters: dict
    article: ArticleFigures


def _float32(rows):
    return np.array(rows, dtype="float32")


SEQ2SEQ = Seq2SeqExample(
    inputs=DemoInputs(
        query=_float32([[10, 5, 10]]),
        keys=_float32([[0, 1, 1], [5, 0, 1], [1, 1, 0], [0, 5, 1]]),
        values=_float32([[0, 1, 1], [5, 0, 1], [1, 1, 0], [0, 5, 1]]),
    ),
    article=ArticleFigures(weights=(0, 1, 0, 0), context=(5, 0, 1),
                           source=ILLUSTRATED_ATTENTION),
)

SELF_ATTENTION = SelfAttentionExample(
    inputs=_float32([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]),
    parameters={
        "W_q": _float32([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]),
        "W_k": _float32([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]),
        "W_v": _float32([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]),
    },
    article=ArticleFigures(weights=(0.0, 0.5, 0.5), context=(2.0, 7.0, 1.5),
                           source=ILLUSTRATED_SELF_ATTENTION),
)
