"""What greedy and beam search share: hypotheses, length penalty, the next tokens.

`Hypotheses` is what a search returns; `length_penalty` is Wu et al. 2016's
`((5 + |Y|) / 6) ** alpha`; `next_token_log_probs` normalises a step's logits over the
tokens that can be emitted (padding and start-of-sentence masked); `decode_rows`
runs one decoder step for the rows still translating, forcing a prefix's token where
one is due (`forced_tokens`).
"""

import math
from typing import NamedTuple

import tensorflow as tf

from attncli.data.vocabulary import PAD, START


class Hypotheses(NamedTuple):
    """The n best hypotheses of each sentence, best first.

    Attributes:
        token_ids: int32 `(batch_size, n, T)`: the emitted tokens, end-of-sentence
            included when it was emitted, then padding (0). `T` is the number of decoding
            steps the batch took.
        lengths: int32 `(batch_size, n)`: the number of emitted tokens, end-of-sentence
            included. A hypothesis without end-of-sentence stopped at its maximum length.
        scores: float32 `(batch_size, n)`: `log P(Y | X) / lp(Y)`, sorted in decreasing
            order. `-inf` marks an empty slot (a beam larger than the hypotheses that
            exist).
        log_probs: float32 `(batch_size, n)`: `log P(Y | X)`.
        token_log_probs: float32 `(batch_size, n, T)`: `log p(y_t | y_<t, X)` of each
            emitted token, the terms the search summed into `log_probs`; 0 after the
            hypothesis ended.
        weights: float32 `(batch_size, n, T, Ts)`: the attention weights over the source
            when each token was emitted; zero after the hypothesis ended. None when the
            search was asked not to collect them (`attention_weights=False`).
    """

    token_ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor
    token_log_probs: tf.Tensor
    weights: tf.Tensor


def length_penalty(lengths, alpha):
    """`lp(Y) = ((5 + |Y|) / 6) ** alpha` (Wu et al. 2016, eq. 14), float32."""
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, alpha)


def max_target_lengths(source_ids, max_length_ratio, max_length_offset):
    """`ceil(max_length_ratio * source_length) + max_length_offset` per sentence, int32.

    `source_length` counts the non-padding ids of each row of `source_ids`.
    """
    source_lengths = tf.reduce_sum(tf.cast(source_ids != PAD, tf.float32), axis=1)
    scaled = tf.math.ceil(max_length_ratio * source_lengths)
    return tf.cast(scaled, tf.int32) + max_length_offset


def _emittable(logits):
    """`logits` in float32 with padding and start-of-sentence set to -inf."""
    logits = tf.cast(logits, tf.float32)
    token_ids = tf.range(tf.shape(logits)[-1])
    never_emitted = (token_ids == PAD) | (token_ids == START)
    return tf.where(never_emitted, tf.constant(-math.inf), logits)


def next_token_log_probs(logits):
    """Log-softmax of `logits` `(..., V)` in float32, padding and start-of-sentence excluded."""
    return tf.nn.log_softmax(_emittable(logits), axis=-1)


def top_next_tokens(logits, k, forced=None):
    """The `k` most probable next tokens of each row, best first (ties: lower id first),
    or a forced token (see `force`).

    `log p(y) = logit(y) - logsumexp(logits)` over the tokens that can be emitted, so
    only the `k` chosen entries are normalised; the full `(rows, V)` log-softmax is
    never formed. The logsumexp is shifted by each row's largest logit, the first of
    the `k` (as `tf.reduce_logsumexp` computes it, without finding it again).

    Args:
        logits: `(rows, V)`.
        k: int or int32 scalar tensor, at most `V`.
        forced: int32 `(rows,)`, a token each row must emit (0: none), or None.
            Defaults to None.

    Returns:
        log_probs: float32 `(rows, k)`, and ids: int32 `(rows, k)`.
    """
    logits = _emittable(logits)
    values, ids = tf.math.top_k(logits, k)
    largest = values[:, :1]
    normaliser = tf.math.log(
        tf.reduce_sum(tf.exp(logits - largest), axis=-1, keepdims=True)) + largest
    log_probs = values - normaliser
    if forced is not None:
        log_probs, ids = force(logits, normaliser, log_probs, ids, forced)
    return log_probs, ids


def same_structure(template, tensors):
    """`tensors` packed like `template` (a decoder may return a list for a tuple)."""
    return tf.nest.pack_sequence_as(template, tf.nest.flatten(tensors))


def forced_tokens(prefix_ids, t):
    """The token each row must emit at step `t`: `prefix_ids[:, t]`, or 0 (none) past it.

    Args:
        prefix_ids: int32 `(rows, P)`, each row's forced tokens padded with 0; `P` may be 0.
        t: int32 scalar, the step.

    Returns:
        int32 `(rows,)`.
    """
    width = tf.shape(prefix_ids)[1]
    padded = tf.pad(prefix_ids, [[0, 0], [0, 1]])  # a column of zeros past the prefixes
    return tf.gather(padded, tf.minimum(t, width), axis=1)


def force(logits, normaliser, log_probs, ids, forced):
    """`(log_probs, ids)` of `k` candidates per row, with the rows that have a forced
    token given that token alone: its `log p` first, then `k - 1` candidates at -inf.

    `log p(forced)` is the model's, normalised over the tokens that can be emitted, so a
    forced prefix is scored as teacher forcing scores it.

    Args:
        logits: float32 `(rows, V)`, those that can be emitted (`_emittable`);
        normaliser: float32 `(rows, 1)`, their logsumexp; log_probs: float32
        `(rows, k)`; ids: int32 `(rows, k)`; forced: int32 `(rows,)`, 0 where
        nothing is forced.
    """
    forced_log_probs = tf.gather(logits, forced, batch_dims=1) - normaliser[:, 0]
    is_forced = (forced != PAD)[:, None]
    first = tf.range(tf.shape(ids)[1]) == 0  # (k,)
    log_probs = tf.where(
        is_forced, tf.where(first, forced_log_probs[:, None], -math.inf), log_probs
    )
    ids = tf.where(is_forced & first, forced[:, None], ids)
    return log_probs, ids


def decode_rows(model, token_ids, state, memory, rows, k, forced=None, choose=None):
    """One decoder step for the rows still translating, and their `k` best tokens.

    A finished hypothesis is frozen, so its logits would never be read: the search
    keeps the state and memory of the rows still decoding only (`rows`), and the
    decoder runs on them alone. Late in a search most rows have finished, and this is
    what makes a batch cost about as much as the tokens it emits.

    Args:
        model: an encoder-decoder with `decode_step` (see `attncli.search.decoding`).
        token_ids: int32 `(batch_rows,)`, every row's previous token.
        state: the decoder state of `rows`, a tuple of `(alive, ...)` tensors.
        memory: the dict from `encode`, `(alive, ...)` tensors of `rows`.
        rows: int32 `(alive,)`, the rows decoded, in order.
        k: int, how many tokens to return per row (`min(k, V)` are).
        forced: int32 `(batch_rows,)`, a token each row must emit (0: none; see
            `force`), or None. Defaults to None.
        choose: None for the `k` best tokens (`top_next_tokens`), or a function
            `choose(logits, rows)` giving `(log_probs, ids)` `(alive, k)` for the
            logits `(alive, V)` of `rows`. Defaults to None.

    Returns:
        log_probs: float32 `(batch_rows, k)` and ids: int32 `(batch_rows, k)`, the
            chosen tokens (a forced token first, the others at -inf); 0 on the rows
            not decoded.
        state: the new state of `rows`.
        weights: float32 `(batch_rows, Ts)`, the step's attention weights; 0 on the
            rows not decoded.
    """
    logits, new_state, weights = model.decode_step(
        tf.gather(token_ids, rows), state, memory, training=False
    )
    forced = None if forced is None else tf.gather(forced, rows)
    if choose is None:
        log_probs, ids = top_next_tokens(logits, tf.minimum(k, tf.shape(logits)[-1]), forced)
    else:
        log_probs, ids = choose(logits, rows)
        if forced is not None:
            logits = _emittable(logits)
            normaliser = tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
            log_probs, ids = force(logits, normaliser, log_probs, ids, forced)
    batch_rows = tf.shape(token_ids)[:1]

    def scatter(values):
        return tf.scatter_nd(rows[:, None], values,
                             tf.concat([batch_rows, tf.shape(values)[1:]], axis=0))

    return (scatter(log_probs), scatter(ids), same_structure(state, new_state),
            scatter(tf.cast(weights, tf.float32)))


def weight_steps(element_shape, attention_weights):
    """The loop variable that collects each step's weights: a TensorArray, or `()` (none)."""
    if not attention_weights:
        return ()
    return tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=element_shape)
