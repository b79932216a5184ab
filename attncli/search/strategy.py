"""How a search chooses each step's tokens: the strategies of the one decoding loop.

`attncli.search.decoding.search_loop` is one `tf.while_loop` over target positions: it
runs the decoder for the rows still translating (`decode_rows`, which forces a prefix's
token where one is due, whatever the strategy), records each step's tokens, their
`log p` and attention weights, and stops when no row is left. What differs between
searches is a `Strategy`, as fairseq's `Search` and keras-hub's `Sampler` plug into their
generators. A sentence has `copies` hypotheses, each a row of the loop: row
`b * copies + i` is hypothesis `i` of sentence `b`.

In `Greedy` and `Sampled` each row is one hypothesis from its first token to its last:
a finished row is dropped and the others go on from their own state. In `Beam` a step's
hypotheses are the best continuations of the step before's, wherever they come from:
each goes on from its parent's state, and the tokens are read back along the parents.

Every strategy scores as Wu et al. 2016 (eq. 14):

    lp(Y)       = ((5 + |Y|) / 6) ** alpha
    score(Y, X) = log P(Y | X) / lp(Y)

`|Y|` counting the emitted tokens, end-of-sentence included. The strategies are
`attncli.search.greedy` (`Greedy`, `Sampled`) and `attncli.search.beam` (`Beam`);
`attncli.search.decoding.strategy_for` is the one place a request (a `SearchConfig`, a
`Sampling`) names one.
"""

from typing import NamedTuple, Protocol

import tensorflow as tf


class Hypothesized(NamedTuple):
    """Where every hypothesis stands, each field `(rows,)`.

    Attributes:
        finished: bool, whether it has ended.
        lengths: int32, its emitted tokens, end-of-sentence included.
        log_probs: float32, its `log P(Y | X)` so far.
    """

    finished: tf.Tensor
    lengths: tf.Tensor
    log_probs: tf.Tensor


class Selection(NamedTuple):
    """A step's choice, each field `(rows,)` but `parents`.

    Attributes:
        token_ids: int32, each hypothesis's token (padding once it has finished).
        step_log_probs: float32, that token's `log p`; 0 once finished.
        hypotheses: the `Hypothesized` after the step.
        parents: int32 `(batch, copies)`, the hypothesis each one continues, for a
            strategy whose hypotheses change rows; None for one whose rows are their own.
    """

    token_ids: tf.Tensor
    step_log_probs: tf.Tensor
    hypotheses: Hypothesized
    parents: tf.Tensor | None


class Strategy(Protocol):
    """What `search_loop` asks of a strategy.

    Attributes:
        copies: hypotheses per sentence, each a row of the loop.
        candidates: tokens each row's step returns (`decode_rows`'s `k`).
    """

    copies: int
    candidates: int

    def start(self, source_ids, state, memory, max_lengths, alpha):
        """`(decoding, state, memory, Hypothesized)` before the first step: the rows
        decoded first, their state and memory, and where each hypothesis starts.
        `max_lengths` int32 `(batch,)` and `alpha` are the batch's constants."""

    def choose(self, t):
        """`decode_rows`'s `choose` at step `t`: None for the most probable tokens."""

    def select(self, t, top_log_probs, top_ids, hypotheses):
        """The `Selection` of step `t` from each row's candidates `(rows, candidates)`."""

    def next_rows(self, selection, decoding, state, memory):
        """`(decoding, state, memory)` of the rows the next step decodes."""

    def follow(self, values, selection):
        """A step's `values` `(rows, ...)` of the rows decoded, moved to the hypotheses
        that continue them."""

    def parent_record(self):
        """The loop variable that records each step's parents, or `()` for none."""

    def record_parents(self, record, t, selection):
        """`record` with step `t`'s parents written."""

    def result(self, hypotheses, tokens, parents, token_log_probs, weights):
        """The `Hypotheses` of the batch from the loop's records: `tokens` and
        `token_log_probs` `(T, rows)`, `weights` `(T, rows, Ts)` or None, and
        `parent_record()` after the last step."""


def rows_of(indices, tensors):
    """Rows `indices` (int32 `(n,)`) of every tensor of the nested `tensors`."""
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)
