"""`attncli train [CONFIG]`: read the configuration, prepare the run, train.

Progress goes to stderr; the summary of the run (where the model is, its best
figures) goes to stdout.
"""

import dataclasses
import json
import shlex
import signal
import sys
from pathlib import Path

from attncli.config import apply_overrides, load_yaml, save_yaml
from attncli.data_config import data_paths
from attncli.errors import AttncliError
from attncli.run_config import run_config_from_mapping, load_run_config
from attncli.run_directory import RunDirectory

# What the shell reports for a process ended by these signals: 128 + the number.
_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


# What may change when a run is resumed: how long it goes on, nothing it has learnt from.
RESUMABLE_OVERRIDES = ("training.epochs", "training.max_minutes", "training.patience")


def resolve_run(config_path, overrides, run_dir, data_dir, resume, overwrite):
    """The configuration and run directory of a `train` call.

    A resumed run trains with the configuration it saved; only how long it goes on
    (`RESUMABLE_OVERRIDES`) may be changed, and the change is saved with the run.
    """
    if resume and overwrite:
        raise AttncliError("--resume and --overwrite contradict each other; choose one")
    if resume:
        if run_dir is None and config_path is None:
            raise AttncliError("--resume needs the run: give --run-dir RUN (or the CONFIG it used)")
        if run_dir is None:
            run_dir = Path("runs") / load_run_config(config_path).name
        run = RunDirectory.open(run_dir)
        mapping = load_yaml(run.config_path)
        for override in overrides:
            key = override.partition("=")[0].strip()
            if key not in RESUMABLE_OVERRIDES:
                raise AttncliError(
                    f"--set {key} cannot change a run that is resumed (only "
                    f"{', '.join(RESUMABLE_OVERRIDES)} can); start a new run instead"
                )
        config = run_config_from_mapping(apply_overrides(mapping, overrides))
        if overrides:
            save_yaml(config, run.config_path)
            run.log(f"resumed with {' '.join(overrides)}")
        return config, run
    config = load_run_config(config_path, overrides)
    data_paths(config.data, data_dir)
    if data_dir is not None or config.data.directory is not None:
        # Saved absolute, so that resuming from anywhere reads the same files.
        directory = Path(data_dir or config.data.directory).resolve()
        config = dataclasses.replace(
            config, data=dataclasses.replace(config.data, directory=str(directory))
        )
    run = RunDirectory.create(run_dir or Path("runs") / config.name, overwrite=overwrite)
    save_yaml(config, run.config_path)
    return config, run


def train(config_path, overrides, run_dir, data_dir, resume, overwrite, console):
    """Run `attncli train`; returns the process exit code."""
    config, run = resolve_run(config_path, overrides, run_dir, data_dir, resume, overwrite)
    console.print(f"run directory: {run.path}", highlight=False, markup=False)

    from attncli.progress import TrainingDisplay
    from attncli.trainer import Interrupted, Trainer

    with TrainingDisplay(console) as display:
        trainer = Trainer(config, run, display, data_dir=data_dir, resume=resume)
        try:
            summary = trainer.fit()
        except Interrupted as interruption:
            display.message(
                f"interrupted ({interruption}); checkpoint saved. Continue with: "
                f"attncli train --resume --run-dir {shlex.quote(str(run.path))}"
            )
            return _EXIT_CODES.get(interruption.signal_number, 1)
    sys.stdout.write(json.dumps({"run": str(run.path), **summary}, indent=2) + "\n")
    return 0
