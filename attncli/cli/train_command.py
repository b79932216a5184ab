"""`attncli train [CONFIG]`: read the configuration, prepare the run, train.

Progress goes to stderr; the summary of the run (where the model is, its best
figures) goes to stdout. In a multi-worker run every machine runs the same command;
the chief trains in the run directory, every other worker in its own beside it
(`attncli.training.distribution`), and only the chief prints the summary.
"""

import copy
import dataclasses
import json
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from attncli.cli.heatmap import heatmap_png
from attncli.cli.options import import_tensorflow, stderr_console
from attncli.cli.progress import TrainingDisplay
from attncli.cli.train_failures import explain
from attncli.config.run import load_run_config, run_config_from_mapping
from attncli.config.shipped import resolve_config
from attncli.config.yaml_files import apply_overrides, load_yaml, save_yaml
from attncli.data.sources import data_paths
from attncli.errors import AttncliError, first_line
from attncli.training.distribution import cluster_role, make_strategy
from attncli.training.init_from import (
    check_init_from, read_record, take_tokenization, write_record,
)
from attncli.training.run_directory import RunDirectory

# What the shell reports for a process ended by these signals: 128 + the number.
_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


# What may change when a run is resumed: how long it goes on, nothing it has learnt from.
RESUMABLE_OVERRIDES = ("training.epochs", "training.max_minutes", "training.patience")


def command(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Argument(metavar="CONFIG", help="YAML run configuration, or the name of a shipped "
                       "one (attncli configs lists them).", show_default="the shipped default"),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override one key: --set model.score=general --set training.epochs=3.",
        ),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Where the run is written.", show_default="runs/NAME"),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Folder the config's relative data paths are read from.",
                     show_default="the config's data.directory, else the current folder"),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted run from its checkpoint.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start the run again, replacing it.")
    ] = False,
    init_from: Annotated[
        Path | None,
        typer.Option("--init-from", metavar="RUN",
                     help="Fine-tune: start from the model RUN kept and its vocabularies "
                     "(same model and tokenization settings, or RUN's recurrent encoder "
                     "grown into a cascade); the optimizer starts fresh."),
    ] = None,
):
    """Train an attention encoder-decoder; progress on stderr, summary on stdout.

    With no CONFIG: Spanish to English on the bundled Tatoeba pairs, about ten
    minutes on a laptop CPU. Ctrl-C saves a checkpoint; --resume continues.
    """
    code = train(
        config_path=config, overrides=overrides or [], run_dir=run_dir, data_dir=data_dir,
        resume=resume, overwrite=overwrite, console=stderr_console(),
        load_tensorflow=lambda: import_tensorflow(ctx), init_from=init_from,
    )
    raise typer.Exit(code=code)


def resolve_run(config_path, overrides, run_dir, data_dir, resume, overwrite,
                load_tensorflow=None, init_from=None):
    """The configuration, run directory and cluster role of a `train` call.

    A resumed run trains with the configuration it saved; only how long it goes on
    (`RESUMABLE_OVERRIDES`) may be changed, and the change is saved with the run. A
    saved configuration that is no longer valid is named as the run's own file.
    A `drop_pattern` is compiled by RE2 before the run directory is made, TensorFlow
    loaded for it by `load_tensorflow` (a callable) if one is given.

    `init_from` (the `--init-from` run) is checked against the new run's configuration
    (`attncli.training.init_from.check_init_from`) before the run directory is made,
    and recorded in it. A resumed run continues from its own checkpoint: `--init-from`
    may then only name the run it started from.

    Returns:
        `(config, run, role)`: `role` is the `ClusterRole` of a multi-worker run, else
        None. A worker other than the chief gets its own run, `role.directory(RUN)`.
    """
    if resume and overwrite:
        raise AttncliError("--resume and --overwrite contradict each other; choose one")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise AttncliError(
            f"--data-dir {data_dir}: no such folder; give the folder the config's data "
            "paths are relative to"
        )
    if config_path is not None:
        config_path = resolve_config(config_path)
    if resume:
        if run_dir is None and config_path is None:
            raise AttncliError("--resume needs the run: give --run-dir RUN (or the CONFIG it used)")
        if run_dir is None:
            run_dir = Path("runs") / load_run_config(config_path).name
        worker_dir = _worker_directory(run_dir)
        run = RunDirectory.open(worker_dir if worker_dir.exists() else run_dir)
        run.lock()
        try:
            config, role = _resumed_config(run, run_dir, overrides, load_tensorflow, init_from)
        except BaseException:
            run.unlock()  # a refused resume leaves the run free, as it found it
            raise
        return config, run, role
    config = load_run_config(config_path, overrides)
    _check_patterns(config.data, load_tensorflow)
    data_paths(config.data, data_dir)
    if data_dir is not None or config.data.directory is not None:
        # Saved absolute, so that resuming from anywhere reads the same files.
        directory = Path(data_dir or config.data.directory).resolve()
        config = dataclasses.replace(
            config, data=dataclasses.replace(config.data, directory=str(directory))
        )
    origin = None
    if init_from is not None:
        config, taken = take_tokenization(init_from, config)
        if taken:
            print(f"--init-from {init_from}: {' and '.join(taken)} left at the defaults, so "
                  "taken from RUN (a fine-tuning run tokenizes as RUN did)", file=sys.stderr)
        origin = check_init_from(init_from, config)
    run_dir = run_dir or Path("runs") / config.name
    role = _role(config)
    if role is not None:
        run_dir = role.directory(run_dir)
    if origin is not None and Path(run_dir).resolve() == origin.run:
        raise AttncliError(
            f"--init-from {init_from} is the run to be written; give the new run another "
            "--run-dir (or another name)"
        )
    run = RunDirectory.create(run_dir, overwrite=overwrite)
    try:
        save_yaml(config, run.config_path)
        if origin is not None:
            write_record(run, origin)
    except BaseException:
        run.discard()
        raise
    return config, run, role


def _resumed_config(run, run_dir, overrides, load_tensorflow, init_from):
    """The configuration `run` (locked) resumes with, its saved one changed by `overrides`
    (saved back when there are any), and the cluster role: `(config, role)`."""
    if not run.config_path.is_file():
        raise AttncliError(
            f"{run.config_path} is missing: the run cannot be resumed without the "
            "configuration it trained with; put it back, or start again with --overwrite"
        )
    mapping = load_yaml(run.config_path)
    try:
        saved = run_config_from_mapping(copy.deepcopy(mapping))
        _check_patterns(saved.data, load_tensorflow)
    except AttncliError as error:
        raise AttncliError(
            f"{run.config_path}, the configuration the run saved, is damaged: {error}"
        ) from None
    for override in overrides:
        key = override.partition("=")[0].strip()
        if key not in RESUMABLE_OVERRIDES:
            raise AttncliError(
                f"--set {key} cannot change a run that is resumed (only "
                f"{', '.join(RESUMABLE_OVERRIDES)} can); start a new run instead"
            )
    config = run_config_from_mapping(apply_overrides(mapping, overrides))
    role = _role(config)
    if role is not None and role.directory(run_dir) != run.path:
        raise AttncliError(
            f"{role.directory(run_dir)}: no such run directory; this worker has no "
            "checkpoints to resume from"
        )
    if init_from is not None:
        _check_resumed_origin(run, init_from)
    if overrides:
        save_yaml(config, run.config_path)
        run.log(f"resumed with {' '.join(overrides)}")
    return config, role


def _check_resumed_origin(run, init_from):
    """Refuse `--init-from` with `--resume` unless it names the run `run` started from."""
    recorded = read_record(run)
    if recorded is None:
        raise AttncliError(
            f"--init-from: {run.path} did not start from another run; drop --init-from "
            "to resume it"
        )
    if Path(init_from).resolve() != recorded.run:
        raise AttncliError(
            f"--init-from: {run.path} started from {recorded.run}, not {init_from}; "
            "drop --init-from to resume it"
        )


def _check_patterns(data, load_tensorflow):
    """Refuse a `drop_pattern` of `data` that RE2 cannot compile."""
    patterns = {side: getattr(data, side).drop_pattern for side in ("source", "target")}
    if all(pattern is None for pattern in patterns.values()):
        return
    if load_tensorflow is not None:
        load_tensorflow()
    from attncli.data.tokenization import check_drop_pattern  # imports TensorFlow

    for side, pattern in patterns.items():
        if pattern is not None:
            check_drop_pattern(pattern, f"data.{side}.drop_pattern")


def _role(config):
    """The cluster role of a multi-worker run (an error without TF_CONFIG), else None."""
    return cluster_role() if config.training.distribute == "multi-worker" else None


def _worker_directory(run_dir):
    """Where a worker other than the chief keeps `run_dir`, if TF_CONFIG names one."""
    try:
        return cluster_role().directory(run_dir)
    except AttncliError:
        return Path(run_dir)


def _quiet_corpus_warnings():
    """The trainer reports skipped corpus lines through its display, once per file;
    the reader's own warning (on the `attncli.data` logger) would repeat it."""
    logging.getLogger("attncli.data").addHandler(logging.NullHandler())


def train(*, config_path, overrides, run_dir, data_dir, resume, overwrite, console,
          load_tensorflow=None, init_from=None):
    """Run `attncli train`; returns the process exit code.

    The configuration and the run directory are checked before TensorFlow is
    imported (`load_tensorflow`, a callable, imports it), so a mistake in them is
    reported at once. A new run that fails before it has learnt anything leaves no
    folder behind. The run is unlocked when this returns, so that a caller in Python
    (a notebook, a test) does not keep other processes from the run until it exits.
    """
    config, run, role = resolve_run(
        config_path, overrides, run_dir=run_dir, data_dir=data_dir, resume=resume,
        overwrite=overwrite, load_tensorflow=load_tensorflow, init_from=init_from,
    )
    _quiet_corpus_warnings()
    try:
        if load_tensorflow is not None:
            load_tensorflow()
        return _train(config, run, role, run_dir, data_dir, resume, console)
    except BaseException:
        run.discard()
        raise
    finally:
        run.unlock()


def _train(config, run, role, run_dir, data_dir, resume, console):
    training = config.training
    if role is not None:
        console.print(
            f"{role.task_type} {role.index} of {role.workers} workers"
            + ("" if role.is_chief else " (checkpoints only; the chief writes the run)"),
            highlight=False, markup=False,
        )
    console.print(f"run directory: {run.path}", highlight=False, markup=False)
    for note in run.notes:
        console.print(note, highlight=False, markup=False)

    if role is not None:
        console.print(
            f"joining the cluster of TF_CONFIG: {role.workers} workers (it waits for all "
            "of them)", highlight=False, markup=False,
        )
    try:
        # Before any other TensorFlow operation (see attncli.training.distribution).
        strategy = make_strategy(training.distribute, training.cpu_replicas)
    except AttncliError:
        raise
    except Exception as error:  # noqa: BLE001  TensorFlow fails in many ways here.
        if role is None:
            raise
        raise AttncliError(
            f"cannot start the multi-worker strategy ({first_line(error)}); check TF_CONFIG's "
            "addresses and that its ports are free"
        ) from None

    from attncli.training.trainer import Interrupted, Trainer  # imports TensorFlow

    import tensorflow as tf

    # Every worker resumes with the run directory of the chief.
    given = Path(run_dir) if run_dir is not None else Path("runs") / config.name
    resume_command = (
        f"attncli train --resume --run-dir {shlex.quote(str(run.path if role is None else given))}"
    )
    with TrainingDisplay(console, log_every=training.log_every) as display:
        try:
            trainer = Trainer.from_config(config, run, display, data_dir=data_dir, resume=resume,
                                          strategy=strategy, is_chief=role is None or role.is_chief,
                                          draw_attention=heatmap_png)
            summary = trainer.fit()
        except Interrupted as interruption:
            display.message(
                f"interrupted ({interruption}); checkpoint saved. Continue with: "
                f"{resume_command}"
            )
            return _EXIT_CODES.get(interruption.signal_number, 1)
        except tf.errors.UnavailableError:
            if role is None:
                raise
            # TensorFlow's health check aborts the collectives of the workers left
            # when one stops without a signal (killed, its machine lost).
            raise AttncliError(
                "another worker of the cluster stopped answering; the checkpoints written "
                f"so far are kept: start every worker again with {resume_command}"
            ) from None
        except (OSError, tf.errors.OpError) as error:
            failure = explain(error, run, resume_command)
            if failure is None:
                raise
            raise failure from None
    if role is not None and not role.is_chief:
        return 0
    sys.stdout.write(json.dumps({"run": str(run.path), **summary}, indent=2) + "\n")
    return 0
