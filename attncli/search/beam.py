"""Beam search as a strategy of the one decoding loop (`attncli.search.strategy`)."""

import math

import tensorflow as tf

from attncli.data.vocabulary import END, PAD
from attncli.search.search_steps import Hypotheses, length_penalty
from attncli.search.strategy import Hypothesized, Selection, rows_of


class Beam:
    """The `beam_size` best hypotheses of each sentence (beam search, Sutskever et al.
    2014), ranked by `score = log P / lp`.

    Every step extends each unfinished hypothesis `Y` by every token `y`, a candidate
    scored `(log P(Y) + log p(y | Y, X)) / lp(|Y| + 1)`, and keeps the `beam_size` best
    of all candidates. A hypothesis that emitted end-of-sentence (or reached its maximum
    length) is finished: it stays in the beam as one candidate with its score unchanged
    and is never extended, so it is only displaced by better ones.

    A sentence is settled, and all its hypotheses finished, as soon as `n_best` of its
    finished hypotheses score at least `log P / lp(max_length)` of every unfinished one:
    for `alpha >= 0` that bounds the score of any continuation (`log P` only falls, `lp`
    only grows), so no later step could change its n best. Tokens, parents and attention
    weights are recorded per step and followed back from the final beams, so the weights
    returned belong to the tokens returned.

    Args:
        search: a `SearchConfig`: its `beam_size` (1 gives exactly `Greedy`'s tokens)
            and `n_best` (`returned`).
    """

    def __init__(self, search):
        self.copies = self.candidates = search.beam_size
        self.n_best = search.returned

    def start(self, source_ids, state, memory, max_lengths, alpha):
        """Beams 1.. start finished with `log P = -inf`, so the first step expands beam 0
        alone, from the sentence's state; a slot no candidate can fill stays empty with
        score -inf."""
        self.batch_size = tf.shape(source_ids)[0]
        self.alpha, self.max_lengths = alpha, max_lengths[:, None]  # (batch, 1)
        # The best score any continuation of a hypothesis can reach, per sentence.
        self.lp_at_max_length = length_penalty(self.max_lengths, alpha)
        self.row_offsets = tf.range(self.batch_size)[:, None] * self.copies  # (batch, 1)
        first_beam = tf.range(self.copies) == 0
        log_probs = tf.tile(tf.where(first_beam, 0.0, -math.inf), [self.batch_size])
        finished = tf.tile(~first_beam, [self.batch_size])
        return tf.reshape(self.row_offsets, [-1]), state, memory, Hypothesized(
            finished, tf.zeros_like(finished, tf.int32), log_probs)

    def choose(self, t):
        """None: each row's `beam_size` best tokens, among which the `beam_size` best
        continuations of its sentence are (`log P` and `lp` are the same along a row)."""
        return None

    def select(self, t, top_log_probs, top_ids, hypotheses):
        """The `beam_size` best candidates of each sentence."""
        batch_size, beam_size = self.batch_size, self.copies
        finished, lengths, log_probs = (tf.reshape(values, [batch_size, beam_size])
                                        for values in hypotheses)
        k = tf.shape(top_ids)[-1]  # beam_size, or V if smaller
        top_log_probs = tf.reshape(top_log_probs, [batch_size, beam_size, k])
        top_ids = tf.reshape(top_ids, [batch_size, beam_size, k])
        # A finished beam's only candidate is itself followed by padding, log P kept.
        frozen = tf.where(tf.range(k) == 0, 0.0, -math.inf)  # (k,)
        extension = tf.where(finished[:, :, None], frozen, top_log_probs)
        extension_ids = tf.where(finished[:, :, None], PAD, top_ids)
        candidate_log_probs = log_probs[:, :, None] + extension  # (batch, beam, k)
        candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (batch, beam)
        candidate_scores = candidate_log_probs / length_penalty(
            candidate_lengths, self.alpha)[:, :, None]
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
            | (lengths >= self.max_lengths)
            | tf.math.is_inf(log_probs)
        )
        finished |= self._settled(finished, log_probs, lengths)

        def rows(values):
            return tf.reshape(values, [-1])

        # The chosen token's log p is 0 for a finished beam.
        return Selection(rows(token_ids), rows(chosen(extension)),
                         Hypothesized(rows(finished), rows(lengths), rows(log_probs)), parents)

    def _settled(self, finished, log_probs, lengths):
        """(batch, 1): whether `n_best` finished hypotheses beat every unfinished one."""
        scores = log_probs / length_penalty(lengths, self.alpha)
        bounds = tf.where(finished, -math.inf, log_probs / self.lp_at_max_length)
        best_bound = tf.reduce_max(bounds, axis=1, keepdims=True)
        unbeatable = finished & (scores >= best_bound)
        return tf.reduce_sum(tf.cast(unbeatable, tf.int32), axis=1, keepdims=True) >= self.n_best

    def next_rows(self, selection, decoding, state, memory):
        """The unfinished hypotheses go on from their parents' new state, which an
        unfinished parent has (the child of a finished one is finished)."""
        continuing = tf.cast(tf.reshape(tf.where(~selection.hypotheses.finished), [-1]),
                             tf.int32)  # rows, in order
        parent_rows = tf.gather(tf.reshape(selection.parents + self.row_offsets, [-1]),
                                continuing)
        decoded_at = tf.scatter_nd(  # each decoded row's index in `decoding`
            decoding[:, None], tf.range(tf.size(decoding)), [self.batch_size * self.copies]
        )
        return (continuing,
                *rows_of(tf.gather(decoded_at, parent_rows), (state, memory)))

    def follow(self, values, selection):
        """The parents' values (zero where the parent had finished: its row was not
        decoded)."""
        per_sentence = tf.reshape(values, tf.concat(
            [[self.batch_size, self.copies], tf.shape(values)[1:]], 0))
        followed = tf.gather(per_sentence, selection.parents, batch_dims=1)
        return tf.reshape(followed, tf.shape(values))

    def parent_record(self):
        return tf.TensorArray(tf.int32, size=0, dynamic_size=True,
                              element_shape=[None, self.copies])

    def record_parents(self, record, t, selection):
        return record.write(t, selection.parents)

    def result(self, hypotheses, tokens, parents, token_log_probs, weights):
        """`Hypotheses` with `n = n_best`, best first, read back along the parents."""
        _, lengths, log_probs = (tf.reshape(values, [self.batch_size, self.copies])
                                 for values in hypotheses)

        def per_sentence(steps):  # (T, rows, ...) -> (T, batch, beam, ...)
            return tf.reshape(steps, tf.concat(
                [[tf.shape(steps)[0], self.batch_size, self.copies], tf.shape(steps)[2:]], 0))

        scores = log_probs / length_penalty(lengths, self.alpha)
        scores, order = tf.math.top_k(scores, self.n_best)  # (batch, n_best)
        token_ids, token_log_probs, weights = follow_back_pointers(
            order, per_sentence(tokens), parents.stack(), per_sentence(token_log_probs),
            None if weights is None else per_sentence(weights))
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
