"""What several commands read the same way: a run's model directory, and lines of text."""

from pathlib import Path

from attncli.errors import AttncliError
from attncli.training.run_directory import RunDirectory


def model_directory(run_path):
    """The model directory of RUN: `RUN/model`, or RUN itself if it is a model."""
    path = Path(run_path)
    if (path / "config.json").is_file():
        return path
    run = RunDirectory.open(path)
    if not (run.model_dir / "config.json").is_file():
        raise AttncliError(
            f"{run.path} has no trained model yet (it is saved after the first "
            "evaluation); train longer, or resume it with `attncli train --resume`"
        )
    return run.model_dir


def split_lines(text):
    """Lines split at "\n" only (str.splitlines also splits at U+2028, NEL, ...,
    which would break the one-output-line-per-input-line promise)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
