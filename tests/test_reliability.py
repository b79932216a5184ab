"""A run directory under stress, through the command: `python -m attncli` subprocesses.

One writer per run, damaged files named and never silently replaced, leftovers of a
killed write cleaned up, and every bad input one line. One tiny run is trained per
module (`configs/tiny-test.yaml`, one epoch); each test works on a copy of it.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_errors import one_line_error

from attncli.training.run_lock import lock_run, unlock_run

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny-test.yaml"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


def attncli(*args, cwd, stdin=None, timeout=300):
    """`python -m attncli ARGS` in `cwd`, whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "attncli", *map(str, args)],
        cwd=cwd, input=stdin, capture_output=True, text=True, timeout=timeout, env=ENV,
    )


def succeeds(result):
    assert result.returncode == 0, result.stderr
    return result


def start(*args, cwd):
    """`python -m attncli ARGS` started in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "attncli", *map(str, args)], cwd=cwd, env=ENV,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(condition, process=None, seconds=240):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended first:\n{process.communicate()[1]}")
        time.sleep(0.2)
    raise AssertionError("timed out")


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=120)
    finally:
        process.kill()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny run, one epoch, trained to the end."""
    work = tmp_path_factory.mktemp("trained")
    succeeds(attncli("train", TINY, "--run-dir", "run", "--set", "training.epochs=1", cwd=work))
    return work / "run"


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, for a test to change."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


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


@pytest.mark.slow
def test_training_run_refuses_other_writers_and_serves_readers(run, tmp_path):
    longer = start("train", "--resume", "--run-dir", run, "--set", "training.epochs=50",
                   cwd=tmp_path)
    lock = run / ".writer.lock"
    try:
        wait_for(lambda: f'"pid": {longer.pid},' in lock.read_text(), longer)
        for args in (["train", "--resume", "--run-dir", run],
                     ["train", TINY, "--run-dir", run, "--overwrite"],
                     ["train", TINY, "--run-dir", run]):
            message = one_line_error(attncli(*args, cwd=tmp_path))
            assert f"pid {longer.pid} on " in message, message
        # --overwrite deleted nothing under the live run.
        assert (run / "model" / "model.weights.h5").is_file()
        assert (run / "checkpoints" / "checkpoint").is_file()
        # Readers take no lock.
        translated = succeeds(attncli("translate", run, "Tengo hambre.", cwd=tmp_path))
        assert translated.stdout.strip()
        succeeds(attncli("inspect-weights", run, "--params", cwd=tmp_path))
    finally:
        _, stderr = stop(longer)
    assert longer.returncode == 143, stderr
    assert "checkpoint saved" in stderr


# 8. A configuration is checked before TensorFlow is imported.


def test_a_config_error_is_reported_before_tensorflow_is_imported(tmp_path):
    code = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["attncli", "train", {str(TINY)!r}, "--run-dir", "run",
                    "--set", "model.units=many"]
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            print("EXIT", exit.code)
        print("HEAVY", sorted(name for name in ("tensorflow", "keras") if name in sys.modules))
    """)
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=120, cwd=tmp_path, env=ENV)
    assert "EXIT 2" in completed.stdout and "HEAVY []" in completed.stdout, completed
    assert "model.units" in completed.stderr
    assert not (tmp_path / "run").exists()


# 3. YAML aliases that multiply a document, and values too long to echo.


def alias_bomb(levels, leaf="lol"):
    """A YAML document whose last key, through nested aliases, stands for 9**levels leaves."""
    lines = [f"l0: &l0 [{', '.join([repr(leaf)] * 9)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return lines, f"[{', '.join([f'*l{levels - 1}'] * 9)}]"


def test_an_alias_bomb_in_a_config_is_refused_in_one_short_line(tmp_path):
    lines, bomb = alias_bomb(7)
    config = tmp_path / "bomb.yaml"
    # The aliases sit under keys the schema would reject, and the bomb in data.format.
    config.write_text("\n".join(f"# {line}" for line in lines) + "\n" + "\n".join(
        ["anchors:"] + [f"  {line}" for line in lines] + ["data:", f"  format: {bomb}"]
    ) + "\n")
    message = one_line_error(attncli("train", config, cwd=tmp_path))
    assert "aliases expand the document past 100,000 values" in message
    assert len(message) < 300


def test_an_alias_bomb_in_a_score_demo_input_is_refused(tmp_path):
    lines, bomb = alias_bomb(7, leaf=1)
    document = tmp_path / "bomb.yaml"
    document.write_text("\n".join(["parameters:"] + [f"  {line}" for line in lines]
                                  + [f"query: {bomb}", "keys: [[1]]"]) + "\n")
    message = one_line_error(attncli("score-demo", "--input", document, cwd=tmp_path))
    assert "aliases expand the document past 100,000 values" in message


def test_a_value_that_contains_itself_is_refused(tmp_path):
    config = tmp_path / "loop.yaml"
    config.write_text("data: &data\n  format: [*data]\n")
    assert "contains itself" in one_line_error(attncli("train", config, cwd=tmp_path))


@pytest.mark.parametrize("override", ["data.format=" + "x" * 5000,
                                      "data.source.level=[" + "1, " * 3000 + "1]"])
def test_a_long_value_is_echoed_shortened(tmp_path, override):
    message = one_line_error(attncli("train", TINY, "--set", override, cwd=tmp_path))
    assert len(message) < 300 and ("…" in message or "..." in message), message
