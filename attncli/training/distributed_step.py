"""The training step of `attncli.training.steps`, each global batch split across the
replicas of a `tf.distribute` strategy."""

import tensorflow as tf

from attncli.config.training import TrainingConfig
from attncli.training.losses import summed_sequence_loss
from attncli.training.steps import trained_variables


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
