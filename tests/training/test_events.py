"""TensorBoard events of a run and `training.stop_metric`, as a user meets them.

The events are read back with TensorFlow's own reader (`summary_iterator`) and
compared with `metrics.jsonl`, and the learning rate with the schedule's formula
(`TrainingConfig`: `peak * (step + 1) / warmup_steps` during warmup). The runs are
tiny (`configs/tiny-test.yaml`); the one most tests read is the session's
`attncli_runs.trained_two_epochs` (a `python -m attncli` subprocess), which test_workflow
also reads; `training.stop_metric`'s run trains in the test's process (`train_here`), the
resumed runs in subprocesses (one in a mount namespace of its own).
"""

import io
import json
import math
import shutil
import subprocess

import numpy as np
import pytest
from attncli_runs import TINY, WARMUP_STEPS, attncli, succeeds, train_before_tensorflow
from attncli_runs import trained_two_epochs  # noqa: F401 (a fixture)
from attncli_runs import attncli_line, in_namespace
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app

from attncli.config.run import load_run_config
from attncli.config.schema import ConfigError
from attncli.config.yaml_files import save_yaml
from attncli.training.stop_metric import StopMetric

PEAK, WARMUP = 0.01, WARMUP_STEPS  # the tiny config's learning rate
SETTINGS = ["--set", f"training.warmup_steps={WARMUP}"]


def events(directory):
    """`{tag: [(step, value), ...]}` of every event file in `directory`, files in name
    order (as TensorBoard reads them); images as their PNG bytes."""
    import tensorflow as tf

    found = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                array = tf.make_ndarray(value.tensor)
                plugin = value.metadata.plugin_data.plugin_name
                # An image summary holds [width, height, png, ...]; its plugin is named once
                # per tag, in the first event, so the array's type tells them apart.
                item = list(array[2:]) if array.dtype == object else float(array)
                found.setdefault(value.tag, []).append((event.step, item))
                assert plugin in ("", "scalars", "images"), plugin
    return found


def train_here(*args):
    """`attncli train ARGS` in this process, which must succeed."""
    # As wide as attncli_runs's subprocesses: Rich wraps no progress line (a path).
    result = CliRunner().invoke(app, ["train", *map(str, args)], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    return result


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def kept_epoch(run):
    return json.loads((run / "model" / "config.json").read_text())["metadata"]["epoch"]


def expected_best(records, key, lower_is_better):
    """Which evaluations are best so far by `key` (strictly better than all before)."""
    flags, best = [], math.inf if lower_is_better else -math.inf
    for record in records:
        value = record[key]
        better = value < best if lower_is_better else value > best
        flags.append(better)
        best = value if better else best
    return flags


@pytest.mark.slow
def test_events_hold_the_training_curves_at_the_global_step(trained_two_epochs):  # noqa: F811
    run, _ = trained_two_epochs
    train = events(run / "events" / "train")
    last_step = records(run)[-1]["step"]
    steps = list(range(10, last_step + 1, 10))
    assert [step for step, _ in train["loss"]] == steps
    assert [step for step, _ in train["target_tokens_per_second"]] == steps
    assert all(rate > 0 for _, rate in train["target_tokens_per_second"])
    assert all(0 < loss < 10 for _, loss in train["loss"])
    assert train["loss"][-1][1] < train["loss"][0][1]
    # The schedule's rate at the step, from its formula in TrainingConfig's docstring.
    rates = [rate for _, rate in train["learning_rate"]]
    expected = [PEAK * min((step + 1) / WARMUP, 1.0) for step in steps]
    np.testing.assert_allclose(rates, expected, rtol=1e-6)


@pytest.mark.slow
def test_events_hold_each_evaluation_and_three_attention_pictures(
        trained_two_epochs):  # noqa: F811
    from PIL import Image

    run, _ = trained_two_epochs
    valid = events(run / "events" / "valid")
    evaluations = records(run)
    for tag, key in (("loss", "valid_loss"), ("nll", "valid_nll"), ("bleu", "bleu"),
                     ("chrf", "chrf")):
        assert [step for step, _ in valid[tag]] == [record["step"] for record in evaluations]
        np.testing.assert_allclose([value for _, value in valid[tag]],
                                   [record[key] for record in evaluations], rtol=1e-6)
    assert sorted(tag for tag in valid if tag.startswith("attention/")) == [
        "attention/1", "attention/2", "attention/3"
    ]
    for number in (1, 2, 3):
        pictures = valid[f"attention/{number}"]
        assert [step for step, _ in pictures] == [record["step"] for record in evaluations]
        for _, [png] in pictures:
            picture = Image.open(io.BytesIO(png))
            assert picture.format == "PNG" and min(picture.size) > 100


@pytest.mark.slow
def test_resume_appends_events_without_repeating_or_going_back(
        trained_two_epochs, tmp_path):  # noqa: F811
    source, _ = trained_two_epochs
    run = tmp_path / "run"
    shutil.copytree(source, run)
    # Back to the checkpoint written before the last evaluation, as if the process had
    # been killed while evaluating: that evaluation is done again, but not written again.
    newest = (run / "checkpoints" / "checkpoint").read_text().split('"')[1]
    for path in (run / "checkpoints").glob(f"{newest}.*"):
        path.unlink()
    succeeds(attncli("train", "--resume", "--run-dir", run, "--set", "training.epochs=3",
                     cwd=tmp_path))
    evaluations = records(run)
    steps = [record["step"] for record in evaluations]
    assert steps[1] == steps[2] < steps[3]  # the repeated evaluation, then epoch 3
    for name in ("train", "valid"):
        assert len(list((run / "events" / name).glob("events.out.tfevents.*"))) == 2
    valid = events(run / "events" / "valid")
    for tag in ("loss", "bleu", "attention/1"):
        assert [step for step, _ in valid[tag]] == sorted(set(steps)), tag
    train = events(run / "events" / "train")
    assert [step for step, _ in train["loss"]] == list(range(10, steps[-1] + 1, 10))
    # The kept model is the best by BLEU, the default stop metric of translation.
    assert [record["best"] for record in evaluations] == expected_best(
        evaluations, "bleu", lower_is_better=False
    )
    best = [record["epoch"] for record in evaluations if record["best"]][-1]
    assert kept_epoch(run) == best


@pytest.mark.slow
def test_stop_metric_loss_keeps_the_lowest_validation_loss(tmp_path):
    run = tmp_path / "run"
    result = train_here(TINY, "--run-dir", run, *SETTINGS,
                        "--set", "training.epochs=4", "--set", "training.stop_metric=loss")
    evaluations = records(run)
    flags = [record["best"] for record in evaluations]
    assert flags == expected_best(evaluations, "valid_loss", lower_is_better=True)
    # The case must tell the two metrics apart, or it would not test the choice.
    assert flags != expected_best(evaluations, "bleu", lower_is_better=False), evaluations
    lowest = min(evaluations, key=lambda record: record["valid_loss"])
    assert kept_epoch(run) == lowest["epoch"]
    assert json.loads(result.stdout)["best"] == {"loss": lowest["valid_loss"]}
    assert json.loads((run / "model" / "config.json").read_text())["metadata"][
        "valid_loss"] == lowest["valid_loss"]


@pytest.mark.slow
def test_a_full_disk_under_the_events_is_reported_once_and_training_goes_on(
        trained_two_epochs, tmp_path):  # noqa: F811
    source, _ = trained_two_epochs
    run = tmp_path / "run"
    shutil.copytree(source, run)
    # The tmpfs is mounted on the run's own folder: a run refuses a symbolic link.
    disk = run / "events"
    shutil.rmtree(disk)
    disk.mkdir()
    # 16 KB: the scalars fit, the attention pictures of the next evaluation do not.
    resume = attncli_line("train", "--resume", "--run-dir", run, "--set", "training.epochs=3")
    in_namespace(f"""
        mount -t tmpfs -o size=16k tmpfs {disk}
        {resume} > resumed.out 2> resumed.err; echo $? > resumed.rc
    """, cwd=tmp_path)
    stderr = (tmp_path / "resumed.err").read_text()
    assert (tmp_path / "resumed.rc").read_text().strip() == "0", stderr
    lines = [line for line in stderr.splitlines() if "TensorBoard events" in line]
    assert len(lines) == 1, stderr
    assert f"are no longer written to {run}/events (" in lines[0]
    assert "did not reach valid/events.out.tfevents." in lines[0]
    assert "the disk may be full); training goes on" in lines[0]
    assert [record["epoch"] for record in records(run)] == [1, 2, 3]
    assert "TensorBoard events are no longer written" in (run / "train.log").read_text()


# training.stop_metric is checked with the configuration, before TensorFlow.


@pytest.mark.parametrize("value, message", [
    ("accuracy", "training.stop_metric must be one of bleu, chrf, loss, alignment, per, wer. "
                 "Received: training.stop_metric='accuracy'"),
    ("wer", "training.stop_metric must be bleu, chrf, loss or alignment for a translation task "
            "(data.format=bundled). Received: training.stop_metric=wer"),
])
def test_a_bad_stop_metric_is_one_line_before_tensorflow(tmp_path, value, message):
    completed = train_before_tensorflow(TINY, "--run-dir", "run",
                                        "--set", f"training.stop_metric={value}", cwd=tmp_path)
    assert "EXIT 2" in completed.stdout and "HEAVY []" in completed.stdout, completed
    result = subprocess.CompletedProcess([], 2, "", completed.stderr)
    assert one_line_error(result).endswith(message)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("task_format, allowed, refused", [
    ("bundled", ("bleu", "chrf", "loss", None), ("per", "wer")),
    ("pronunciations", ("wer", "per", "loss", None), ("bleu", "chrf")),
])
def test_stop_metric_fits_the_task(task_format, allowed, refused):
    base = [f"data.format={task_format}", "data.train=words.txt"] if task_format != "bundled" \
        else []
    for value in allowed:
        written = "null" if value is None else value
        config = load_run_config(TINY, [*base, f"training.stop_metric={written}"])
        default = "bleu" if task_format == "bundled" else "wer"
        assert StopMetric.of(config).name == (value or default)
    for value in refused:
        with pytest.raises(ConfigError, match=f"Received: training.stop_metric={value}$"):
            load_run_config(TINY, [*base, f"training.stop_metric={value}"])


def test_resume_with_another_stop_metric_is_one_line(tmp_path):
    # What the check reads before anything else: the marker and the saved configuration.
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"format": 1, "attncli": "0.1.0"}))
    save_yaml(load_run_config(TINY), run / "config.yaml")
    result = attncli("train", "--resume", "--run-dir", run,
                     "--set", "training.stop_metric=loss", cwd=tmp_path)
    message = one_line_error(result)
    assert message.startswith("Error: --set training.stop_metric cannot change a run that "
                              "is resumed"), message


def test_the_last_written_step_stops_at_a_record_cut_short(tmp_path):
    import tensorflow as tf

    from attncli.training.events import last_written_step

    assert last_written_step(tmp_path) == -1
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for step in (10, 20, 30):
            tf.summary.scalar("loss", 1.0, step=step)
    writer.close()
    [path] = tmp_path.glob("events.out.tfevents.*")
    assert last_written_step(tmp_path) == 30
    # The last record, as a process killed while writing it leaves it.
    path.write_bytes(path.read_bytes()[:-5])
    assert last_written_step(tmp_path) == 20
