"""The settings of a search, validated when they are set (no TensorFlow here)."""

import dataclasses
import math

from attncli.errors import clipped

# The longest translations a search may be asked for: a translation this many times
# its source's length, plus this many tokens.
MAX_LENGTH_RATIO = 1000
MAX_LENGTH_OFFSET = 100_000


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
        max_length_ratio: float in [0, 1000]; a sentence's translation has at most
            `ceil(max_length_ratio * source_length) + max_length_offset` tokens.
            Defaults to 2.0.
        max_length_offset: int in [1, 100000]. Defaults to 10.
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
        # The bound is computed in int32 (`max_target_lengths`): both terms stay far below.
        if not (math.isfinite(self.max_length_ratio)
                and 0 <= self.max_length_ratio <= MAX_LENGTH_RATIO):
            raise ValueError(
                f"max_length_ratio must be a number in [0, {MAX_LENGTH_RATIO}]. "
                f"Received: max_length_ratio={self.max_length_ratio}"
            )
        if not 1 <= self.max_length_offset <= MAX_LENGTH_OFFSET:
            raise ValueError(
                f"max_length_offset must be in [1, {MAX_LENGTH_OFFSET}]. "
                f"Received: max_length_offset={clipped(str(self.max_length_offset))}"
            )

    @property
    def returned(self):
        """The number of hypotheses returned per sentence: `n_best`, or `beam_size` if None."""
        return self.beam_size if self.n_best is None else self.n_best

    def adjusted(self, beam_size=None, alpha=None, n_best=None):
        """These settings with those given (not None) replaced, checked as any are.

        A narrower beam than this `n_best` without an `n_best` of its own returns the
        whole beam: `SearchConfig(beam_size=5, n_best=3).adjusted(beam_size=2)` has
        `n_best` 2.

        Raises:
            ValueError: the settings do not go together (see the class).
        """
        changes = {}
        if beam_size is not None:
            changes["beam_size"] = beam_size
            if n_best is None and self.n_best is not None and self.n_best > beam_size:
                changes["n_best"] = beam_size
        if alpha is not None:
            changes["alpha"] = alpha
        if n_best is not None:
            changes["n_best"] = n_best
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The plain dict of every field, as the `decoding` section of a run stores it."""
        return dataclasses.asdict(self)
