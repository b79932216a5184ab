"""The optimizer a run trains with, made from its training settings: Adam, the
learning-rate schedule, clipping, the moving average of the weights and loss scaling."""

import keras
import tensorflow as tf

from attncli.config.training import TrainingConfig
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
