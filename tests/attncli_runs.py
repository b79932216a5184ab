"""Running attncli as a user does, for the end-to-end tests: `python -m attncli` subprocesses.

`trained` (import it into a test module) is one tiny run (`configs/tiny-test.yaml`, one
epoch) trained once a session for every module; `run` gives each test its own copy of it.
`trained_two_epochs` is the tiny config's own two epochs with a learning-rate warmup,
also trained once a session (test_workflow and test_events read it).
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import process_watch
import pytest
from built_once import built_once

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny-test.yaml"
# `trained_two_epochs`' learning-rate warmup: over its first 40 steps (of 56).
WARMUP_STEPS = 40
# Wide enough that Rich never wraps a progress line (a path) on stderr.
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "500"}


def attncli(*args, cwd, stdin=None):
    """`python -m attncli ARGS` in `cwd`, whatever its exit code, waiting as long as it
    works (`process_watch`)."""
    return process_watch.run([sys.executable, "-m", "attncli", *map(str, args)], cwd=cwd,
                             input=stdin, env=ENV)


def train_before_tensorflow(*args, cwd):
    """`attncli train ARGS` in a Python that then prints `EXIT code` and `HEAVY [...]`,
    the heavy modules (TensorFlow, Keras) imported by then, on stdout."""
    code = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["attncli", "train", *{[str(arg) for arg in args]!r}]
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            print("EXIT", exit.code)
        print("HEAVY", sorted(name for name in ("tensorflow", "keras") if name in sys.modules))
    """)
    return process_watch.run([sys.executable, "-c", code], cwd=cwd, env=ENV)


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
    """Polls `condition()` until it holds: while `process` works (`process_watch`), failing
    if it ends first; without a process (a server in a thread), for `seconds`."""
    if process is not None:
        return process_watch.wait_until(condition, process)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def stop(process):
    """SIGTERM to `process`, then its `(stdout, stderr)` once it has ended."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process_watch.communicate(process)
    finally:
        process.kill()


def train_tiny(work):
    succeeds(attncli("train", TINY, "--run-dir", "run", "--set", "training.epochs=1", cwd=work))


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """One tiny run, one epoch, trained to the end: once a session, shared by every
    module and worker, so read it only (`run` is a copy to change)."""
    return built_once(tmp_path_factory, "tiny-one-epoch", train_tiny) / "run"


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, for a test to change."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def train_tiny_two_epochs(work):
    result = succeeds(attncli("train", TINY, "--run-dir", "run",
                              "--set", f"training.warmup_steps={WARMUP_STEPS}", cwd=work))
    (work / "train.stdout").write_text(result.stdout, "utf-8")
    (work / "train.stderr").write_text(result.stderr, "utf-8")


@pytest.fixture(scope="session")
def trained_two_epochs(tmp_path_factory):
    """The tiny config's two epochs with a learning-rate warmup of `WARMUP_STEPS`,
    trained to the end once a session: `(run, result)`, `result` the training's `stdout`
    and `stderr`. Read it only; copy it to change it."""
    work = built_once(tmp_path_factory, "tiny-two-epochs-warmup", train_tiny_two_epochs)
    result = SimpleNamespace(stdout=(work / "train.stdout").read_text("utf-8"),
                             stderr=(work / "train.stderr").read_text("utf-8"))
    return work / "run", result


# ---- attncli in this process ------------------------------------------------------------


def in_process(*args):
    """`attncli ARGS` in this process: a fine-tuning is no test of a process (`attncli
    train --init-from` runs as one in the refusals below). This process then holds the
    run's lock, as a writer does until it ends, so a run trained here is resumed here."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    # As wide as the subprocesses above: Rich wraps no progress line (a path).
    return CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "500"})


def succeeds_here(result):
    assert result.exit_code == 0, result.output
    return result


def training_parts(config_path, run_dir, resume=False, overrides=(), init_from=None):
    """The `TrainingParts` `attncli train` makes of these arguments, and what it said."""
    from attncli.cli.train_command import resolve_run
    from recorder import Recorder
    from attncli.training.builder import build_training

    config, run, _ = resolve_run(config_path, list(overrides), run_dir=run_dir, data_dir=None,
                                 resume=resume, overwrite=False, init_from=init_from)
    recorder = Recorder()
    try:
        return build_training(config, run, recorder, resume=resume), recorder.messages
    finally:
        run.unlock()


def build_finetuning(base, run_dir, resume=False, overrides=()):
    """The `TrainingParts` of a tiny run (with `overrides`) started from `base`, as
    `attncli train` makes them, and what it said."""
    from attncli.cli.train_command import resolve_run
    from recorder import Recorder
    from attncli.training.builder import build_training

    config, run, _ = resolve_run(
        None if resume else TINY, [] if resume else list(overrides), run_dir=run_dir,
        data_dir=None, resume=resume, overwrite=False, init_from=None if resume else base,
    )
    recorder = Recorder()
    return build_training(config, run, recorder, resume=resume), recorder


# ---- attncli in a shell of its own ------------------------------------------------------


def in_namespace(script, cwd):
    """Run the bash `script` as root of a user and mount namespace of its own, where it
    may mount a small tmpfs (a disk that fills, a folder made read-only); skip the
    test where the machine does not allow that."""
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         "mount -t tmpfs -o size=1m tmpfs /mnt || mount -t tmpfs -o size=1m tmpfs /tmp"],
        capture_output=True,
    ) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a user namespace here")
    completed = process_watch.run(
        ["unshare", "--user", "--map-root-user", "--mount", "bash", "-euc", script],
        cwd=cwd, env=ENV,
    )
    assert completed.returncode == 0, completed.stderr
    return completed


def attncli_line(*args):
    """The shell words of `python -m attncli ARGS`."""
    return " ".join([sys.executable, "-m", "attncli", *(f"'{arg}'" for arg in args)])
