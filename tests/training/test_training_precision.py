"""`training.precision`: mixed bfloat16 and float16 training, self-attention and recurrent.

The model is built under the Keras dtype policy (`builder.dtype_policy`): its layers
compute in the half type, its weights stay float32 (and a recurrent model's states:
tests/model/test_recurrence_precision.py); mixed_float16 scales the loss
(`keras.optimizers.LossScaleOptimizer`). A distributed mixed_float16 run is refused in
one line.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.config.model import ModelConfig
from attncli.config.run import load_run_config
from attncli.config.schema import ConfigError
from attncli.config.training import LoopConfig, TrainingConfig
from attncli.model.encoder_decoder import Seq2Seq
from attncli.search.decoding import greedy_search
from attncli.training.builder import dtype_policy
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.steps import make_train_step
from attncli.training.optimizers import FusedAdam

SELF_ATTENTION = ["model.encoder=self-attention", "model.decoder=self-attention"]


def test_precision_defaults_to_float32_and_takes_only_its_choices():
    assert TrainingConfig().precision == "float32"
    config = load_run_config(overrides=[*SELF_ATTENTION, "training.precision=mixed_bfloat16"])
    assert config.training.precision == "mixed_bfloat16"
    with pytest.raises(ConfigError, match="training.precision") as error:
        load_run_config(overrides=[*SELF_ATTENTION, "training.precision=float16"])
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("sides", [[], ["model.decoder=self-attention"],
                                   ["model.encoder=self-attention"]])
def test_recurrent_models_take_every_precision(sides):
    for precision in ("mixed_bfloat16", "mixed_float16"):
        config = load_run_config(overrides=[*sides, f"training.precision={precision}"])
        assert config.training.precision == precision


def test_distributed_mixed_float16_is_refused():
    with pytest.raises(ValueError, match="mixed_float16 scales the loss"):
        LoopConfig(precision="mixed_float16", distribute="mirrored")
    LoopConfig(precision="mixed_bfloat16", distribute="mirrored")


def test_only_float16_scales_the_loss():
    for precision in ("float32", "mixed_bfloat16"):
        optimizer = make_optimizer(TrainingConfig(precision=precision))
        assert isinstance(optimizer, FusedAdam)
        assert float(optimizer.scale_loss(tf.constant(3.0))) == 3.0
    optimizer = make_optimizer(TrainingConfig(precision="mixed_float16", average_decay=0.9))
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert optimizer.inner_optimizer.use_ema
    assert float(optimizer.scale_loss(tf.constant(3.0))) == 3.0 * 2.0**15


SIDES = {
    "self-attention": dict(encoder="self-attention", decoder="self-attention", heads=2),
    "gru-luong": dict(cell="gru", decoder="luong"),
    "lstm-bahdanau": dict(cell="lstm", decoder="bahdanau"),
}


def small_model(precision, sides):
    keras.utils.set_random_seed(3)
    config = ModelConfig(source_vocab_size=20, target_vocab_size=15, embedding_dim=8,
                         units=8, score="general", **SIDES[sides])
    with dtype_policy(precision):
        return Seq2Seq(config)


# the recurrent models trace a loop each for training and search: about 40 s each
@pytest.mark.parametrize("sides", [
    pytest.param(sides, marks=[pytest.mark.slow] if sides != "self-attention" else [])
    for sides in SIDES
])
@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_a_mixed_model_trains_with_float32_weights(precision, sides):
    model = small_model(precision, sides)
    assert keras.config.dtype_policy().name == "float32"
    policies = {layer.dtype_policy.name for layer in model._flatten_layers()}
    assert policies == {precision}
    assert {v.dtype for v in model.trainable_variables} == {"float32"}
    config = TrainingConfig(precision=precision, learning_rate=0.01)
    optimizer = make_optimizer(config)
    train_step = make_train_step(model, optimizer, config)
    source = tf.constant([[3, 4, 5, 6], [6, 7, 8, 0]], tf.int32)
    target_in = tf.constant([[1, 3, 4, 5], [1, 5, 6, 0]], tf.int32)
    target_out = tf.constant([[3, 4, 5, 2], [5, 6, 2, 0]], tf.int32)
    losses = [float(train_step((source, target_in), target_out)["loss"]) for _ in range(30)]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0]
    skipped = 30 - int(optimizer.iterations.numpy())
    if precision == "mixed_float16":
        # The first steps may overflow float16 at the starting scale 2^15 (a recurrent
        # model's backward products d(gates) U^T did, 3 times): each halved the scale
        # and was skipped.
        assert skipped <= 4
        assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** (15 - skipped)
    else:
        assert skipped == 0
    # Validation searches with the model as it trains.
    token_ids = greedy_search(model, source).token_ids.numpy()
    assert token_ids.shape[:2] == (2, 1) and np.all((token_ids >= 0) & (token_ids < 15))
