"""Drawing the next token at random, reproducibly: the random numbers of a sampled search.

`sample_next_tokens` draws one token per row from the distribution a `Sampling` defines
(`attncli.config.search.Sampling`: temperature, then the top-k or nucleus cut, then
renormalised) by inverting its cumulative distribution at a uniform number `u`:

    y = the first token (in the order of the kept tokens) whose cumulative q exceeds u

`u` is not drawn from a random generator whose state advances: it is a hash of the seed,
the sentence (its source ids), the sample's index and the step,

    u = splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ h(source)) ^ sample) ^ step) / 2**64

(splitmix64 is the finaliser of Steele et al. 2014's SplitMix generator). So a sentence
draws the same tokens whatever else is in its batch, in whatever order, and in
`attncli translate`, the export and the server alike, for the same seed; two equal
sentences draw the same samples, and two samples of one sentence differ in `sample`.
"""

import math

import tensorflow as tf

from attncli.data.vocabulary import PAD, START

_GOLDEN = 0x9E3779B97F4A7C15
_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB


def _shift(x, bits):
    return tf.bitwise.right_shift(x, tf.constant(bits, tf.uint64))


def splitmix64(x):
    """SplitMix64's output function of uint64 `x` (any shape): 64 well-mixed bits."""
    z = x + tf.constant(_GOLDEN, tf.uint64)
    z = tf.bitwise.bitwise_xor(z, _shift(z, 30)) * tf.constant(_MIX_1, tf.uint64)
    z = tf.bitwise.bitwise_xor(z, _shift(z, 27)) * tf.constant(_MIX_2, tf.uint64)
    return tf.bitwise.bitwise_xor(z, _shift(z, 31))


def _combine(key, value):
    """`splitmix64(key ^ value)` of uint64 `key` and an integer `value` (cast to uint64)."""
    return splitmix64(tf.bitwise.bitwise_xor(key, tf.cast(value, tf.uint64)))


def sentence_keys(source_ids, seeds):
    """uint64 `(batch,)`: `splitmix64(splitmix64(seed) ^ h(source))` of each row.

    `h(source)` sums `splitmix64(splitmix64(position) ^ id)` over the row's non-padding
    ids (modulo 2**64), so it is the same however wide the batch pads the row.

    Args:
        source_ids: int32 `(batch, Ts)`, padded with 0.
        seeds: int64 `(batch,)`, each row's seed (>= 0).
    """
    positions = tf.range(tf.shape(source_ids)[1], dtype=tf.int32)[None, :]
    terms = _combine(splitmix64(tf.cast(positions, tf.uint64)), source_ids)
    terms = tf.where(source_ids != PAD, terms, tf.zeros_like(terms))
    source_hash = tf.reduce_sum(terms, axis=1)
    return _combine(splitmix64(tf.cast(seeds, tf.uint64)), source_hash)


def sample_keys(sentence_keys_, samples):
    """uint64 `(batch * samples,)`: row `b * samples + i` is sample `i` of sentence `b`."""
    keys = tf.repeat(sentence_keys_, samples)
    index = tf.tile(tf.range(samples, dtype=tf.int32), tf.shape(sentence_keys_)[:1])
    return _combine(keys, index)


def uniforms(keys, t):
    """float64 in [0, 1) per row: the top 53 bits of `splitmix64(key ^ t)` over 2**53."""
    bits = _shift(_combine(keys, t), 11)
    return tf.cast(bits, tf.float64) * (2.0**-53)


def sample_next_tokens(logits, sampling, u, temperature=None):
    """One token per row drawn from `sampling`'s distribution of `logits`, at `u`.

    Args:
        logits: `(rows, V)`.
        sampling: a `Sampling`.
        u: float64 `(rows,)` in [0, 1).
        temperature: a float64 scalar tensor in place of `sampling.temperature`, or
            None. Defaults to None.

    Returns:
        log_probs: float32 `(rows, 1)`, `log p(y)` of the token drawn under the model
            itself (no temperature, no cut), as a search scores it; and ids: int32
            `(rows, 1)`.
    """
    logits = tf.cast(logits, tf.float32)
    vocabulary_size = tf.shape(logits)[-1]
    token_ids = tf.range(vocabulary_size)
    emittable = tf.where((token_ids == PAD) | (token_ids == START), -math.inf, logits)
    model_log_probs = tf.nn.log_softmax(emittable, axis=-1)
    if temperature is None:
        temperature = sampling.temperature
    tempered = tf.cast(emittable, tf.float64) / temperature
    if sampling.method == "random":
        candidates = tempered  # (rows, V) in id order
        candidate_ids = tf.broadcast_to(token_ids, tf.shape(logits))
    else:
        k = vocabulary_size if sampling.method == "topp" else tf.minimum(
            sampling.top_k, vocabulary_size
        )
        candidates, candidate_ids = tf.math.top_k(tempered, k)  # most probable first
    probs = tf.nn.softmax(candidates, axis=-1)  # (rows, K) float64
    if sampling.method == "topp":
        # Keep a token while the mass of those before it is below top_p: the fewest
        # most probable tokens that reach it.
        before = tf.math.cumsum(probs, axis=-1, exclusive=True)
        probs = tf.where(before < sampling.top_p, probs, 0.0)
    cumulative = tf.math.cumsum(probs, axis=-1)
    total = cumulative[:, -1:]
    # u * total < total: the first position past it exists and has q > 0.
    position = tf.searchsorted(cumulative, u[:, None] * total, side="right")
    position = tf.minimum(position, tf.shape(candidates)[-1] - 1)
    ids = tf.gather(candidate_ids, position, batch_dims=1)  # (rows, 1)
    return tf.gather(model_log_probs, ids, batch_dims=1), ids
