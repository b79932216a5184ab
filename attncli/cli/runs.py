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
    config = run.model_dir / "config.json"
    if run.model_dir.is_dir() and not config.is_file():
        # A model is written whole (attncli.files.replace_directory): a file gone from it
        # was removed since.
        raise AttncliError(
            f"{config} is missing: the run's model is damaged; put the file back, or "
            "train the run again with --overwrite"
        )
    kept = [record["epoch"] for record in run.read_metrics()
            if isinstance(record, dict) and record.get("best") is True and "epoch" in record]
    if not config.is_file() and kept:
        raise AttncliError(
            f"{run.model_dir} is missing: the run kept a best model (epoch {kept[-1]}, "
            f"{run.metrics_path.name}) that is no longer there; copy the model directory "
            "back, or train the run again with --overwrite"
        )
    if not config.is_file():
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
