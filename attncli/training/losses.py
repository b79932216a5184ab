"""The teacher-forced loss: masked, label-smoothed cross-entropy, and the batches it reads.

    loss = sum over non-pad target tokens of CE_smoothed(logits_t, y_t) / their number

Pad positions (id 0) are excluded from the loss and from the token count. The smoothed
target spreads its mass over the tokens search may emit, not over padding and
start-of-sentence (see `smoothed_cross_entropy`). With
`logits_on="tokens"` the output layer, the largest product of the model, is applied to
the non-pad positions only.
"""

import tensorflow as tf

from attncli.data.vocabulary import PAD, START

# The batches the steps read: `((source_ids, target_in_ids), target_out)`, int32.
BATCH_SIGNATURE = (
    (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32)),
    tf.TensorSpec((None, None), tf.int32),
)
# Guided alignment's batches: the labels are `(target_out, gold)`.
GUIDED_SIGNATURE = (
    BATCH_SIGNATURE[0],
    (BATCH_SIGNATURE[1], tf.TensorSpec((None, None, None), tf.float32)),
)


def smoothed_cross_entropy(logits, labels, label_smoothing=0.0):
    """Cross-entropy against the label-smoothed target `q`, per row.

        q_v = (1 - e) * [v = y] + e / (V - 2) * [v is neither PAD nor START]
        CE  = -sum_v q_v log softmax(z)_v
            = logsumexp(z) - (1 - e) * z_y - e / (V - 2) * sum_{v != PAD, START} z_v

    The uniform part covers the `V - 2` tokens search may emit: padding and
    start-of-sentence never are (`attncli.search.decoding` masks them), so smoothing gives
    them no mass and `q` sums to 1 over the emitted tokens. The softmax itself is over
    all `V` logits, so training pushes the two tokens' probabilities towards 0.

    Args:
        logits: float `(..., V)`.
        labels: int `(...)`, never PAD or START.
        label_smoothing: float `e` in `[0, 1)`.

    Returns:
        float `(...)`.
    """
    logits = tf.cast(logits, "float32")
    # The target as a dense one-hot row: on a bucketed batch's logits (518 x 5,000)
    # loss and gradient took 7.7 ms this way, 9.5 ms with a gather of z_y (whose
    # gradient scatters into zeros) and 16 ms with TensorFlow's fused
    # `sparse_softmax_cross_entropy_with_logits` (one loaded core).
    vocab_size = tf.shape(logits)[-1]
    if label_smoothing:
        token_ids = tf.range(vocab_size)
        emitted = tf.cast((token_ids != PAD) & (token_ids != START), "float32")
        spread = label_smoothing / tf.cast(vocab_size - 2, "float32")
        # q: (1 - e) on the label, e / (V - 2) on every emitted token
        target = tf.one_hot(labels, vocab_size, 1.0 - label_smoothing + spread, spread) * emitted
    else:
        target = tf.one_hot(labels, vocab_size)
    return tf.reduce_logsumexp(logits, axis=-1) - tf.reduce_sum(target * logits, axis=-1)


def longest_source_first(inputs, labels):
    """The batch's rows reordered by decreasing source length.

    The loss is a sum over rows, so their order does not change it; in this order
    the encoder's loop updates only the rows still running and skips the padding.
    `labels` is `target_out`, or a tuple of tensors with a row per pair (`target_out`
    and the gold attention of guided alignment).
    """
    source_ids, target_in_ids = inputs
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, 0), "int32"), axis=1)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    return (
        (tf.gather(source_ids, order), tf.gather(target_in_ids, order)),
        tf.nest.map_structure(lambda rows: tf.gather(rows, order), labels),
    )


def sequence_loss(model, inputs, target_out, label_smoothing=0.0, training=False,
                  logits_on="tokens", stepwise=False):
    """Mean smoothed cross-entropy over the non-pad target tokens.

    Args:
        model: a `Seq2Seq`.
        inputs: `(source_ids, target_in_ids)`.
        target_out: int `(batch_size, T)`, `target + [eos]`, 0 at padding.
        label_smoothing: float.
        training: bool.
        logits_on: `"tokens"` (output layer on non-pad positions only) or `"all"`.
        stepwise: bool, force the decoder's step-by-step path.

    Returns:
        `(loss, tokens)`: the mean loss (float32 scalar) and the number of non-pad
        target tokens (int32 scalar).
    """
    total, tokens = summed_sequence_loss(
        model, inputs, target_out, label_smoothing, training, logits_on, stepwise
    )
    return total / tf.cast(tf.maximum(tokens, 1), "float32"), tokens


def summed_sequence_loss(model, inputs, target_out, label_smoothing=0.0, training=False,
                         logits_on="tokens", stepwise=False):
    """`sequence_loss`'s sum over the non-pad target tokens, and their number.

    A batch split across replicas is divided by the global number of tokens, so each
    replica needs its sum, not its mean. A batch of no rows gives `(0.0, 0)`.
    """
    logits, labels, mask = target_logits(
        model, inputs, target_out, training, logits_on, stepwise
    )
    return summed_cross_entropy(logits, labels, mask, label_smoothing)


def summed_cross_entropy(logits, labels, mask, label_smoothing=0.0):
    """`(sum, tokens)`: the smoothed cross-entropy summed over the tokens `mask` keeps,
    and their number (of `target_logits`'s `(logits, labels, mask)`)."""
    losses = smoothed_cross_entropy(logits, labels, label_smoothing)
    return tf.reduce_sum(tf.where(mask, losses, 0.0)), tf.reduce_sum(tf.cast(mask, "int32"))


def target_logits(model, inputs, target_out, training=False, logits_on="tokens",
                  stepwise=False):
    """The output layer's logits for the target tokens, with their labels.

    Args:
        model, inputs, target_out, training, logits_on, stepwise: as `sequence_loss`.

    Returns:
        `(logits, labels, mask)`: float `(..., V)`, int `(...)` and bool `(...)`, the
        mask true at the non-pad tokens. With `logits_on="tokens"` the leading shape
        is `(tokens,)` (padding left out, the mask all true); with `"all"` it is
        `(batch_size, T)`.
    """
    inputs, target_out = longest_source_first(inputs, target_out)
    features, _ = model.features(inputs, training=training, stepwise=stepwise)
    return output_logits(model, features, target_out, logits_on)


def output_logits(model, features, target_out, logits_on="tokens"):
    """`target_logits` of the teacher-forced `features` `(batch_size, T, units)` of
    `target_out` (rows in the same order)."""
    mask = tf.not_equal(target_out, 0)
    if logits_on == "tokens":
        # token_features: tokens x units
        token_features = tf.boolean_mask(features, mask)
        labels = tf.boolean_mask(target_out, mask)
        return model.decoder.output_layer(token_features), labels, tf.ones_like(labels, "bool")
    return model.decoder.output_layer(features), target_out, mask
