"""The memory a training run is refused by counts every float32 copy of the weights it
keeps: 4 for Adam, one for the moving average, one for the gradient sums of
`accumulate_steps`."""

import pytest

from attncli.config.model import ModelConfig
from attncli.config.training import TrainingConfig
from attncli.errors import AttncliError
from attncli.model.footprint import check_fits_in_memory, minimum_parameter_count

SMALL = ModelConfig(source_vocab_size=400, target_vocab_size=400)


@pytest.mark.parametrize(("settings", "copies", "named"), [
    ({}, 4, "for weights, gradients and Adam's moments, and"),
    ({"average_decay": 0.999}, 5,
     "for weights, gradients, Adam's moments and their moving average, and"),
    ({"accumulate_steps": 4}, 5, "for weights, gradients, Adam's moments and the gradient "
     "sums of training.accumulate_steps, and"),
    ({"accumulate_steps": 2, "average_decay": 0.9}, 6, "Adam's moments, their moving average "
     "and the gradient sums of training.accumulate_steps, and"),
    ({"accumulate_steps": 1}, 4, "for weights, gradients and Adam's moments, and"),
])
def test_each_kept_copy_of_the_weights_is_counted(settings, copies, named):
    training = TrainingConfig(**settings)
    needed = copies * 4 * minimum_parameter_count(SMALL)  # float32: 4 bytes a value
    check_fits_in_memory(SMALL, training, available=needed)
    with pytest.raises(AttncliError) as raised:
        check_fits_in_memory(SMALL, training, available=needed - 1)
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_without_a_training_configuration_the_defaults_count():
    needed = 16 * minimum_parameter_count(SMALL)
    check_fits_in_memory(SMALL, available=needed)
    with pytest.raises(AttncliError):
        check_fits_in_memory(SMALL, available=needed - 1)
