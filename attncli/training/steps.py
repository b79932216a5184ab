"""The teacher-forced training step: masked, label-smoothed cross-entropy, Adam, clipping.

    loss = sum over non-pad target tokens of CE_smoothed(logits_t, y_t) / their number

Pad positions (id 0) are excluded from the loss and from the token count. The smoothed
target spreads its mass over the tokens search may emit, not over padding and
start-of-sentence (see `smoothed_cross_entropy`). With
`logits_on="tokens"` the output layer, the largest product of the model, is applied to
the non-pad positions only. With `training.guided_alignment` the step minimises the
loss of `attncli.training.guided` instead, which adds the alignment loss.
"""

import keras
import tensorflow as tf

from attncli.config.training import TrainingConfig
from attncli.data.vocabulary import PAD, START
from attncli.training.optimizers import AveragingAdam, FusedAdam


@keras.saving.register_keras_serializable(package="attncli")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then constant, inverse square root or exponential decay.

        warmup (step < warmup_steps): lr = peak * (step + 1) / warmup_steps
        constant:           lr = peak
        inverse_sqrt:       lr = peak * sqrt(warmup_steps / (step + 1))
        exponential_decay:  lr = peak * decay_rate ** ((step - warmup_steps) / decay_steps)

    Args:
        peak: float, the rate reached after warmup.
        decay: `"constant"`, `"inverse_sqrt"` or `"exponential_decay"`.
        warmup_steps: int. Defaults to 0.
        decay_steps: int. Defaults to 10000.
        decay_rate: float. Defaults to 0.5.
    """

    def __init__(self, peak, decay, warmup_steps=0, decay_steps=10000, decay_rate=0.5):
        self.peak = peak
        self.decay = decay
        self.warmup_steps = warmup_steps
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate

    def __call__(self, step):
        step = tf.cast(step, "float32")
        peak = tf.constant(self.peak, "float32")
        warmup = float(max(self.warmup_steps, 1))
        if self.decay == "inverse_sqrt":
            after = peak * tf.sqrt(warmup / (step + 1.0))
        elif self.decay == "exponential_decay":
            exponent = tf.maximum(step - self.warmup_steps, 0.0) / self.decay_steps
            after = peak * tf.pow(tf.constant(self.decay_rate, "float32"), exponent)
        else:
            after = peak
        if self.warmup_steps == 0:
            return after
        return tf.where(step < self.warmup_steps, peak * (step + 1.0) / warmup, after)

    def get_config(self):
        return {
            "peak": self.peak,
            "decay": self.decay,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
        }


def make_optimizer(config=None):
    """Adam (`FusedAdam`) with the configured betas, epsilon, schedule, clipping and average.

    With `config.average_decay`, an `AveragingAdam` keeps the moving average of the
    trainable weights; `finalize_variable_values` copies it into them. With
    `config.precision == "mixed_float16"` it is wrapped in a
    `keras.optimizers.LossScaleOptimizer`.
    """
    config = config or TrainingConfig()
    learning_rate = config.learning_rate
    if config.schedule != "constant" or config.warmup_steps:
        learning_rate = WarmupSchedule(
            config.learning_rate, config.schedule, config.warmup_steps,
            config.decay_steps, config.decay_rate,
        )
    options = dict(
        learning_rate=learning_rate, beta_1=config.adam_beta_1, beta_2=config.adam_beta_2,
        epsilon=config.adam_epsilon, global_clipnorm=config.clip_norm,
    )
    if config.average_decay is None:
        optimizer = FusedAdam(**options)
    else:
        optimizer = AveragingAdam(**options, use_ema=True, ema_momentum=config.average_decay)
    if config.precision == "mixed_float16":
        # The train step multiplies the loss by the scale (`scale_loss`); the
        # wrapper divides the gradients by it, then clips and applies them.
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


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


BATCH_SIGNATURE = (
    (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32)),
    tf.TensorSpec((None, None), tf.int32),
)
# Guided alignment's batches: the labels are `(target_out, gold)`.
GUIDED_SIGNATURE = (
    BATCH_SIGNATURE[0],
    (BATCH_SIGNATURE[1], tf.TensorSpec((None, None, None), tf.float32)),
)


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
    # Imported here: the guided loss is built of this module's pieces.
    from attncli.training.guided import guided_objective

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
        optimizer: e.g. `make_optimizer(config)`.
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


def make_distributed_train_step(model, optimizer, strategy, element_spec, config=None):
    """The training step of `make_train_step`, each global batch split across replicas.

    Each replica computes the loss sum of its rows; the token count is summed over the
    replicas, and each replica's loss is its sum divided by that global count, so the
    replicas' gradients add up to the gradient of the global batch's mean loss, the
    single-device gradient. The gradients are summed over the replicas, clipped to
    `config.clip_norm` as a whole, and applied.

    Keras's optimizer clips each replica's gradients before it sums them (its TF
    backend all-reduces in `_backend_update_step`, after `_clip_gradients`), which
    would clip parts of the gradient, not the gradient. So `optimizer` must be made
    without clipping: the step clips the summed gradient, then hands it to the
    optimizer on the first replica and zeros on the others, which the optimizer's own
    sum turns back into the clipped gradient, exactly. The price: the gradients cross
    the replicas twice, the second time mostly zeros.

    Args:
        model: a `Seq2Seq` created under `strategy.scope()`.
        optimizer: made under `strategy.scope()`, without `global_clipnorm`.
        strategy: a `tf.distribute.Strategy`.
        element_spec: the `element_spec` of the distributed dataset the step reads.
        config: a `TrainingConfig`; `label_smoothing`, `logits_on` and `clip_norm`
            are used. Defaults to `TrainingConfig()`.

    Returns:
        `train_step(inputs, target_out, stop) -> {"loss", "tokens", "stop"}`: the
        global batch's mean loss and token count, and the largest `stop` (int32 scalar,
        each worker's own) of all replicas, which every worker receives alike.
    """
    config = config or TrainingConfig()
    variables = trained_variables(model, config)
    if not optimizer.built:
        with strategy.scope():
            optimizer.build(variables)
    add = tf.distribute.ReduceOp.SUM

    def replica_step(inputs, target_out, stop):
        context = tf.distribute.get_replica_context()
        with tf.GradientTape() as tape:
            total, tokens = summed_sequence_loss(
                model, inputs, target_out, config.label_smoothing, training=True,
                logits_on=config.logits_on,
            )
            # Counts cross the replicas as floats (exact below 2 ** 24), as the stop
            # requests below: GPUs keep int32 tensors in host memory, out of NCCL's reach.
            global_tokens = context.all_reduce(add, tf.cast(tokens, "float32"))
            loss = total / tf.maximum(global_tokens, 1.0)
        gradients = tape.gradient(
            loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        # The embeddings' gradients are `IndexedSlices`, one slice per position; the sum
        # over replicas gathers them, giving the single-device slices. On one device,
        # Keras computes the clipping norm from the slices (a token seen twice counts
        # twice), and clipping returns dense gradients; without clipping, `FusedAdam`
        # makes them dense. Both are done here as there.
        gradients = context.all_reduce(add, gradients)
        if config.clip_norm is not None:
            gradients, _ = tf.clip_by_global_norm(gradients, config.clip_norm)
            gradients = [tf.convert_to_tensor(g) for g in gradients]
        first = tf.cast(tf.equal(context.replica_id_in_sync_group, 0), "float32")
        optimizer.apply_gradients(zip([_scaled(g, first) for g in gradients], variables))
        return {
            "loss": context.all_reduce(add, loss),
            "tokens": tf.cast(global_tokens, "int32"),
            # tf.distribute reduces by SUM or MEAN only: the largest of all requests.
            "stop": tf.cast(tf.reduce_max(
                context.all_gather(tf.reshape(tf.cast(stop, "float32"), [1]), axis=0)
            ), "int32"),
        }

    inputs_spec, target_spec = element_spec

    @tf.function(input_signature=(inputs_spec, target_spec, tf.TensorSpec((), tf.int32)))
    def train_step(inputs, target_out, stop):
        result = strategy.run(replica_step, args=(inputs, target_out, stop))
        # Every replica holds the same all-reduced values.
        return {key: strategy.experimental_local_results(value)[0]
                for key, value in result.items()}

    return train_step


def _scaled(gradient, factor):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * factor, gradient.indices, gradient.dense_shape)
    return gradient * factor


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
