"""Guided alignment training: the loss that trains one cross-attention toward word
alignments (Chen et al. 2016, "Guided alignment training for topic-aware neural machine
translation"; Garg et al. 2019, "Jointly learning to align and translate with
transformer models").

For each target token `t` of a batch (an output `y_t`; `[END]` has no link) with at
least one link, the gold distribution over the source pieces is

    g_t(s) = 1 / |P_t| for s in P_t, else 0

`P_t` the pieces of the source words linked to the word of `y_t`
(`attncli.data.alignments`), and with `a_t` the supervised attention's weights at the
step that emits `y_t`, over the N such tokens of the batch,

    L_align = -(1 / N) sum_t sum_s g_t(s) log a_t(s)
    loss    = L_translation + weight * L_align

the cross-entropy loss of both papers (Chen et al. also try a squared error), averaged
over the linked target tokens where Garg et al. average over all target tokens: a pair
with few links is not diluted by its unlinked words. A pair without links adds nothing,
neither to the sum nor to N. Validation's loss stays the
translation loss; validation also reports `L_align` over the validation pairs' links,
`valid_alignment_loss`, when they have links (a split carved from the training file),
and `training.stop_metric: alignment` keeps the model that minimises it
(`make_guided_eval_step`).

With an alignment layer (`model.alignment_layer`) the supervised weights are that
layer's, whose inputs are cut from the gradient: `L_align` trains the layer alone and
the translation loss the rest; with `freeze_translation` only the layer is trained
(`attncli.training.steps.trained_variables`).
"""

import numpy as np
import tensorflow as tf

from attncli.training.eval_step import evaluation_losses
from attncli.training.losses import (
    GUIDED_SIGNATURE, longest_source_first, output_logits, summed_cross_entropy,
)

#: The smallest normal float32. `log a` is read as `log max(a, TINY)`: finite where a
#: weight is 0 (a masked position, outside a local window), and the same wherever a
#: weight is a normal float32.
TINY = float(np.finfo(np.float32).tiny)


def alignment_loss(weights, gold):
    """The alignment cross-entropy summed over a batch, and its linked target tokens.

        sum = -sum_t sum_s g_t(s) log max(a_t(s), TINY)
        N   = the rows t with some g_t(s) > 0

    Computed in float32 whatever the weights' dtype (mixed precision).

    Args:
        weights: `(batch_size, T, S)`, the supervised attention `a`.
        gold: float32 `(batch_size, T, S)`, the gold distributions `g` (rows of zeros
            where a token has no link).

    Returns:
        `(sum, N)`: float32 and int32 scalars; `sum / max(N, 1)` is `L_align`.
    """
    log_weights = tf.math.log(tf.maximum(tf.cast(weights, "float32"), TINY))
    linked = tf.reduce_any(gold > 0.0, axis=-1)
    return -tf.reduce_sum(gold * log_weights), tf.reduce_sum(tf.cast(linked, "int32"))


def guided_objective(model, config, inputs, labels):
    """What the training step minimises with `config.guided_alignment`, and reports.

    Args:
        model: a `Seq2Seq`.
        config: the `TrainingConfig`.
        inputs: `(source_ids, target_in_ids)`.
        labels: `(target_out, gold)`, `gold` float32 `(batch_size, T, S)`.

    Returns:
        `(loss, report)`: `L_translation + weight * L_align`, and `{"loss":
        L_translation, "tokens": target tokens, "alignment_loss": L_align, "links": N}`.
    """
    guided = config.guided_alignment
    inputs, (target_out, gold) = longest_source_first(inputs, labels)
    # A frozen model runs as it translates, without dropout.
    features, weights = model.features(
        inputs, training=not guided.freeze_translation,
        cross_attention=guided.supervised(model.config),
    )
    logits, token_labels, mask = output_logits(model, features, target_out, config.logits_on)
    total, tokens = summed_cross_entropy(logits, token_labels, mask, config.label_smoothing)
    translation = total / tf.cast(tf.maximum(tokens, 1), "float32")
    alignment_sum, links = alignment_loss(weights, gold)
    alignment = alignment_sum / tf.cast(tf.maximum(links, 1), "float32")
    report = {"loss": translation, "tokens": tokens, "alignment_loss": alignment,
              "links": links}
    return translation + guided.weight * alignment, report


def make_guided_eval_step(model, config):
    """A compiled step of guided alignment's validation, updating nothing.

    On a batch `((source_ids, target_in_ids), (target_out, gold))` it returns
    `make_eval_step`'s `{"loss", "nll", "tokens"}` and `{"alignment_sum", "links"}`,
    `alignment_loss`'s sum and N for the supervised attention run as it translates
    (no dropout): over a split, `sum(alignment_sum) / sum(links)` is `L_align` per
    linked target token.

    Args:
        model: a `Seq2Seq`.
        config: the `TrainingConfig`, with `guided_alignment`.
    """
    supervised = config.guided_alignment.supervised(model.config)

    @tf.function(input_signature=GUIDED_SIGNATURE)
    def eval_step(inputs, labels):
        target_out, gold = labels
        features, weights = model.features(inputs, training=False,
                                           cross_attention=supervised)
        logits, token_labels, mask = output_logits(model, features, target_out,
                                                   config.logits_on)
        alignment_sum, links = alignment_loss(weights, gold)
        return {**evaluation_losses(logits, token_labels, mask, config.label_smoothing),
                "alignment_sum": alignment_sum, "links": links}

    return eval_step
