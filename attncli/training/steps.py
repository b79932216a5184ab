"""The compiled training step: the loss's gradient, clipped and applied by the optimizer.

The step minimises the teacher-forced loss of `attncli.training.losses`, or with
`training.guided_alignment` that of `attncli.training.guided`, which adds the
alignment loss. With `training.accumulate_steps` the gradients of several batches are
added up (`GradientSums`) and applied as one update. The step split across
`tf.distribute` replicas is `attncli.training.distributed_step`'s; the evaluation step
`attncli.training.eval_step`'s.
"""

import tensorflow as tf

from attncli.config.training import TrainingConfig
from attncli.training.guided import guided_objective
from attncli.training.losses import BATCH_SIGNATURE, GUIDED_SIGNATURE, sequence_loss


def translation_objective(model, config, inputs, target_out):
    """What the training step minimises without guided alignment, and reports:
    `(loss, {"loss": loss, "tokens": tokens})`, the mean (smoothed) cross-entropy
    per target token of the batch and the number of its target tokens."""
    loss, tokens = sequence_loss(
        model, inputs, target_out, config.label_smoothing, training=True,
        logits_on=config.logits_on,
    )
    return loss, {"loss": loss, "tokens": tokens}


def _objective(config):
    """`translation_objective`, or with `config.guided_alignment` guided alignment's, and
    the signature of their batches."""
    if config.guided_alignment is None:
        return translation_objective, BATCH_SIGNATURE
    return guided_objective, GUIDED_SIGNATURE


class GradientSums(tf.Module):
    """The gradients of `training.accumulate_steps` batches, added up until they are applied.

        sums_v  = sum over the batches b of tokens_b * dL_b/dv
                  (L_b the batch's mean loss, times the loss scale under mixed_float16)
        tokens  = sum over the batches of tokens_b
        update  = sums_v / tokens, applied by the optimizer (which clips it as a whole
                  and divides out the loss scale), then every sum is zeroed

    `sums_v / tokens` is the gradient of the mean loss over all the batches' target
    tokens: that of one batch holding them all. The variables belong to the run's
    checkpoints, so a run interrupted between two updates resumes with what it had
    added up.

    Args:
        variables: the trainable variables (float32, whatever the precision).
        steps: int >= 2, the batches of one update.
    """

    def __init__(self, variables, steps):
        super().__init__(name="gradient_sums")
        self.steps = steps
        # One float32 sum per weight, the shape of the weight: a dense copy, also for
        # the embeddings, whose gradients arrive as row slices.
        self.sums = [
            tf.Variable(tf.zeros(v.shape, "float32"), trainable=False,
                        name=v.path.replace("/", "_") + "_sum")
            for v in variables
        ]
        self.tokens = tf.Variable(0.0, trainable=False, name="tokens")
        self.batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="batches")

    def add(self, gradients, tokens):
        """Add one batch's gradients (of its mean loss) weighted by its `tokens`."""
        weight = tf.cast(tokens, "float32")
        for total, gradient in zip(self.sums, gradients):
            if isinstance(gradient, tf.IndexedSlices):
                total.scatter_add(tf.IndexedSlices(gradient.values * weight, gradient.indices))
            else:
                total.assign_add(gradient * weight)
        self.tokens.assign_add(weight)
        self.batches.assign_add(1)

    def mean(self):
        """The gradient of the mean loss over every token added: `sums / tokens`."""
        count = tf.maximum(self.tokens, 1.0)
        return [total / count for total in self.sums]

    def reset(self):
        for total in self.sums:
            total.assign(tf.zeros_like(total))
        self.tokens.assign(0.0)
        self.batches.assign(0)


def trained_variables(model, config):
    """The variables the training step updates, which the optimizer is built with: the
    model's, or with `guided_alignment.freeze_translation` its alignment layer's alone
    (`attncli.training.guided`)."""
    guided = config.guided_alignment
    if guided is not None and guided.freeze_translation:
        return model.alignment_layer.trainable_variables
    return model.trainable_variables


def make_train_step(model, optimizer, config=None, sums=None):
    """A compiled training step for `model`.

    Args:
        model: a `Seq2Seq` (built at construction).
        optimizer: e.g. `attncli.training.optimizer_setup.make_optimizer(config)`.
        config: a `TrainingConfig`; its `label_smoothing` and `logits_on` are
            used. Defaults to `TrainingConfig()`.
        sums: a `GradientSums` of the model's trainable variables, or None. With
            it, every call adds its batch's gradient, and every `sums.steps`-th
            call applies their mean (one update); without, every call updates.
            Defaults to None.

    Returns:
        `train_step(inputs, target_out) -> {"loss", "tokens"}` over int32 batches
        `((source_ids, target_in_ids), target_out_ids)` of any shape: a
        `tf.function` (traced once), or with `sums` a function calling two. With
        `config.guided_alignment` the batches are `((source_ids, target_in_ids),
        (target_out_ids, gold))` and the result also holds `"alignment_loss"` and
        `"links"` (`attncli.training.guided.guided_objective`); `"loss"` stays the
        translation loss.
    """
    config = config or TrainingConfig()
    variables = trained_variables(model, config)
    optimizer.build(variables)
    if sums is not None:
        return _accumulating_step(model, optimizer, config, sums)

    @tf.function(input_signature=_objective(config)[1])
    def train_step(inputs, target_out):
        report, gradients = _loss_and_gradients(
            model, optimizer, config, variables, inputs, target_out
        )
        optimizer.apply_gradients(zip(gradients, variables))
        return report

    return train_step


def _accumulating_step(model, optimizer, config, sums):
    """`make_train_step` with `GradientSums`: one update every `sums.steps` batches."""
    variables = trained_variables(model, config)

    @tf.function(input_signature=_objective(config)[1])
    def add_batch(inputs, target_out):
        # Zeros, not None, for a variable the batch does not reach: every sum is added to.
        report, gradients = _loss_and_gradients(
            model, optimizer, config, variables, inputs, target_out,
            unconnected=tf.UnconnectedGradients.ZERO,
        )
        sums.add(gradients, report["tokens"])
        return report

    @tf.function
    def update():
        optimizer.apply_gradients(zip(sums.mean(), variables))
        sums.reset()

    def train_step(inputs, target_out):
        result = add_batch(inputs, target_out)
        if int(sums.batches.numpy()) >= sums.steps:
            update()
        return result

    return train_step


def _loss_and_gradients(model, optimizer, config, variables, inputs, target_out,
                        unconnected=tf.UnconnectedGradients.NONE):
    """`(report, gradients)` of one batch: what its objective reports (`"loss"`, its
    mean translation loss per target token, `"tokens"`, ...: see `_objective`), and
    the gradients of the objective (times the loss scale under mixed_float16) with
    respect to `variables`, `unconnected` for those it does not reach (None by
    default)."""
    objective = _objective(config)[0]
    with tf.GradientTape() as tape:
        loss, report = objective(model, config, inputs, target_out)
        # The loss itself, or times the loss scale under mixed_float16.
        scaled_loss = optimizer.scale_loss(loss)
    gradients = tape.gradient(scaled_loss, variables, unconnected_gradients=unconnected)
    return report, gradients
