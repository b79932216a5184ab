"""Hyperparameters of the training step, validated when they are set (no TensorFlow)."""

import dataclasses
from typing import Literal


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
        clip_norm: float or None, clip gradients to this global norm. Defaults to 5.0.
        label_smoothing: float in [0, 1), the mass spread uniformly over the
            tokens search may emit: the vocabulary without padding and
            start-of-sentence (see `attncli.training.steps.smoothed_cross_entropy`).
            Defaults to 0.1.
        average_decay: float in [0, 1) or None; if set, the optimizer also keeps an
            exponential moving average of the weights, updated after every step as
            `w_avg <- d * w_avg + (1 - d) * w` (`d` = `average_decay`; the first step
            copies `w`), and validation, the kept model and the test scoring use the
            averaged weights while training goes on with the raw ones. Once the run
            is well past `1 / (1 - d)` steps, about the last `1 / (1 - d)` count
            (0.999: the last ~1,000); before, the first weights still weigh
            `d ** (t - 1)` (0.999: 37% after 1,000 steps, 5% after 3,000), so keep
            it for runs of many thousand steps. Defaults to None.
        logits_on: `"tokens"` computes the output layer on non-pad target positions
            only; `"all"` on every position, padding included (the same loss, slower;
            kept for comparison). Defaults to `"tokens"`.

    The step is a `tf.function` without XLA: measured on spa-eng batches, XLA
    compiled each new batch shape in about 12 s and then ran a step 3x slower than
    the plain graph (see docs/model.md).
    """

    learning_rate: float = 1e-3
    schedule: Literal["constant", "inverse_sqrt", "exponential_decay"] = "constant"
    warmup_steps: int = 0
    decay_steps: int = 10000
    decay_rate: float = 0.5
    clip_norm: float | None = 5.0
    label_smoothing: float = 0.1
    logits_on: Literal["tokens", "all"] = "tokens"
    average_decay: float | None = None

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(
                f"learning_rate must be positive. Received: learning_rate={self.learning_rate}"
            )
        if self.schedule not in ("constant", "inverse_sqrt", "exponential_decay"):
            raise ValueError(
                "schedule must be one of constant, inverse_sqrt, exponential_decay. "
                f"Received: schedule={self.schedule!r}"
            )
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
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(
                f"clip_norm must be positive or None. Received: clip_norm={self.clip_norm}"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                "label_smoothing must be in [0, 1). "
                f"Received: label_smoothing={self.label_smoothing}"
            )
        if self.average_decay is not None and not 0.0 <= self.average_decay < 1.0:
            raise ValueError(
                "average_decay must be in [0, 1) or null. "
                f"Received: average_decay={self.average_decay}"
            )
        if self.logits_on not in ("tokens", "all"):
            raise ValueError(
                f"logits_on must be 'tokens' or 'all'. Received: logits_on={self.logits_on!r}"
            )
