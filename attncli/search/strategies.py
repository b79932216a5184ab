"""How a search chooses each step's tokens: the strategies of the one decoding loop.

`attncli.search.decoding.search_loop` is one `tf.while_loop` over target positions: it
runs the decoder for the rows still translating (`decode_rows`, which forces a prefix's
token where one is due, whatever the strategy), writes each step's tokens, their `log p`
and attention weights, and stops when no row is left. What differs between searches is
a `Strategy`, as fairseq's `Search` and keras-hub's `Sampler` are plugged into their
generators:

- `copies`: the hypotheses of a sentence, each a row of the loop (row `b * copies + i`
  is hypothesis `i` of sentence `b`), and `candidates`, the tokens each row's step
  returns;
- `start`: the rows decoded first, their state and memory, which hypotheses start
  finished and their `log P`;
- `choose(t)`: how a row's candidates are picked from its logits (None: the most
  probable ones);
- `select`: the step's token of each hypothesis, from its row's candidates;
- `next_rows`: which rows decode next, from which state;
- `result`: the `Hypotheses` the search returns.

Two kinds of strategy. In `Greedy` and `Sampled` each row is one hypothesis from its
first token to its last: a finished row is dropped and the others go on from their own
state. In `Beam` a step's hypotheses are the best continuations of the step before,
wherever they come from: each row goes on from its parent's state, and the tokens are
read back along the parents at the end.

Every strategy scores as Wu et al. 2016 (eq. 14): `score(Y, X) = log P(Y | X) / lp(Y)`,
`lp(Y) = ((5 + |Y|) / 6) ** alpha`, `|Y|` counting the emitted tokens, end-of-sentence
included. `strategy_for` is the one place a request (`SearchConfig`, `Sampling`) names
its strategy.
"""

import math
from typing import NamedTuple

import tensorflow as tf

from attncli.data.vocabulary import END, PAD
from attncli.search.sampling import sample_keys, sample_next_tokens, sentence_keys, uniforms
from attncli.search.search_steps import Hypotheses, length_penalty


class Selection(NamedTuple):
    """A step's choice, every field `(batch, copies)`.

    Attributes:
        token_ids: int32, each hypothesis's token (padding once it has finished).
        step_log_probs: float32, that token's `log p`; 0 once finished.
        log_probs: float32, `log P` of each hypothesis so far.
        lengths: int32, its emitted tokens, end-of-sentence included.
        finished: bool, whether it has ended.
        parents: int32, the hypothesis (`0..copies - 1`) each one continues; the
            identity for strategies whose rows are their own.
    """

    token_ids: tf.Tensor
    step_log_probs: tf.Tensor
    log_probs: tf.Tensor
    lengths: tf.Tensor
    finished: tf.Tensor
    parents: tf.Tensor


def rows_of(indices, tensors):
    """Rows `indices` (int32 `(n,)`) of every tensor of the nested `tensors`."""
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)


class Greedy:
    """The most probable token at every step; one row per sentence (`copies` rows when a
    subclass draws several hypotheses), each its own hypothesis to the end."""

    copies = 1
    candidates = 1
    reorders = False  # each row is one hypothesis throughout: no parents recorded

    def start(self, batch_size, state, memory):
        """`(decoding, state, memory, finished, log_probs)` before the first step: every
        row decodes, from its sentence's state and memory."""
        rows = batch_size * self.copies
        every_row = tf.range(rows)
        if self.copies > 1:
            state, memory = rows_of(every_row // self.copies, (state, memory))
        zeros = tf.zeros([batch_size, self.copies])
        return every_row, state, memory, tf.cast(zeros, tf.bool), zeros

    def choose(self, t):
        """None: the `candidates` most probable tokens of each row (`top_next_tokens`)."""
        return None

    def select(self, t, top_log_probs, top_ids, finished, lengths, log_probs, max_lengths,
               alpha):
        """Each unfinished row's first candidate; a finished row emits padding, `log p` 0.

        Args:
            t: int32 scalar, the step.
            top_log_probs, top_ids: `(rows, candidates)` from `decode_rows`.
            finished, lengths, log_probs: `(batch, copies)` before the step.
            max_lengths: int32 `(batch, 1)`, each sentence's maximum length.
            alpha: the length penalty's exponent.
        """
        shape = tf.shape(finished)
        alive = ~finished
        token_ids = tf.where(alive, tf.reshape(top_ids[:, 0], shape), PAD)
        step_log_probs = tf.where(alive, tf.reshape(top_log_probs[:, 0], shape), 0.0)
        lengths += tf.cast(alive, tf.int32)
        finished = finished | (token_ids == END) | (lengths >= max_lengths)
        parents = tf.broadcast_to(tf.range(shape[1]), shape)
        return Selection(token_ids, step_log_probs, log_probs + step_log_probs, lengths,
                         finished, parents)

    def next_rows(self, selection, decoding, state, memory):
        """The rows still translating go on from their own state: finished rows are
        dropped (nothing is gathered while every row goes on)."""
        still = tf.gather(~tf.reshape(selection.finished, [-1]), decoding)
        return tf.cond(
            tf.reduce_all(still),
            lambda: (decoding, state, memory),
            lambda: rows_of(tf.reshape(tf.where(still), [-1]), (decoding, state, memory)),
        )

    def follow(self, values, parents):
        """A step's `values` `(batch, copies, ...)` of the rows decoded, moved to the
        hypotheses that continue them: each row's own."""
        return values

    def parent_steps(self):
        """The loop's record of each step's `parents`: none (`reorders` is False)."""
        return ()

    def result(self, lengths, log_probs, tokens, parents, token_log_probs, weights, alpha):
        """`Hypotheses` with `n = copies`, in row order.

        Args:
            lengths, log_probs: `(batch, copies)` after the last step.
            tokens, token_log_probs: `(T, batch, copies)`; weights `(T, batch, copies,
            Ts)` or None; parents: `parent_steps()`'s record.
        """
        return Hypotheses(
            token_ids=tf.transpose(tokens, [1, 2, 0]),
            lengths=lengths,
            scores=log_probs / length_penalty(lengths, alpha),
            log_probs=log_probs,
            token_log_probs=tf.transpose(token_log_probs, [1, 2, 0]),
            weights=None if weights is None else tf.transpose(weights, [1, 2, 0, 3]),
        )


class Sampled(Greedy):
    """Each token drawn at random (`attncli.search.sampling`), `sampling.samples`
    hypotheses per sentence, each drawn on its own, returned best score first.

    The random numbers are a hash of the seed, the sentence, the sample and the step, so
    a sentence draws the same tokens alone or in any batch. Scores are those of a search:
    `log P(Y | X)` under the model itself (no temperature, no cut) over `lp(Y)`.

    Args:
        sampling: a `Sampling`.
        source_ids: int32 `(batch_size, Ts)`, the sentences (their tokens seed the draws).
        seeds: int64 `(batch_size,)`, each sentence's seed (>= 0).
        temperature: a float64 scalar tensor in place of `sampling.temperature`, or None.
    """

    def __init__(self, sampling, source_ids, seeds, temperature=None):
        self.sampling, self.temperature = sampling, temperature
        self.copies = sampling.samples
        self.keys = sample_keys(sentence_keys(source_ids, tf.convert_to_tensor(seeds, tf.int64)),
                                self.copies)

    def choose(self, t):
        """Draw each row's token from its logits with the row's own random number."""
        def draw(logits, rows):
            u = uniforms(tf.gather(self.keys, rows), t)
            return sample_next_tokens(logits, self.sampling, u, self.temperature)

        return draw

    def result(self, lengths, log_probs, tokens, parents, token_log_probs, weights, alpha):
        """The samples of each sentence, best score first."""
        found = super().result(lengths, log_probs, tokens, parents, token_log_probs, weights,
                               alpha)
        scores, order = tf.math.top_k(found.scores, self.copies)
        return Hypotheses(*(None if field is None else tf.gather(field, order, batch_dims=1)
                            for field in found._replace(scores=scores)))._replace(scores=scores)


class Beam:
    """The `beam_size` best hypotheses of each sentence, by `score = log P / lp`.

    Every step extends each unfinished hypothesis by every token, and keeps the
    `beam_size` best of all candidates. A hypothesis that emitted end-of-sentence (or
    reached its maximum length) is finished: it stays in the beam as one candidate with
    its score unchanged and is never extended, so it is only displaced by better ones.

    A sentence is settled, and all its hypotheses finished, as soon as `n_best` of its
    finished hypotheses score at least `log P / lp(max_length)` of every unfinished one:
    for `alpha >= 0` that bounds the score of any continuation (`log P` only falls, `lp`
    only grows), so no later step could change its n best. Tokens, back-pointers and
    attention weights are stored per step and followed back from the final beams, so the
    weights returned belong to the tokens returned.

    Args:
        beam_size: hypotheses kept per sentence (1 gives exactly `Greedy`'s tokens).
        n_best: hypotheses returned per sentence, best first.
    """

    reorders = True  # a hypothesis continues any of the step before's: parents recorded

    def __init__(self, beam_size, n_best):
        self.copies = self.candidates = beam_size
        self.n_best = n_best

    def start(self, batch_size, state, memory):
        """Beams 1.. start finished with `log P = -inf`, so the first step expands beam 0
        alone, from the sentence's state; a slot no candidate can fill stays empty with
        score -inf."""
        first_beam = tf.range(self.copies) == 0
        log_probs = tf.tile(tf.where(first_beam, 0.0, -math.inf)[None], [batch_size, 1])
        finished = tf.tile(~first_beam[None], [batch_size, 1])
        return tf.range(batch_size) * self.copies, state, memory, finished, log_probs

    def choose(self, t):
        """None: each row's `beam_size` best tokens, among which the `beam_size` best
        continuations of its sentence are (`log P` and `lp` are the same along a row)."""
        return None

    def select(self, t, top_log_probs, top_ids, finished, lengths, log_probs, max_lengths,
               alpha):
        """The `beam_size` best candidates of each sentence (see `Greedy.select`)."""
        batch_size, beam_size = tf.shape(finished)[0], self.copies
        k = tf.shape(top_ids)[-1]  # beam_size, or V if smaller
        top_log_probs = tf.reshape(top_log_probs, [batch_size, beam_size, k])
        top_ids = tf.reshape(top_ids, [batch_size, beam_size, k])
        # A finished beam's only candidate is itself followed by padding, log P kept.
        frozen = tf.where(tf.range(k) == 0, 0.0, -math.inf)  # (k,)
        extension = tf.where(finished[:, :, None], frozen, top_log_probs)
        extension_ids = tf.where(finished[:, :, None], PAD, top_ids)
        candidate_log_probs = log_probs[:, :, None] + extension  # (batch, beam, k)
        candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (batch, beam)
        candidate_scores = candidate_log_probs / length_penalty(candidate_lengths, alpha)[
            :, :, None
        ]
        flat_size = beam_size * k
        _, best = tf.math.top_k(tf.reshape(candidate_scores, [batch_size, flat_size]), beam_size)

        def chosen(candidates):
            return tf.gather(tf.reshape(candidates, [batch_size, flat_size]), best, batch_dims=1)

        parents = best // k  # (batch, beam)
        token_ids = chosen(extension_ids)
        log_probs = chosen(candidate_log_probs)
        lengths = tf.gather(candidate_lengths, parents, batch_dims=1)
        finished = (
            tf.gather(finished, parents, batch_dims=1)
            | (token_ids == END)
            | (lengths >= max_lengths)
            | tf.math.is_inf(log_probs)
        )
        finished |= self._settled(finished, log_probs, lengths, max_lengths, alpha)
        # The chosen token's log p; 0 for a finished beam.
        return Selection(token_ids, chosen(extension), log_probs, lengths, finished, parents)

    def _settled(self, finished, log_probs, lengths, max_lengths, alpha):
        """(batch, 1): whether `n_best` finished hypotheses beat every unfinished one."""
        scores = log_probs / length_penalty(lengths, alpha)
        bounds = tf.where(finished, -math.inf, log_probs / length_penalty(max_lengths, alpha))
        best_bound = tf.reduce_max(bounds, axis=1, keepdims=True)
        unbeatable = finished & (scores >= best_bound)
        return tf.reduce_sum(tf.cast(unbeatable, tf.int32), axis=1, keepdims=True) >= self.n_best

    def next_rows(self, selection, decoding, state, memory):
        """The unfinished hypotheses go on from their parents' new state, which an
        unfinished parent has (the child of a finished one is finished)."""
        batch_size = tf.shape(selection.parents)[0]
        rows = batch_size * self.copies
        continuing = tf.cast(tf.reshape(tf.where(~tf.reshape(selection.finished, [-1])), [-1]),
                             tf.int32)  # rows, in order
        row_offsets = tf.range(batch_size)[:, None] * self.copies
        parent_rows = tf.gather(tf.reshape(selection.parents + row_offsets, [-1]), continuing)
        decoded_at = tf.scatter_nd(  # each decoded row's index in `decoding`
            decoding[:, None], tf.range(tf.size(decoding)), [rows]
        )
        return (continuing,
                *rows_of(tf.gather(decoded_at, parent_rows), (state, memory)))

    def follow(self, values, parents):
        """A step's `values` `(batch, beam, ...)`, moved to the hypotheses that continue
        them (zero where the parent had finished: its row was not decoded)."""
        return tf.gather(values, parents, batch_dims=1)

    def parent_steps(self):
        """The loop's record of each step's `parents` `(batch, beam)`."""
        return tf.TensorArray(tf.int32, size=0, dynamic_size=True,
                              element_shape=[None, self.copies])

    def result(self, lengths, log_probs, tokens, parents, token_log_probs, weights, alpha):
        """`Hypotheses` with `n = n_best`, best first, read back along the parents."""
        scores = log_probs / length_penalty(lengths, alpha)
        scores, order = tf.math.top_k(scores, self.n_best)  # (batch, n_best)
        token_ids, token_log_probs, weights = follow_back_pointers(
            order, tokens, parents, token_log_probs, weights)
        return Hypotheses(
            token_ids=token_ids,
            lengths=tf.gather(lengths, order, batch_dims=1),
            scores=scores,
            log_probs=tf.gather(log_probs, order, batch_dims=1),
            token_log_probs=token_log_probs,
            weights=weights,
        )


def follow_back_pointers(final_beams, tokens, parents, token_log_probs, weights):
    """Tokens, their log probabilities and weights of the hypotheses in `final_beams`,
    read from the last step back.

    Args:
        final_beams: int32 `(batch, n)`, beam slots after the last step.
        tokens: int32 `(T, batch, beam)`, the token each slot emitted at each step.
        parents: int32 `(T, batch, beam)`, the slot each slot came from at each step.
        token_log_probs: float32 `(T, batch, beam)`, the log p of each of those tokens.
        weights: float32 `(T, batch, beam, Ts)`, or None.

    Returns:
        token_ids `(batch, n, T)`, token_log_probs `(batch, n, T)` and weights
        `(batch, n, T, Ts)` (None if `weights` is).
    """

    def back(carry, step):
        slots = carry[0]
        step_tokens, step_parents, *step_values = step
        return (
            tf.gather(step_parents, slots, batch_dims=1),
            tf.gather(step_tokens, slots, batch_dims=1),
            *(tf.gather(array, slots, batch_dims=1) for array in step_values),
        )

    batch_size, n = tf.unstack(tf.shape(final_beams))
    steps = (tokens, parents, token_log_probs)
    initial = (final_beams, tf.zeros([batch_size, n], tf.int32),
               tf.zeros([batch_size, n], tf.float32))
    if weights is not None:
        steps += (weights,)
        initial += (tf.zeros([batch_size, n, tf.shape(weights)[-1]], tf.float32),)
    _, token_ids, token_log_probs, *hypothesis_weights = tf.scan(
        back, steps, initializer=initial, reverse=True)
    # token_ids, token_log_probs: T x batch x n ; weights: T x batch x n x Ts
    if weights is not None:
        weights = tf.transpose(hypothesis_weights[0], [1, 2, 0, 3])
    return (tf.transpose(token_ids, [1, 2, 0]), tf.transpose(token_log_probs, [1, 2, 0]),
            weights)


def check_sampling(search, sampling):
    """Refuse a `sampling` with a beam: sampling draws each translation on its own.

    Raises:
        ValueError: naming the beam size.
    """
    if sampling is not None and search.beam_size != 1:
        raise ValueError(
            f"sampling draws each translation on its own, without a beam. "
            f"Received: beam_size={search.beam_size}"
        )


def strategy_for(search, sampling=None, source_ids=None, seeds=None, temperature=None):
    """The strategy a request names: `Sampled` with a `sampling` (its `source_ids`,
    `seeds` and `temperature`), else `Greedy` for `search.beam_size` 1 and `Beam` for
    larger beams.

    Raises:
        ValueError: a `sampling` with a beam (sampling draws each translation on its own).
    """
    check_sampling(search, sampling)
    if sampling is not None:
        return Sampled(sampling, source_ids, seeds, temperature)
    if search.beam_size == 1:
        return Greedy()
    return Beam(search.beam_size, search.returned)
