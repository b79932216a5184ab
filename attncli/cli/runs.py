"""What several commands do the same way: find a run's model directory (or a model
shipped with attncli, by name), split lines of text, apply the command line's search
settings, translate lines."""

from importlib import resources
from pathlib import Path

from attncli.config.search import (
    SamplingOptions, SearchSettingError, requested_decoding,
)
from attncli.errors import AttncliError
from attncli.training.run_directory import RunDirectory


def shipped_models():
    """The models shipped inside attncli (package data, `attncli/resources/models/NAME`),
    by name (`"demo"`), as paths, in name order. See docs/demo-model.md."""
    folder = Path(str(resources.files("attncli") / "resources" / "models"))
    if not folder.is_dir():
        return {}
    return {path.name: path for path in sorted(folder.iterdir())
            if (path / "config.json").is_file()}


def model_directory(run_path):
    """The model directory of RUN: `RUN/model`, RUN itself if it is a model, or, when no
    file or folder RUN exists, the model shipped with attncli under that name (`demo`).

    A folder of the user's own comes first: with a folder `demo` in the current
    directory, `demo` is that folder, and if it is no run the error says how to reach the
    shipped model.
    """
    path = Path(run_path)
    if (path / "config.json").is_file():
        return path
    shipped = shipped_models().get(str(run_path))
    if shipped is not None and not path.exists():
        return shipped
    try:
        run = RunDirectory.open(path)
    except AttncliError as error:
        if shipped is None:
            raise
        raise AttncliError(
            f"{error}; the model shipped as '{run_path}' is used only when no file or "
            f"folder '{run_path}' is in the current directory: run the command from "
            "another folder"
        ) from None
    config = run.model_dir / "config.json"
    if config.is_file():
        return run.model_dir
    if run.model_dir.is_dir():
        # A model is written whole (attncli.files.replace_directory): a file gone from it
        # was removed since.
        raise AttncliError(
            f"{config} is missing: the run's model is damaged; put the file back, or "
            "train the run again with --overwrite"
        )
    kept = [record["epoch"] for record in run.read_metrics()
            if isinstance(record, dict) and record.get("best") is True and "epoch" in record]
    if kept:
        raise AttncliError(
            f"{run.model_dir} is missing: the run kept a best model (epoch {kept[-1]}, "
            f"{run.metrics_path.name}) that is no longer there; copy the model directory "
            "back, or train the run again with --overwrite"
        )
    raise AttncliError(
        f"{run.path} has no trained model yet (it is saved after the first "
        "evaluation); train longer, or resume it with `attncli train --resume`"
    )


def run_name(run_path, directory):
    """The name a run is shown by: its folder's name, or for a model directory given
    itself (`RUN/model`), its run's. `directory` is `model_directory(run_path)`."""
    path = Path(run_path).resolve()
    if directory == Path(run_path) and path.name == "model":
        return path.parent.name
    return path.name


def split_lines(text):
    """Lines split at "\n" only (str.splitlines also splits at U+2028, NEL, ...,
    which would break the one-output-line-per-input-line promise)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# The options of sampling as the command line spells them.
SAMPLING_OPTIONS = SamplingOptions(
    sampling="--sampling", temperature="--temperature", seed="--seed", beam="--beam",
    n_best="--n-best", asking="--sampling random (or topk:K, topp:P)", per="line",
    value_prefix="--sampling: ",
)


def asked_decoding(base, *, beam=None, alpha=None, n_best=None, sampling=None,
                   temperature=None, seed=None, prefix=None):
    """The `Decoding` the command line asks for (`requested_decoding`): the run's search
    `base` with `--beam`, `--alpha` and `--n-best`, or `--sampling` with its
    `--temperature` and `--seed`, and `--prefix`; options not given are None. What does
    not go together is one line."""
    try:
        return requested_decoding(base, SAMPLING_OPTIONS, beam=beam, alpha=alpha,
                                  n_best=n_best, sampling=sampling, temperature=temperature,
                                  seed=seed, prefix=prefix)
    except SearchSettingError as error:
        raise AttncliError(f"{error}; adjust --beam / --n-best / --alpha") from None
    except ValueError as error:
        raise AttncliError(str(error)) from None


def translate_lines(translator, lines, batch_size=64, prefixes=None, seed=0):
    """Translations of `lines`, None for an empty line (it is not translated); each line
    begins with its prefix of `prefixes` (a list as long as `lines`, or None), and
    sampling draws with `seed`.

    Raises:
        PrefixError: a line's prefix cannot be forced; its `index` counts in `lines`.
    """
    from attncli.search.translation import PrefixError  # imports TensorFlow

    filled = [index for index, line in enumerate(lines) if line.strip()]
    try:
        results = translator.translate(
            [lines[index] for index in filled], batch_size=batch_size,
            prefixes=None if prefixes is None else [prefixes[index] for index in filled],
            seeds=[seed] * len(filled),
        )
    except PrefixError as error:
        raise PrefixError(str(error), filled[error.index]) from None
    output = [None] * len(lines)
    for index, result in zip(filled, results):
        output[index] = result
    return output
