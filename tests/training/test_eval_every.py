"""`training.eval_every`: evaluations inside epochs, beside those at each epoch's end.

One tiny run (configs/tiny-test.yaml, two epochs, the weights averaged) in this process.
"""

import json
from pathlib import Path

import pytest
from recorder import Recorder

from attncli.config.run import load_run_config
from attncli.search.loading import load_model
from attncli.training.run_directory import RunDirectory

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny-test.yaml"
EVERY = 10

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from attncli.training.trainer import Trainer

    config = load_run_config(
        TINY, ["training.epochs=2", f"training.eval_every={EVERY}", "training.average_decay=0.5"]
    )
    run = RunDirectory.create(tmp_path_factory.mktemp("eval-every") / "run")
    progress = Recorder()
    Trainer.from_config(config, run, progress).fit()
    return run, progress.records


def test_evaluations_every_n_steps_and_at_each_epoch_end(trained):
    run, records = trained
    epoch_ends = [record["step"] for record in records if record["complete_epoch"]]
    assert len(epoch_ends) == 2
    expected = sorted(set(range(EVERY, epoch_ends[-1], EVERY)) | set(epoch_ends))
    assert [record["step"] for record in records] == expected
    # A step at an epoch's end is evaluated once, as the epoch's end.
    assert len(expected) == len(set(expected))
    for record in records:
        assert record["epoch"] == (1 if record["step"] <= epoch_ends[0] else 2)
    written = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in written] == expected


def test_the_kept_model_is_the_best_of_all_evaluations(trained):
    run, records = trained
    best = max(records, key=lambda record: record["bleu"])
    kept = load_model(run.model_dir).metadata
    assert kept["bleu"] == pytest.approx(max(record["bleu"] for record in records))
    assert kept["epoch"] == best["epoch"]


def test_with_averaging_each_evaluation_records_the_raw_weights_figures(trained):
    _, records = trained
    for record in records:
        assert {"bleu_raw", "chrf_raw", "valid_loss_raw"} <= set(record)
    # After the first few steps the average and the raw weights decode differently.
    assert any(record["chrf_raw"] != record["chrf"] for record in records)


def test_patience_spent_inside_an_epoch_stops_there(tmp_path):
    """The evaluation that spends the patience ends the run at its step, evaluated once."""
    from attncli.training.trainer import Trainer

    every, patience = 4, 2
    config = load_run_config(
        TINY,
        ["training.epochs=3", f"training.eval_every={every}", f"training.patience={patience}"],
    )
    run = RunDirectory.create(tmp_path / "run")
    progress = Recorder()
    trainer = Trainer.from_config(config, run, progress)
    # A validation figure that never improves after the first evaluation.
    trainer.validator.metric = lambda: {"bleu": 1.0, "chrf": 1.0}
    summary = trainer.fit()

    steps = [record["step"] for record in progress.records]
    assert steps == [every * k for k in range(1, patience + 2)]
    # The first epoch (over 24 batches of the tiny corpus) was cut short at the last evaluation.
    assert not any(record["complete_epoch"] for record in progress.records)
    written = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in written] == steps
    # The summary counts the epoch the table shows as `1*`.
    assert summary["epochs"] == 1
    assert int(trainer.optimizer.iterations.numpy()) == steps[-1]
    assert any("stopped early" in message for message in progress.messages)
    assert "test" in summary
