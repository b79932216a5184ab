"""A run directory under stress, through the command: `python -m attncli` subprocesses.

One writer per run, damaged checkpoints named and never silently replaced, leftovers
of a killed write cleaned up, a full disk and a read-only folder reported in one line
with what is kept. The session's tiny run is trained once; each test works on a copy.
A resume that must succeed runs in the test's process (`resumed`), and so do one refused
for want of a checkpoint and the readers of a run another process trains (`read`): what
they say and leave is the point there, not their process.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import process_watch
import pytest
from attncli_runs import (  # noqa: F401  (run and trained are fixtures)
    ENV, TINY, attncli, attncli_line, in_namespace, run, start, stop, train_before_tensorflow,
    trained, wait_for,
)
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.training.run_lock import lock_run, unlock_run


def holder_script(directory, seconds):
    """Python code that locks `directory` as attncli train does, then waits."""
    return textwrap.dedent(f"""
        import sys, time
        from attncli.training.run_lock import lock_run
        lock_run({str(directory)!r})
        print("locked", flush=True)
        time.sleep({seconds})
    """)


# 1. One writer per run directory.


def test_a_second_writer_is_refused_and_told_who_writes(tmp_path):
    directory = tmp_path / "run"
    directory.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", holder_script(directory, 600)], env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        for args in (["train", TINY, "--run-dir", directory],
                     ["train", TINY, "--run-dir", directory, "--overwrite"]):
            message = one_line_error(attncli(*args, cwd=tmp_path))
            assert f"pid {holder.pid} on " in message and "another attncli train" in message
        assert sorted(path.name for path in directory.iterdir()) == [".writer.lock"]
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the lock of the killed holder: nothing is stale.
    assert lock_run(directory)
    unlock_run(directory)


def locks_in_another_process(directory):
    """Whether a second process can lock `directory` now, as attncli train would."""
    other = process_watch.run([sys.executable, "-c", holder_script(directory, 0)], env=ENV)
    return other.returncode == 0 and other.stdout == "locked\n"


def test_a_resume_refused_in_process_leaves_the_run_free(run):
    result = CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run),
                                      "--set", "model.units=8"])
    assert result.exit_code == 2
    assert "--set model.units cannot change a run that is resumed" in result.output
    assert locks_in_another_process(run)


def read(args):
    """`attncli ARGS` in this process, which must succeed."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_training_run_refuses_other_writers_and_serves_readers(run, tmp_path):
    newest = newest_checkpoint(run)
    longer = start("train", "--resume", "--run-dir", run, "--set", "training.epochs=50",
                   cwd=tmp_path)
    try:
        # Once it has trained and written a checkpoint, the writer is stopped (SIGSTOP):
        # it holds the run as it did, and uses no CPU while the others are tried.
        wait_for(lambda: newest_checkpoint(run) != newest, longer)
        longer.send_signal(signal.SIGSTOP)
        assert f'"pid": {longer.pid},' in (run / ".writer.lock").read_text()
        for args in (["train", "--resume", "--run-dir", run],
                     ["train", TINY, "--run-dir", run, "--overwrite"],
                     ["train", TINY, "--run-dir", run]):
            message = one_line_error(attncli(*args, cwd=tmp_path))
            assert f"pid {longer.pid} on " in message, message
        # --overwrite deleted nothing under the live run.
        assert (run / "model" / "model.weights.h5").is_file()
        assert (run / "checkpoints" / "checkpoint").is_file()
        # Readers take no lock: this process reads the run its writer holds.
        translated = read(["translate", str(run), "Tengo hambre."])
        assert translated.stdout.strip()
        read(["inspect-weights", str(run), "--params"])
    finally:
        longer.send_signal(signal.SIGCONT)
        _, stderr = stop(longer)
    assert longer.returncode == 143, stderr
    assert "checkpoint saved" in stderr


# 8. A configuration is checked before TensorFlow is imported.


def test_a_config_error_is_reported_before_tensorflow_is_imported(tmp_path):
    completed = train_before_tensorflow(TINY, "--run-dir", "run", "--set", "model.units=many",
                                        cwd=tmp_path)
    assert "EXIT 2" in completed.stdout and "HEAVY []" in completed.stdout, completed
    assert "model.units" in completed.stderr
    assert not (tmp_path / "run").exists()


# 2. A damaged checkpoint index never starts a run over.


def newest_checkpoint(run):
    return (run / "checkpoints" / "checkpoint").read_text().split('"')[1]


def resumed(run, *args):
    """`attncli train --resume --run-dir RUN ARGS` in this process, which must succeed."""
    # As wide as attncli_runs's subprocesses: Rich wraps no progress line (a path).
    result = CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run), *args],
                                env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    return result


def epochs_recorded(run):
    return [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_index_naming_a_missing_checkpoint_resumes_from_the_files(run):
    newest = newest_checkpoint(run)
    (run / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-99"\nall_model_checkpoint_paths: "ckpt-99"\n'
    )
    # The kept model's figure is out of reach: no epoch may replace it.
    config = json.loads((run / "model" / "config.json").read_text())
    config["metadata"]["bleu"] = 99.0
    (run / "model" / "config.json").write_text(json.dumps(config))
    weights = (run / "model" / "model.weights.h5").read_bytes()
    result = resumed(run, "--set", "training.epochs=2")
    assert "names ckpt-99, which is not there (kept as checkpoint.damaged)" in result.stderr
    assert f"resuming from {run}/checkpoints/{newest}: epoch 2, batch 0" in result.stderr
    assert "from the beginning" not in result.stderr
    assert epochs_recorded(run) == [1, 2]
    assert (run / "model" / "model.weights.h5").read_bytes() == weights
    assert "ckpt-99" in (run / "checkpoints" / "checkpoint.damaged").read_text()
    # Training in this process has returned: another process may write the run now.
    assert locks_in_another_process(run)


@pytest.mark.slow
def test_an_unreadable_index_is_rebuilt_and_named(run):
    newest = newest_checkpoint(run)
    (run / "checkpoints" / "checkpoint").write_bytes(bytes(range(256)) * 2)
    result = resumed(run)
    assert "checkpoints/checkpoint cannot be read" in result.stderr
    assert f"resuming from {run}/checkpoints/{newest}: the run is finished" in result.stderr
    assert newest_checkpoint(run) == newest


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(run):
    newest = newest_checkpoint(run)
    (run / "checkpoints" / f"{newest}.index").write_bytes(b"garbage" * 50)
    weights = (run / "model" / "model.weights.h5").read_bytes()
    result = resumed(run)
    assert f"skipped damaged checkpoint(s): {run}/checkpoints/{newest}:" in result.stderr
    older = int(newest.split("-")[1]) - 1
    assert f"resuming from {run}/checkpoints/ckpt-{older}:" in result.stderr
    # The older checkpoint repeats epoch 1's evaluation; an equal figure keeps the model.
    assert (run / "model" / "model.weights.h5").read_bytes() == weights


@pytest.mark.slow
def test_a_model_without_checkpoints_is_not_trained_over(run):
    shutil.rmtree(run / "checkpoints")
    weights = (run / "model" / "model.weights.h5").read_bytes()
    # In this process: what the refusal leaves is the point, not its process.
    message = one_line_error(CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run)],
                                                env={"COLUMNS": "500"}))
    assert "has a best model but no checkpoint to continue from" in message
    assert (run / "model" / "model.weights.h5").read_bytes() == weights


# 5. A full disk, a read-only folder, a model too large for memory.


@pytest.mark.slow
def test_a_full_disk_keeps_the_last_checkpoint_and_resumes_from_it(trained, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    resume = attncli_line("train", "--resume", "--run-dir", disk / "run",
                          "--set", "training.epochs=2")
    # A disk with the run and 200 KB free: the next checkpoint (650 KB) cannot be written.
    # What the failed resume left is copied out whole, and resumed in this process.
    in_namespace(f"""
        mount -t tmpfs -o size=64m tmpfs {disk}
        cp -r {trained} {disk}/run
        used=$(df -k --output=used {disk} | tail -1)
        mount -o remount,size=$((used + 200))k {disk}
        {resume} > full.out 2> full.err || echo $? > full.rc
        cp -a {disk}/run left
    """, cwd=tmp_path)
    full = subprocess.CompletedProcess([], int((tmp_path / "full.rc").read_text()), "",
                                       (tmp_path / "full.err").read_text())
    message = one_line_error(full)
    assert "no space left on the device" in message, message
    newest = newest_checkpoint(trained)
    assert f"the last complete checkpoint, {newest} (epoch 2, batch 0), and the best model " \
           "are kept" in message, message
    assert "attncli train --resume --run-dir" in message
    left = tmp_path / "left"
    index = (trained / "checkpoints" / "checkpoint").read_text()
    assert (left / "checkpoints" / "checkpoint").read_text() == index
    assert list((left / "checkpoints").glob("ckpt-*_temp*"))  # half written
    result = resumed(left, "--set", "training.epochs=2")
    assert f"resuming from {left}/checkpoints/{newest}: epoch 2, batch 0" in result.stderr
    assert "_temp" in result.stderr  # the half-written checkpoint was found and removed
    assert not list((left / "checkpoints").glob("ckpt-*_temp*"))
    assert epochs_recorded(left) == [1, 2]


@pytest.mark.slow
def test_a_read_only_run_directory_is_one_line(trained, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    commands = {
        "resume": ("train", "--resume", "--run-dir", disk / "run"),
        "overwrite": ("train", TINY, "--run-dir", disk / "run", "--overwrite"),
        "new": ("train", TINY, "--run-dir", disk / "new"),
        "empty": ("train", TINY, "--run-dir", disk / "empty"),
    }
    in_namespace(f"""
        mount -t tmpfs -o size=64m tmpfs {disk}
        cp -r {trained} {disk}/run
        mkdir {disk}/empty
        mount -o remount,ro {disk}
    """ + "\n".join(
        f"{attncli_line(*args)} 2> {name}.err || echo $? > {name}.rc"
        for name, args in commands.items()
    ), cwd=tmp_path)
    for name in commands:
        result = subprocess.CompletedProcess([], int((tmp_path / f"{name}.rc").read_text()), "",
                                             (tmp_path / f"{name}.err").read_text())
        assert "Read-only file system" in one_line_error(result), name


@pytest.mark.slow
def test_a_model_too_large_for_memory_is_refused_before_allocating(tmp_path):
    result = attncli("train", TINY, "--run-dir", "runs/huge",
                     "--set", "model.embedding_dim=1000000000", cwd=tmp_path)
    message = one_line_error(result)
    assert "too large for this machine" in message and "parameters" in message
    assert "reading the data" not in result.stderr  # refused before the data is read
    assert list(tmp_path.iterdir()) == []  # the run directory it created is gone


@pytest.mark.slow
def test_a_failed_save_is_one_line_naming_what_is_kept(run, monkeypatch):
    """The same, where no tmpfs can be mounted: TensorFlow's error injected into the save."""
    import tensorflow as tf
    from typer.testing import CliRunner

    from attncli.cli.app import app

    def full_disk(manager, *args, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{manager.directory}/ckpt-8_temp/part-00000-of-00001.data-00000-of-"
            "00001.tempstate1; No space left on device [Op:SaveV2]"
        )

    index = (run / "checkpoints" / "checkpoint").read_text()
    model = (run / "model" / "model.weights.h5").read_bytes()
    monkeypatch.setattr(tf.train.CheckpointManager, "save", full_disk)
    result = CliRunner().invoke(
        app, ["train", "--resume", "--run-dir", str(run), "--set", "training.epochs=2"]
    )
    message = one_line_error(result)
    newest = index.split('"')[1]
    assert f"the last complete checkpoint, {newest} (epoch 2, batch 0), and the best model " \
           "are kept" in message, message
    assert (run / "checkpoints" / "checkpoint").read_text() == index
    assert (run / "model" / "model.weights.h5").read_bytes() == model


@pytest.mark.slow
def test_memory_running_out_while_training_is_one_line(run):
    import tensorflow as tf

    from attncli.cli.train_failures import explain
    from attncli.training.run_directory import RunDirectory

    error = tf.errors.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[32,1000000] [Op:MatMul]"
    )
    failure = explain(error, RunDirectory(run), "attncli train --resume --run-dir RUN")
    message = str(failure)
    assert message.startswith("out of memory while training; the last complete checkpoint, ")
    assert "make data.batch_size" in message and "\n" not in message
    assert explain(ValueError("a bug"), RunDirectory(run), "") is None


# 7. What a killed writer left is cleared at the next start, under the lock.


def leave_interrupted_writes(run):
    """The files a writer killed in the middle of each of its writes leaves behind."""
    (run / "checkpoints" / "ckpt-99_temp").mkdir()
    (run / "checkpoints" / "ckpt-99_temp" / "part-00000-of-00001.index").write_bytes(b"\0" * 64)
    (run / "checkpoints" / "checkpoint.tmp5d41402abc4b2a76").write_text("model_checkpoint_")
    (run / ".config.yaml.tmp").write_text("name: ha")
    shutil.copytree(run / "model", run / ".model.old.k2j3h4g5")
    (run / ".model.a1b2c3d4").mkdir()
    (run / ".model.a1b2c3d4" / "config.json").write_text("{")
    return [".model.a1b2c3d4", ".model.old.k2j3h4g5", "checkpoints/ckpt-99_temp",
            "checkpoints/checkpoint.tmp5d41402abc4b2a76", ".config.yaml.tmp"]


@pytest.mark.slow
def test_leftovers_of_killed_writes_are_removed_and_named(run):
    leftovers = leave_interrupted_writes(run)
    weights = (run / "model" / "model.weights.h5").read_bytes()
    result = resumed(run)
    [line] = [line for line in result.stderr.splitlines() if "interrupted write" in line]
    assert all(name in line for name in leftovers), line
    assert not any((run / name).exists() for name in leftovers)
    assert (run / "model" / "model.weights.h5").read_bytes() == weights


def test_a_model_save_killed_between_its_moves_is_completed_first(run, tmp_path):
    # Killed after the old model was moved aside, before the new one was moved in.
    os.replace(run / "model", run / ".model.old.k2j3h4g5")
    shutil.copytree(run / ".model.old.k2j3h4g5", run / ".model.ready.a1b2c3d4")
    (run / ".model.ready.a1b2c3d4" / "marker").write_text("the new one")
    # A new run must not take the place of this one: its best model is restored first.
    message = one_line_error(attncli("train", TINY, "--run-dir", run, cwd=tmp_path))
    assert "already holds a run" in message
    assert (run / "model" / "marker").read_text() == "the new one"
    assert not (run / ".model.old.k2j3h4g5").exists()


def test_a_model_save_killed_before_the_old_model_moved_aside_keeps_the_new_one(run, tmp_path):
    # Killed after the new model was renamed ready, before the old one was moved aside.
    shutil.copytree(run / "model", run / ".model.ready.c3d4e5f6")
    (run / ".model.ready.c3d4e5f6" / "marker").write_text("the new one")
    message = one_line_error(attncli("train", TINY, "--run-dir", run, cwd=tmp_path))
    assert "already holds a run" in message
    assert (run / "model" / "marker").read_text() == "the new one"
    assert not list(run.glob(".model.*"))


def test_a_first_save_killed_with_every_file_present_is_not_put_back(run, tmp_path):
    # The first save of a run, killed while writing its last file: every name is there.
    shutil.copytree(run / "model", run / ".model.b2c3d4e5")
    shutil.rmtree(run / "model")
    weights = run / ".model.b2c3d4e5" / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[:100])
    message = one_line_error(attncli("train", TINY, "--run-dir", run, cwd=tmp_path))
    assert "already holds a run" in message
    assert not (run / "model").exists()
    assert not (run / ".model.b2c3d4e5").exists()


def test_only_the_old_model_of_a_killed_save_is_put_back(run, tmp_path):
    os.replace(run / "model", run / ".model.old.k2j3h4g5")
    (run / ".model.a1b2c3d4").mkdir()  # the new one, half written
    (run / ".model.a1b2c3d4" / "config.json").write_text("{")
    message = one_line_error(attncli("train", TINY, "--run-dir", run, cwd=tmp_path))
    assert "already holds a run" in message
    assert (run / "model" / "model.weights.h5").is_file()
    assert not (run / ".model.a1b2c3d4").exists()
