"""`training.average_decay`: validation, the kept model and resume use the averaged weights.

Tiny runs (configs/tiny-test.yaml) in this process: one of two epochs with a decay of 0.5,
so that the average and the raw weights differ clearly, read by most tests; the same run
without the average, which must train the same steps; one without averaging or smoothing.
"""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
from recorder import Recorder

from attncli.config.run import load_run_config
from attncli.training.run_directory import RunDirectory
from attncli.search.loading import load_model

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny-test.yaml"
# The kept model is the best by validation loss, which falls in the second epoch: the
# last, whose average the trainer still holds.
OVERRIDES = ["training.epochs=2", "training.average_decay=0.5", "training.stop_metric=loss"]

pytestmark = pytest.mark.slow


def weights_of(model):
    return [keras.ops.convert_to_numpy(variable) for variable in model.trainable_variables]


def assert_same_weights(actual, expected, **tolerance):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, **tolerance)


def averaged_weights(trainer):
    """The optimizer's average, read from its own variables (in the model's order)."""
    averages = trainer.optimizer._model_variables_moving_average
    return [keras.ops.convert_to_numpy(average) for average in averages]


def train(overrides, directory):
    """A tiny run in `directory` with `overrides`: (config, run, trainer, progress)."""
    from attncli.training.trainer import Trainer

    config = load_run_config(TINY, overrides)
    run = RunDirectory.create(directory)
    progress = Recorder()
    trainer = Trainer.from_config(config, run, progress)
    trainer.fit()
    return config, run, trainer, progress


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two epochs with the average."""
    return train(OVERRIDES, tmp_path_factory.mktemp("average") / "run")


@pytest.fixture(scope="module")
def trained_raw(tmp_path_factory):
    """`trained`'s run without the average."""
    overrides = [override for override in OVERRIDES if "average_decay" not in override]
    return train(overrides, tmp_path_factory.mktemp("raw") / "run")


def test_the_kept_model_holds_the_average_and_training_keeps_the_raw_weights(trained):
    config, run, trainer, progress = trained
    raw, average = weights_of(trainer.model), averaged_weights(trainer)
    assert any(not np.allclose(r, a, atol=1e-4) for r, a in zip(raw, average))
    kept = load_model(run.model_dir)
    assert kept.metadata["weights"] == "average" and kept.metadata["epoch"] == 2
    # Keras's `load_weights` orders the variables as the model builds them.
    assert_same_weights(weights_of(kept.model), average, rtol=1e-6, atol=1e-7)
    record = json.loads((run.path / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["weights"] == "average" and progress.records[-1] == record


def test_validation_loss_is_that_of_the_averaged_weights(trained):
    """`valid_loss` (and `valid_nll`) are the average's, `valid_loss_raw` the raw weights'."""
    config, run, trainer, progress = trained
    record = progress.records[-1]
    raw_loss = trainer.validator.loss()
    with trainer.validator.averaged_weights():
        average = trainer.validator.losses()
    np.testing.assert_allclose(average["loss"], record["valid_loss"], rtol=1e-6)
    np.testing.assert_allclose(average["nll"], record["valid_nll"], rtol=1e-6)
    np.testing.assert_allclose(raw_loss, record["valid_loss_raw"], rtol=1e-6)
    assert abs(raw_loss - record["valid_loss"]) > 1e-4


def test_resume_restores_the_average_with_the_checkpoint(trained):
    from attncli.training.trainer import Trainer

    config, run, trainer, _ = trained
    resumed = Trainer.from_config(config, RunDirectory.open(run.path), Recorder(), resume=True)
    assert_same_weights(averaged_weights(resumed), averaged_weights(trainer), rtol=1e-6)
    assert_same_weights(weights_of(resumed.model), weights_of(trainer.model), rtol=1e-6)


def test_without_averaging_the_kept_model_is_the_raw_one(tmp_path):
    """Also without smoothing: then neither `valid_loss_raw` nor `valid_nll` is recorded."""
    from attncli.training.trainer import Trainer

    config = load_run_config(TINY, ["training.epochs=1", "training.label_smoothing=0.0"])
    run = RunDirectory.create(tmp_path / "run")
    trainer = Trainer.from_config(config, run, Recorder())
    trainer.fit()
    kept = load_model(run.model_dir)
    assert kept.metadata["weights"] == "raw"
    assert json.loads((run.path / "test.json").read_text())["weights"] == "raw"
    record = json.loads((run.path / "metrics.jsonl").read_text().splitlines()[-1])
    assert "valid_loss_raw" not in record and "valid_nll" not in record
    assert_same_weights(weights_of(kept.model), weights_of(trainer.model), rtol=1e-6)


def test_training_after_averaged_evaluations_is_training_without_them(trained, trained_raw):
    """Two epochs with and without an average: the same steps, the same raw weights."""
    _, run, averaged, averaged_progress = trained
    _, _, raw, raw_progress = trained_raw
    assert len(raw_progress.losses) == len(averaged_progress.losses) > 28
    np.testing.assert_allclose(averaged_progress.losses, raw_progress.losses, rtol=1e-5)
    assert_same_weights(weights_of(averaged.model), weights_of(raw.model), rtol=1e-4, atol=1e-6)
    assert json.loads((run.path / "test.json").read_text())["weights"] == "average"
