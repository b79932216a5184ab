"""The `training:` section: the training step's hyperparameters and the training loop's.

Validated when they are set; no TensorFlow here.
"""

import dataclasses
from typing import Literal

from attncli.config.schema import check_choices

# The `stop_metric`s of each task, its own first (`attncli.training.stop_metric` compares
# them).
STOP_METRICS = {"translation": ("bleu", "chrf", "loss", "alignment"),
                "pronunciation": ("wer", "per", "loss")}


@dataclasses.dataclass(frozen=True)
class GuidedAlignment:
    """Guided alignment training (Chen et al. 2016, "Guided alignment training for
    topic-aware neural machine translation"; Garg et al. 2019, "Jointly learning to align
    and translate with transformer models"): one cross-attention is trained toward the
    word alignments of `data.alignments`.

        g_t(s)  = 1 / |P_t| for the source pieces s in P_t, else 0
        L_align = -(1 / N) sum_t sum_s g_t(s) log a_t(s)
        loss    = translation loss + weight * L_align

    `t` runs over the N target tokens of the batch with at least one link (`[END]` has
    none), `P_t` are the pieces of the source words linked to the word of token `t`, and
    `a_t` the supervised attention's weights at the step that emits `y_t`. With
    `model.alignment_layer` the supervised attention is the alignment layer's, and each
    loss trains its own weights: the translation loss the model's, `L_align` the
    alignment layer's (`attncli.model.alignment_layer`).

    Args:
        weight: float > 0, the weight of the alignment loss: the training loss is the
            translation loss + `weight * L_align`.
        layer: int >= 1 or None, the decoder block whose cross-attention is supervised:
            a self-attention decoder's, None meaning the penultimate block (Garg et al.'s
            choice; the only one of a one-block decoder). A recurrent decoder has one
            attention: None or 1. Defaults to None.
        head: int >= 1 or None, the head of that cross-attention supervised, None
            meaning head 1 (Garg et al. supervise one head). A recurrent decoder's
            attention has one: None or 1. Defaults to None.
        freeze_translation: bool, train the alignment layer alone: the model's own
            weights stay as they are (start them with `--init-from RUN`), so its
            translations do not change, and a step costs a forward pass of the model.
            Needs `model.alignment_layer`. Defaults to False.
    """

    weight: float
    layer: int | None = None
    head: int | None = None
    freeze_translation: bool = False

    def __post_init__(self):
        if self.weight <= 0:
            raise ValueError(f"weight must be positive. Received: weight={self.weight}")
        for name in ("layer", "head"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(
                    f"{name} counts from 1 (or null for the default). Received: {name}={value}"
                )

    def supervised(self, model):
        """`(layer, head)`, 1-based, of the cross-attention supervised in `model` (the
        `ModelSettings`), the defaults resolved.

        Returns `"alignment"` instead for a model with an alignment layer, which is
        what is supervised then (`layer` and `head` must be left null).

        Raises:
            ValueError: a layer or head the model does not have, or weights the model
                drops out (a self-attention decoder with `attention_dropout`: its
                attention weights are returned after dropout).
        """
        if model.alignment_layer:
            for name in ("layer", "head"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"guided_alignment.{name}: model.alignment_layer is what is "
                        f"supervised: leave {name} null. Received: {name}={getattr(self, name)}"
                    )
            return "alignment"
        if self.freeze_translation:
            raise ValueError(
                "guided_alignment.freeze_translation trains the alignment layer alone: set "
                "model.alignment_layer: true"
            )
        if model.decoder != "self-attention":
            for name in ("layer", "head"):
                if getattr(self, name) not in (None, 1):
                    raise ValueError(
                        f"guided_alignment.{name}: the {model.decoder} decoder has one "
                        f"attention: leave {name} null. Received: {name}={getattr(self, name)}"
                    )
            return 1, 1
        layer = max(model.decoder_layers - 1, 1) if self.layer is None else self.layer
        head = 1 if self.head is None else self.head
        if layer > model.decoder_layers:
            raise ValueError(
                f"guided_alignment.layer: the decoder has {model.decoder_layers} blocks. "
                f"Received: layer={layer}"
            )
        if head > model.heads:
            raise ValueError(
                f"guided_alignment.head: the cross-attention has {model.heads} heads. "
                f"Received: head={head}"
            )
        if model.attention_dropout:
            raise ValueError(
                "guided_alignment supervises the attention weights, which "
                "model.attention_dropout drops out while training: set it to 0. "
                f"Received: attention_dropout={model.attention_dropout}"
            )
        return layer, head


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Optimiser, learning-rate schedule and loss of the teacher-forced training step.

    Args:
        learning_rate: float, the constant rate, or the peak rate of a schedule.
            Defaults to 1e-3.
        schedule: `"constant"`; `"inverse_sqrt"`: linear warmup, the rate
            `learning_rate * (step + 1) / warmup_steps` while `step < warmup_steps`,
            then `learning_rate * sqrt(warmup_steps / (step + 1))`; or
            `"exponential_decay"`: the same warmup, then
            `learning_rate * decay_rate ** ((step - warmup_steps) / decay_steps)`.
            `step` counts the updates already applied (the optimizer's
            `iterations`): 0 for the first update. Defaults to `"constant"`.
        warmup_steps: int >= 0 (>= 1 for `"inverse_sqrt"`). Defaults to 0.
        decay_steps: int >= 1. Defaults to 10000.
        decay_rate: float in (0, 1]. Defaults to 0.5.
        adam_beta_1: float in [0, 1), Adam's decay of the gradients' moving mean
            `m <- beta_1 m + (1 - beta_1) g` (Kingma & Ba 2015). Defaults to 0.9.
        adam_beta_2: float in [0, 1), Adam's decay of the squared gradients' moving
            mean `v <- beta_2 v + (1 - beta_2) g^2`; the update is
            `w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)`.
            Vaswani et al. 2017 and Wu et al. 2021 use 0.98, which forgets a large early
            gradient sooner. Defaults to 0.999.
        adam_epsilon: float > 0, Adam's `epsilon` (added to `sqrt(v)`, Keras's
            placement). Defaults to 1e-7, Keras's.
        clip_norm: float or None, clip gradients to this global norm. Defaults to 5.0.
        label_smoothing: float in [0, 1), the mass spread uniformly over the
            tokens search may emit: the vocabulary without padding and
            start-of-sentence (see `attncli.training.losses.smoothed_cross_entropy`).
            Defaults to 0.1.
        average_decay: float in [0, 1) or None; if set, the optimizer also keeps an
            exponential moving average of the weights, updated after every step as
            `w_avg <- d_t * w_avg + (1 - d_t) * w` with `d_t = min(d, t / (t + 10))`
            (`d` = `average_decay`, `t` the updates applied before this one: the first
            step copies `w`), and validation, the kept model and the test scoring use
            the averaged weights while training goes on with the raw ones. Until
            `d_t` reaches `d` (0.999: after ~10,000 steps) the average covers about
            the last tenth of the run, so no early weights linger in it; after, about
            the last `1 / (1 - d)` steps. Defaults to None.
        logits_on: `"tokens"` computes the output layer on non-pad target positions
            only; `"all"` on every position, padding included (the same loss, slower;
            kept for comparison). Defaults to `"tokens"`.
        precision: `"float32"`; `"mixed_bfloat16"` or `"mixed_float16"`: the model
            is built under that Keras dtype policy, its layers computing in the
            half type while the weights, the optimizer, the attention scores and
            softmax, the recurrent states and the loss stay in float32;
            `"mixed_float16"` also scales the
            loss (`keras.optimizers.LossScaleOptimizer`: the scale starts at 2^15,
            halves and skips the step when a gradient is not finite, doubles after
            2,000 finite steps) so that small gradients do not vanish in float16.
            Validation runs on the model as it trains; the kept model and its
            export are read back in float32. `"auto"`: `"mixed_bfloat16"` where this
            machine computes bfloat16 in hardware (no GPU training, oneDNN on, and a
            CPU with AMX-BF16 or AVX512-BF16), else `"float32"` (elsewhere bfloat16 is
            emulated and slower than float32); the run's summary says which it became.
            Defaults to `"float32"`.
        accumulate_steps: int >= 1, batches whose gradients make one update. The
            gradient of each batch's summed loss is added up over `accumulate_steps`
            batches and divided by all their target tokens, so `N` batches of `B`
            sentences give the update of one batch of `N * B` (the loss is a mean per
            token); it is then clipped to `clip_norm` as a whole, scaled back from the
            loss scale under `"mixed_float16"`, and applied once. The optimizer's
            `iterations`, and with it the schedule, the moving average,
            `checkpoint_every`, `eval_every` and the recorded `step`, count updates;
            progress and `log_every` count batches. Batches left over at an epoch's
            end carry on into the next epoch; those left when the run ends are not
            applied. One device only (`distribute: none`). Defaults to 1.
        guided_alignment: a `GuidedAlignment` (`{weight: 0.5}`, with `layer` and
            `head` for a self-attention decoder), adding its alignment loss to the
            training loss, with the word alignments of `data.alignments`; validation's
            loss stays the translation loss. One device only (`distribute: none`),
            and not in `mixed_float16`. Defaults to None (off).

    The step is a `tf.function` without XLA: measured on spa-eng batches, XLA
    compiled each new batch shape in about 12 s and then ran a step 3x slower than
    the plain graph (see docs/model.md).
    """

    learning_rate: float = 1e-3
    schedule: Literal["constant", "inverse_sqrt", "exponential_decay"] = "constant"
    warmup_steps: int = 0
    decay_steps: int = 10000
    decay_rate: float = 0.5
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.999
    adam_epsilon: float = 1e-7
    clip_norm: float | None = 5.0
    label_smoothing: float = 0.1
    logits_on: Literal["tokens", "all"] = "tokens"
    average_decay: float | None = None
    precision: Literal["float32", "mixed_bfloat16", "mixed_float16", "auto"] = "float32"
    accumulate_steps: int = 1
    guided_alignment: GuidedAlignment | None = None

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(
                f"learning_rate must be positive. Received: learning_rate={self.learning_rate}"
            )
        check_choices(self)
        if self.warmup_steps < 0 or (self.schedule == "inverse_sqrt" and self.warmup_steps < 1):
            raise ValueError(
                "warmup_steps must be >= 0, and >= 1 with schedule='inverse_sqrt'. "
                f"Received: warmup_steps={self.warmup_steps}"
            )
        if self.decay_steps < 1:
            raise ValueError(f"decay_steps must be >= 1. Received: decay_steps={self.decay_steps}")
        if not 0.0 < self.decay_rate <= 1.0:
            raise ValueError(
                f"decay_rate must be in (0, 1]. Received: decay_rate={self.decay_rate}"
            )
        for name in ("adam_beta_1", "adam_beta_2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(
                    f"{name} must be in [0, 1). Received: {name}={getattr(self, name)}"
                )
        if self.adam_epsilon <= 0:
            raise ValueError(
                f"adam_epsilon must be positive. Received: adam_epsilon={self.adam_epsilon}"
            )
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(
                f"clip_norm must be positive or None. Received: clip_norm={self.clip_norm}"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                "label_smoothing must be in [0, 1). "
                f"Received: label_smoothing={self.label_smoothing}"
            )
        if self.accumulate_steps < 1:
            raise ValueError(
                f"accumulate_steps must be >= 1. Received: accumulate_steps={self.accumulate_steps}"
            )
        if self.average_decay is not None and not 0.0 <= self.average_decay < 1.0:
            raise ValueError(
                "average_decay must be in [0, 1) or null. "
                f"Received: average_decay={self.average_decay}"
            )


@dataclasses.dataclass(frozen=True)
class LoopConfig(TrainingConfig):
    """The `training:` section: the training step's settings plus the loop's.

    Args (beyond `TrainingConfig`'s optimiser, schedule and loss):
        epochs: int >= 1, passes over the training pairs. Defaults to 10.
        max_minutes: float or None, stop (with a checkpoint and the best model kept)
            once training has run this long. Defaults to None.
        patience: int or None, stop after this many evaluations without a better
            `stop_metric`. Defaults to None (never stop early).
        stop_metric: the validation figure that chooses the kept model and counts
            `patience`: `"bleu"`, `"chrf"`, `"loss"` (`valid_loss`, the training
            objective on the whole validation split) or, with guided alignment,
            `"alignment"` (`valid_alignment_loss`, its loss over the links of
            validation pairs carved from the training file) for translation; `"wer"`,
            `"per"` or `"loss"` for pronunciation. BLEU, chrF: higher is better;
            losses, PER, WER: lower. None is the task's own, BLEU or WER, except that
            a run training an alignment layer alone (`freeze_translation`) keeps the
            layer with the best `"alignment"` when it can be measured, else the latest.
            A resumed run keeps the one it started with. Defaults to None.
        seed: int in [0, 2**32 - 1], seeds weights, dropout and data order. Defaults to 0.
        checkpoint_every: int >= 1, steps between checkpoints (one is also written
            at the end of each epoch and on interruption). Defaults to 500.
        eval_sentences: int or None, distinct validation sources decoded for the
            metric after each epoch, each scored against all of its references (all
            pairs count for the loss). Defaults to 500.
        eval_beam_size: int >= 1, the beam used for that metric. Defaults to 1.
        eval_every: int >= 1 or None, also evaluate (and keep the model if it is the
            best) every this many steps, inside epochs; each evaluation counts for
            `patience`, and the one that spends it ends the run at its step.
            Defaults to None (after each epoch, and when the time budget or a
            signal ends one early).
        distribute: `"none"` (one device), `"mirrored"` (every GPU of this machine,
            or its logical CPU devices) or `"multi-worker"` (the machines of
            `TF_CONFIG`): TensorFlow's strategy that trains on them. Each batch of
            `data.batch_size` sentences is split across the replicas, so the run
            learns as on one device (exactly without dropout; with dropout the
            replicas draw the same masks for their rows). Defaults to `"none"`.
        cpu_replicas: int >= 1 or None; with `"mirrored"` on a machine without
            GPUs, split the CPU into this many logical devices, one replica each
            (to try or test a distributed setup; the replicas share the cores).
            Defaults to None (the CPU is one device).
        log_every: int >= 1, batches between two progress lines (loss, target
            tokens per second, time elapsed) when stderr is not a terminal, as in
            `attncli train 2>log`; a terminal shows progress bars instead.
            Defaults to 100.
    """

    epochs: int = 10
    max_minutes: float | None = None
    patience: int | None = None
    stop_metric: Literal["bleu", "chrf", "loss", "alignment", "per", "wer"] | None = None
    seed: int = 0
    checkpoint_every: int = 500
    eval_sentences: int | None = 500
    eval_beam_size: int = 1
    eval_every: int | None = None
    distribute: Literal["none", "mirrored", "multi-worker"] = "none"
    cpu_replicas: int | None = None
    log_every: int = 100

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.seed < 2**32:
            raise ValueError(
                f"seed must be in [0, 2**32 - 1] (what TensorFlow and NumPy accept). "
                f"Received: seed={self.seed}"
            )
        for name in ("epochs", "checkpoint_every", "eval_beam_size", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1. Received: {name}={getattr(self, name)}")
        for name in ("patience", "eval_sentences", "eval_every", "cpu_replicas"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null. Received: {name}={value}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(
                f"max_minutes must be positive or null. Received: max_minutes={self.max_minutes}"
            )
        if self.precision == "mixed_float16" and self.distribute != "none":
            raise ValueError(
                "precision: mixed_float16 scales the loss, which the distributed step, "
                "clipping the gradient summed over the replicas itself, does not undo: "
                "train on one device, or with mixed_bfloat16 (no scaling). Received: "
                f"precision={self.precision} with distribute={self.distribute}"
            )
        if self.accumulate_steps > 1 and self.distribute != "none":
            raise ValueError(
                "accumulate_steps adds up gradients on one device; a distributed run's "
                "replicas already make each batch larger (data.batch_size is split across "
                "them): use one or the other. Received: "
                f"accumulate_steps={self.accumulate_steps} with distribute={self.distribute}"
            )
        if self.guided_alignment is not None and self.distribute != "none":
            raise ValueError(
                "guided_alignment trains on one device: set distribute: none. Received: "
                f"distribute={self.distribute}"
            )
        if self.guided_alignment is not None and self.precision == "mixed_float16":
            # The gradient of -g log a is -g / a, times the loss scale (2**15 at first):
            # in float16 it overflows for any gold-linked weight below about 1e-3.
            raise ValueError(
                "guided_alignment's gradient overflows float16 where the attention is "
                "small: use precision mixed_bfloat16, auto or float32. Received: "
                f"precision={self.precision}"
            )
        if self.cpu_replicas is not None and self.distribute != "mirrored":
            raise ValueError(
                "cpu_replicas splits the CPU for distribute: mirrored only. Received: "
                f"cpu_replicas={self.cpu_replicas} with distribute={self.distribute}"
            )
