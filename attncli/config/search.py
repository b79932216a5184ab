"""The settings of a search, validated when they are set (no TensorFlow here)."""

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How `attncli.search.decoding.compile_search` turns a source sentence into hypotheses.

    Args:
        beam_size: int >= 1; 1 is greedy search. Defaults to 1.
        alpha: the exponent of the length penalty `lp(Y) = ((5 + |Y|) / 6) ** alpha`
            (Wu et al. 2016); hypotheses are ranked by `log P(Y | X) / lp(Y)`, and `0`
            ranks by `log P` alone. Defaults to 0.6.
        n_best: int in `[1, beam_size]`, hypotheses returned per sentence, or None for
            `beam_size` (see `returned`). Defaults to 1, whatever the beam: a larger
            beam searches wider and still returns the best hypothesis alone.
        max_length_ratio: float >= 0; a sentence's translation has at most
            `ceil(max_length_ratio * source_length) + max_length_offset` tokens.
            Defaults to 2.0.
        max_length_offset: int >= 1. Defaults to 10.
    """

    beam_size: int = 1
    alpha: float = 0.6
    n_best: int | None = 1
    max_length_ratio: float = 2.0
    max_length_offset: int = 10

    def __post_init__(self):
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1. Received: beam_size={self.beam_size}")
        n_best = self.returned
        if not 1 <= n_best <= self.beam_size:
            raise ValueError(
                f"n_best must be in [1, beam_size={self.beam_size}]. Received: n_best={n_best}"
            )
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0. Received: alpha={self.alpha}")
        if not (math.isfinite(self.max_length_ratio) and self.max_length_ratio >= 0):
            raise ValueError(
                "max_length_ratio must be a finite number >= 0. "
                f"Received: max_length_ratio={self.max_length_ratio}"
            )
        if self.max_length_offset < 1:
            raise ValueError(
                "max_length_offset must be >= 1. "
                f"Received: max_length_offset={self.max_length_offset}"
            )

    @property
    def returned(self):
        """The number of hypotheses returned per sentence: `n_best`, or `beam_size` if None."""
        return self.beam_size if self.n_best is None else self.n_best

    def to_dict(self):
        """The plain dict of every field, as the `decoding` section of a run stores it."""
        return dataclasses.asdict(self)
