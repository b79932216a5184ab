"""Strategies whose rows are their own (`attncli.search.strategy`): `Greedy`, the most
probable token at every step, and `Sampled`, each token drawn at random."""

import tensorflow as tf

from attncli.data.vocabulary import END, PAD
from attncli.search.sampling import sample_keys, sample_next_tokens, sentence_keys, uniforms
from attncli.search.search_steps import Hypotheses, length_penalty
from attncli.search.strategy import Hypothesized, Selection, rows_of


class Greedy:
    """Each row emits its most probable token, `y_t = argmax_y log p(y | y_<t, X)`,
    until end-of-sentence or its maximum length.

    Args:
        copies: rows per sentence (1; `Sampled` draws several).
    """

    candidates = 1

    def __init__(self, copies=1):
        self.copies = copies

    def start(self, source_ids, state, memory, max_lengths, alpha):
        """Every row decodes, from its sentence's state and memory."""
        rows = tf.shape(source_ids)[0] * self.copies
        self.max_lengths = tf.repeat(max_lengths, self.copies)  # (rows,)
        self.alpha = alpha
        every_row = tf.range(rows)
        if self.copies > 1:
            state, memory = rows_of(every_row // self.copies, (state, memory))
        return every_row, state, memory, Hypothesized(
            tf.zeros([rows], tf.bool), tf.zeros([rows], tf.int32), tf.zeros([rows], tf.float32))

    def choose(self, t):
        return None

    def select(self, t, top_log_probs, top_ids, hypotheses):
        """Each unfinished row's first candidate; a finished row emits padding, `log p` 0."""
        finished, lengths, log_probs = hypotheses
        alive = ~finished
        token_ids = tf.where(alive, top_ids[:, 0], PAD)
        step_log_probs = tf.where(alive, top_log_probs[:, 0], 0.0)
        lengths += tf.cast(alive, tf.int32)
        finished = finished | (token_ids == END) | (lengths >= self.max_lengths)
        return Selection(token_ids, step_log_probs,
                         Hypothesized(finished, lengths, log_probs + step_log_probs), None)

    def next_rows(self, selection, decoding, state, memory):
        """The rows still translating go on from their own state: finished rows are
        dropped (nothing is gathered while every row goes on)."""
        still = tf.gather(~selection.hypotheses.finished, decoding)
        return tf.cond(
            tf.reduce_all(still),
            lambda: (decoding, state, memory),
            lambda: rows_of(tf.reshape(tf.where(still), [-1]), (decoding, state, memory)),
        )

    def follow(self, values, selection):
        return values  # each row's own

    def parent_record(self):
        return ()  # the rows are their own

    def record_parents(self, record, t, selection):
        return record

    def result(self, hypotheses, tokens, parents, token_log_probs, weights):
        """`Hypotheses` with `n = copies`, in row order."""
        _, lengths, log_probs = hypotheses

        def per_sentence(steps, *trailing):  # (T, rows, ...) -> (batch, copies, T, ...)
            rows_first = tf.transpose(steps, [1, 0, *range(2, 2 + len(trailing))])
            return tf.reshape(rows_first, [-1, self.copies, tf.shape(steps)[0], *trailing])

        def sentences(values):  # (rows,) -> (batch, copies)
            return tf.reshape(values, [-1, self.copies])

        return Hypotheses(
            token_ids=per_sentence(tokens),
            lengths=sentences(lengths),
            scores=sentences(log_probs / length_penalty(lengths, self.alpha)),
            log_probs=sentences(log_probs),
            token_log_probs=per_sentence(token_log_probs),
            weights=None if weights is None else per_sentence(weights, tf.shape(weights)[2]),
        )


class Sampled(Greedy):
    """Each token drawn at random (`attncli.search.sampling`): `sampling.samples`
    hypotheses per sentence, each drawn on its own, returned best score first.

    The random numbers are a hash of the seed, the sentence, the sample and the step, so
    a sentence draws the same tokens alone or in any batch. Scores are those of a search:
    `log P(Y | X)` under the model itself (no temperature, no cut) over `lp(Y)`.

    Args:
        sampling: a `Sampling`.
        seeds: int64 `(batch_size,)`, each sentence's seed (>= 0).
        temperature: a float64 scalar tensor in place of `sampling.temperature`, or None.
    """

    def __init__(self, sampling, seeds, temperature=None):
        super().__init__(sampling.samples)
        self.sampling, self.seeds, self.temperature = sampling, seeds, temperature

    def start(self, source_ids, state, memory, max_lengths, alpha):
        """`Greedy.start`, and each row's random key from its sentence's tokens and seed."""
        self.keys = sample_keys(
            sentence_keys(source_ids, tf.convert_to_tensor(self.seeds, tf.int64)), self.copies)
        return super().start(source_ids, state, memory, max_lengths, alpha)

    def choose(self, t):
        """Draw each row's token from its logits with the row's own random number."""
        def draw(logits, rows):
            u = uniforms(tf.gather(self.keys, rows), t)
            return sample_next_tokens(logits, self.sampling, u, self.temperature)

        return draw

    def result(self, hypotheses, tokens, parents, token_log_probs, weights):
        """The samples of each sentence, best score first."""
        found = super().result(hypotheses, tokens, parents, token_log_probs, weights)
        scores, order = tf.math.top_k(found.scores, self.copies)
        return Hypotheses(*(None if field is None else tf.gather(field, order, batch_dims=1)
                            for field in found._replace(scores=scores)))._replace(scores=scores)
