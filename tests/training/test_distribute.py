"""`training.distribute`: the configuration, TF_CONFIG, and training on 2 replicas.

The replicas here are 2 logical CPU devices (mirrored) and 2 local worker processes on
127.0.0.1 (multi-worker), training the tiny configuration for one epoch (28 bucketed
batches of 32 sentences down to one) against one device with the same global batch and
seed. Tolerance: 1e-5 relative on the loss of every step. The replicas compute each
sentence's loss and gradient as one device does; only the order of the sums differs
(each batch's gradient is summed from two halves), which moved the loss by at most
2.1e-7 relative over the epoch when this was written. The runs keep a moving average
of the weights (`training.average_decay`), so the validation loss compared is that of
the averaged weights. The one mistake made while
writing the step, embeddings' gradients made dense where Keras keeps `IndexedSlices`,
moved it by 4e-5 from the third step on (by 4e-3 from the second without clipping).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_errors import one_line_error
from process_watch import communicate, run, wait_until
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.schema import ConfigError
from attncli.training.distribution import cluster_role, make_strategy
from attncli.errors import AttncliError
from attncli.config.run import load_run_config
from attncli.cli.train_command import resolve_run

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny-test.yaml"
HELPER = Path(__file__).resolve().parents[1] / "distributed_run.py"
# The runs keep a moving average of the weights: validation then reads the average,
# which must match one device's too, and survive a multi-worker resume.
ONE_EPOCH = ["training.epochs=1", "training.average_decay=0.9"]
RTOL = 1e-5


def tf_config(workers, task_type="worker", index=0, chief=None):
    cluster = {"worker": workers}
    if chief:
        cluster["chief"] = chief
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


# ------------------------------------------------------------------ configuration


def test_distribute_is_validated_with_its_key_path():
    assert load_run_config(TINY).training.distribute == "none"
    config = load_run_config(TINY, ["training.distribute=mirrored", "training.cpu_replicas=2"])
    assert (config.training.distribute, config.training.cpu_replicas) == ("mirrored", 2)
    with pytest.raises(ConfigError, match=r"training\.distribute must be one of none, "
                                          r"mirrored, multi-worker\. "
                                          r"Received: training\.distribute='horovod'"):
        load_run_config(TINY, ["training.distribute=horovod"])
    with pytest.raises(ConfigError, match=r"training: cpu_replicas must be >= 1"):
        load_run_config(TINY, ["training.distribute=mirrored", "training.cpu_replicas=0"])
    with pytest.raises(ConfigError, match=r"training: cpu_replicas splits the CPU for "
                                          r"distribute: mirrored only"):
        load_run_config(TINY, ["training.cpu_replicas=2"])


@pytest.mark.parametrize("value, message", [
    (None, "training.distribute=multi-worker needs TF_CONFIG"),
    ("{not json", "TF_CONFIG is not a cluster spec"),
    ('{"cluster": {"worker": ["a:1"]}}', "TF_CONFIG is not a cluster spec"),
    (tf_config(["a:1", "b:2"], index=2), "task worker 2 is not in the cluster's worker list"),
    (tf_config(["a:1"], task_type="evaluator"), "task type 'evaluator' cannot train"),
    ('{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker", "index": 0}}',
     "the cluster has 'ps' tasks"),
])
def test_a_missing_or_malformed_tf_config_is_one_line(value, message):
    environ = {} if value is None else {"TF_CONFIG": value}
    with pytest.raises(AttncliError) as error:
        cluster_role(environ)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_chief_is_the_chief_task_or_else_worker_0(tmp_path):
    workers = ["a:1", "b:2", "c:3"]
    first = cluster_role({"TF_CONFIG": tf_config(workers, index=0)})
    assert first.is_chief and first.workers == 3
    assert first.directory(tmp_path / "run") == tmp_path / "run"
    second = cluster_role({"TF_CONFIG": tf_config(workers, index=1)})
    assert not second.is_chief
    assert second.directory(tmp_path / "run") == tmp_path / "run.worker-1"
    with_chief = {"TF_CONFIG": tf_config(workers, index=0, chief=["z:9"])}
    assert not cluster_role(with_chief).is_chief
    assert cluster_role(with_chief).workers == 4
    chief = cluster_role({"TF_CONFIG": tf_config(workers, "chief", 0, chief=["z:9"])})
    assert chief.is_chief


def test_make_strategy_none_is_the_default_and_multi_worker_needs_tf_config(monkeypatch):
    import tensorflow as tf

    assert make_strategy("none") is tf.distribute.get_strategy()
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(AttncliError, match="needs TF_CONFIG"):
        make_strategy("multi-worker")


def test_a_worker_keeps_its_run_beside_the_chiefs(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config(["a:1", "b:2"], index=1))
    overrides = ["training.distribute=multi-worker"]
    config, run, role = resolve_run(TINY, overrides, tmp_path / "run", None, False, False)
    assert run.path == tmp_path / "run.worker-1" and not role.is_chief
    assert not (tmp_path / "run").exists()
    assert (run.path / "config.yaml").is_file()
    # The worker resumes its own copy, given the chief's run directory.
    _, resumed, _ = resolve_run(None, [], tmp_path / "run", None, True, False)
    assert resumed.path == run.path


def test_multi_worker_without_tf_config_is_one_line_before_anything_is_written(
        tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    result = CliRunner().invoke(
        app, ["train", str(TINY), "--run-dir", str(tmp_path / "run"),
              "--set", "training.distribute=multi-worker"], prog_name="attncli",
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: training.distribute=multi-worker needs TF_CONFIG")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ training


def environment(**extra):
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", **extra}


def assert_curves_match(losses, reference):
    assert len(losses) == len(reference)
    np.testing.assert_allclose(losses, reference, rtol=RTOL)


def records_by_epoch(run):
    """The last metrics.jsonl record of each epoch (an interrupted one may repeat)."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {record["epoch"]: record for record in records}


@pytest.fixture(scope="module")
def curves(tmp_path_factory):
    """Per-step losses of one device and of 2 mirrored CPU replicas, one process."""
    work = tmp_path_factory.mktemp("curves")
    overrides = [arg for override in ONE_EPOCH for arg in ("--set", override)]
    result = run(
        [sys.executable, str(HELPER), str(TINY), str(work), "--cpu-devices", "2", *overrides],
        env=environment(),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_mirrored_on_two_cpu_replicas_matches_one_device_step_by_step(curves):
    single, mirrored = curves["none"], curves["mirrored"]
    assert (single["replicas"], mirrored["replicas"]) == (1, 2)
    assert len(single["losses"]) > 20
    assert_curves_match(mirrored["losses"], single["losses"])
    for key in ("train_loss", "valid_loss"):
        np.testing.assert_allclose(
            mirrored["records"][-1][key], single["records"][-1][key], rtol=RTOL
        )
    assert mirrored["padding"] == single["padding"]
    # A batch of one sentence leaves the second replica nothing: no NaN, same step.
    one, two = single["single_sentence_step"], mirrored["single_sentence_step"]
    assert one["tokens"] == two["tokens"] > 0
    assert np.isfinite(two["loss"])
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=RTOL)


def run_attncli(*args, cwd, env=None):
    """`python -m attncli ARGS` in `cwd`, whatever its exit code."""
    return run([sys.executable, "-m", "attncli", *map(str, args)], cwd=cwd,
               env=env or environment())


def attncli(*args, cwd, env=None):
    result = run_attncli(*args, cwd=cwd, env=env)
    assert result.returncode == 0, f"attncli {args} exited {result.returncode}:\n{result.stderr}"
    return result


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_cli_trains_mirrored_on_split_cpu(curves, tmp_path):
    result = attncli("train", TINY, "--run-dir", "run", "--set", "training.epochs=1",
                     "--set", "training.distribute=mirrored", "--set", "training.cpu_replicas=2",
                     cwd=tmp_path)
    assert json.loads(result.stdout)["epochs"] == 1
    record = records_by_epoch(tmp_path / "run")[1]
    np.testing.assert_allclose(
        record["train_loss"], curves["none"]["records"][0]["train_loss"], rtol=RTOL
    )
    assert (tmp_path / "run" / "model" / "config.json").is_file()


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def start_workers(cwd, *args, own_args=lambda index: []):
    """Two `attncli train` processes of one multi-worker cluster on 127.0.0.1.

    Both get `args`; worker `index` also gets `own_args(index)`.
    """
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        env = environment(TF_CONFIG=tf_config(workers, index=index))
        command = ["train", *args, *own_args(index)]
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "attncli", *map(str, command)], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    return processes


def finish(processes):
    """Wait for every process while they work together (`process_watch`: the workers
    wait for each other); kill them all if they hang. Returns outputs."""
    outputs = []
    try:
        for process in processes:
            stdout, stderr = communicate(process, together=processes)
            outputs.append((process.returncode, stdout, stderr))
    finally:
        for process in processes:
            process.kill()
            process.wait()
    return outputs


MULTI_WORKER = ["--set", "training.distribute=multi-worker",
                *[arg for override in ONE_EPOCH for arg in ("--set", override)]]


@pytest.fixture(scope="module")
def multi_worker_run(tmp_path_factory):
    """A multi-worker run of one epoch, stopped by SIGTERM to worker 1 once the chief has
    written its first checkpoint, then resumed by both to the end: (work, stopped,
    resumed), each the workers' (exit code, stdout, stderr). Both halves of the epoch
    are trained by the two workers; the tests compare the whole with one device."""
    work = tmp_path_factory.mktemp("multi-worker")
    args = [TINY, "--run-dir", "runs/tiny", *MULTI_WORKER, "--set", "training.checkpoint_every=3"]
    processes = start_workers(work, *args)
    index = work / "runs" / "tiny" / "checkpoints" / "checkpoint"
    try:
        wait_until(index.exists, *processes)
        processes[1].send_signal(signal.SIGTERM)
    finally:
        stopped = finish(processes)
    resumed = finish(start_workers(work, "--resume", "--run-dir", "runs/tiny"))
    return work, stopped, resumed


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_two_local_workers_match_one_device_and_only_the_chief_writes_the_run(
        curves, multi_worker_run):
    work, _, outputs = multi_worker_run
    run, worker = work / "runs" / "tiny", work / "runs" / "tiny.worker-1"
    for code, _, stderr in outputs:
        assert code == 0, stderr
    [(_, chief_out, _), (_, worker_out, worker_err)] = outputs
    assert json.loads(chief_out)["epochs"] == 1 and worker_out == ""
    assert "worker 1 of 2 workers" in worker_err
    reference = curves["none"]["records"][0]
    record = records_by_epoch(run)[1]
    for key in ("train_loss", "valid_loss"):
        np.testing.assert_allclose(record[key], reference[key], rtol=RTOL)
    assert record["step"] == reference["step"]
    assert json.loads(chief_out)["last"]["step"] == reference["step"]
    for name in ("metrics.jsonl", "train.log", "model/config.json", "checkpoints/checkpoint"):
        assert (run / name).is_file(), name
    for name in ("train", "valid"):
        assert list((run / "events" / name).glob("events.out.tfevents.*")), name
    assert (worker / "checkpoints" / "checkpoint").is_file()
    for name in ("metrics.jsonl", "train.log", "model", "events"):
        assert not (worker / name).exists(), name


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_sigterm_to_one_worker_stops_both_and_both_resume(curves, multi_worker_run):
    work, stopped, resumed = multi_worker_run
    for code, _, stderr in stopped:
        assert code == 143, stderr
        assert "attncli train --resume --run-dir runs/tiny" in stderr
    assert (work / "runs" / "tiny.worker-1" / "checkpoints" / "checkpoint").is_file()
    for code, _, stderr in resumed:
        assert code == 0, stderr
        assert "resuming from" in stderr
    # The resumed run ends where one device does (and so where an uninterrupted one does).
    expected = curves["none"]["records"][0]
    record = records_by_epoch(work / "runs" / "tiny")[1]
    for key in ("train_loss", "valid_loss", "step"):
        np.testing.assert_allclose(record[key], expected[key], rtol=RTOL)


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_workers_given_different_settings_stop_with_one_line(tmp_path):
    """A `--set` given to one worker only: both stop before the first step."""
    processes = start_workers(tmp_path, TINY, "--run-dir", "runs/tiny", *MULTI_WORKER,
                              own_args=lambda index: ["--set", f"training.seed={index}"])
    for code, stdout, stderr in finish(processes):
        error = one_line_error(subprocess.CompletedProcess([], code, stdout, stderr))
        assert "the workers do not train the same run" in error
    assert not (tmp_path / "runs" / "tiny" / "checkpoints" / "checkpoint").exists()


@pytest.mark.slow
@pytest.mark.xdist_group("distribute")
def test_resume_with_one_worker_missing_its_checkpoints_is_one_line(multi_worker_run, tmp_path):
    work, _, _ = multi_worker_run
    shutil.copytree(work / "runs", tmp_path / "runs")
    shutil.rmtree(tmp_path / "runs" / "tiny.worker-1" / "checkpoints")
    outputs = finish(start_workers(tmp_path, "--resume", "--run-dir", "runs/tiny"))
    for code, stdout, stderr in outputs:
        error = one_line_error(subprocess.CompletedProcess([], code, stdout, stderr))
        assert "some workers hold checkpoints of this run and others none" in error


@pytest.mark.slow
def test_a_worker_whose_port_is_taken_stops_with_one_line(tmp_path):
    """TensorFlow cannot start the worker's server: one line naming TF_CONFIG, nothing run."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        workers = [f"127.0.0.1:{taken.getsockname()[1]}", f"127.0.0.1:{free_ports(1)[0]}"]
        result = run_attncli(
            "train", TINY, "--run-dir", "run", "--set", "training.distribute=multi-worker",
            cwd=tmp_path, env=environment(TF_CONFIG=tf_config(workers, index=0)),
        )
    error = one_line_error(result)
    assert error.startswith("Error: cannot start the multi-worker strategy (")
    assert "check TF_CONFIG's addresses and that its ports are free" in error
    assert not (tmp_path / "run" / "checkpoints" / "checkpoint").exists()
