"""The compiled evaluation step: the validation loss, smoothed and plain, without updating
anything."""

import tensorflow as tf

from attncli.config.training import TrainingConfig
from attncli.training.losses import BATCH_SIGNATURE, smoothed_cross_entropy, target_logits


def make_eval_step(model, config=None):
    """A compiled step returning `{"loss", "nll", "tokens"}` without updating anything.

    Both are means over the non-pad target tokens: `loss` is the training objective,
    the label-smoothed cross-entropy (`smoothed_cross_entropy` with the config's `e`);
    `nll` the plain cross-entropy `-log p(y) = logsumexp(z) - z_y`, equal to `loss`
    without smoothing, and comparable between runs whatever their smoothing.
    """
    config = config or TrainingConfig()

    @tf.function(input_signature=BATCH_SIGNATURE)
    def eval_step(inputs, target_out):
        logits, labels, mask = target_logits(
            model, inputs, target_out, training=False, logits_on=config.logits_on
        )
        return evaluation_losses(logits, labels, mask, config.label_smoothing)

    return eval_step


def evaluation_losses(logits, labels, mask, label_smoothing=0.0):
    """`{"loss", "nll", "tokens"}` of `target_logits`'s `(logits, labels, mask)`: the
    means over the tokens `mask` keeps of the smoothed and the plain cross-entropy, and
    their number (see `make_eval_step`)."""
    tokens = tf.reduce_sum(tf.cast(mask, "int32"))
    count = tf.cast(tf.maximum(tokens, 1), "float32")

    def mean(losses):
        return tf.reduce_sum(tf.where(mask, losses, 0.0)) / count

    nll = mean(smoothed_cross_entropy(logits, labels))
    loss = nll
    if label_smoothing:
        loss = mean(smoothed_cross_entropy(logits, labels, label_smoothing))
    return {"loss": loss, "nll": nll, "tokens": tokens}
