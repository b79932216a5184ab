"""`attncli train [CONFIG]`: read the configuration, prepare the run, train.

Progress goes to stderr; the summary of the run (where the model is, its best
figures) goes to stdout.
"""

import json
import signal
import sys
from pathlib import Path

from attncli.config import load_yaml, save_yaml
from attncli.data_config import data_paths
from attncli.errors import AttncliError
from attncli.run_config import run_config_from_mapping, load_run_config
from attncli.run_directory import RunDirectory

# What the shell reports for a process ended by these signals: 128 + the number.
_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def resolve_run(config_path, overrides, run_dir, data_dir, resume, overwrite):
    """The configuration and run directory of a `train` call.

    A resumed run trains with the configuration it saved; overrides are refused then,
    since changing a run halfway would make it impossible to repeat.
    """
    if resume and overwrite:
        raise AttncliError("--resume and --overwrite contradict each other; choose one")
    if resume:
        if run_dir is None and config_path is None:
            raise AttncliError("--resume needs the run: give --run-dir RUN (or the CONFIG it used)")
        if run_dir is None:
            config = load_run_config(config_path)
            run_dir = Path("runs") / config.name
        if overrides:
            raise AttncliError(
                "--set cannot change a run that is resumed; start a new run instead"
            )
        run = RunDirectory.open(run_dir)
        config = run_config_from_mapping(load_yaml(run.config_path))
        return config, run
    config = load_run_config(config_path, overrides)
    data_paths(config.data, data_dir)
    run = RunDirectory.create(run_dir or Path("runs") / config.name, overwrite=overwrite)
    save_yaml(config, run.config_path)
    return config, run


def train(config_path, overrides, run_dir, data_dir, resume, overwrite, console):
    """Run `attncli train`; returns the process exit code."""
    config, run = resolve_run(config_path, overrides, run_dir, data_dir, resume, overwrite)
    console.print(f"run directory: {run.path}", highlight=False)

    from attncli.progress import TrainingDisplay
    from attncli.trainer import Interrupted, Trainer

    with TrainingDisplay(console) as display:
        trainer = Trainer(config, run, display, data_dir=data_dir, resume=resume)
        try:
            summary = trainer.fit()
        except Interrupted as interruption:
            display.message(
                f"interrupted ({interruption}); checkpoint saved. Continue with: "
                f"attncli train --resume --run-dir {run.path}"
            )
            return _EXIT_CODES.get(interruption.signal_number, 1)
    sys.stdout.write(json.dumps({"run": str(run.path), **summary}, indent=2) + "\n")
    return 0
