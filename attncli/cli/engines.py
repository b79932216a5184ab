"""What runs a model (`--engine`, `--compute-type`), and the mistakes of choosing it, said
once for `attncli translate` and `attncli serve` (`COMMAND` in the messages).

`tensorflow` runs a trained run (its model directory) with attncli's own search;
`ctranslate2` runs an export of `attncli export RUN DIR --format ctranslate2` with
CTranslate2 and the run's tokenizer files, without TensorFlow
(`attncli.export.ctranslate2_engine`).
"""

from pathlib import Path

from attncli.cli.runs import model_directory
from attncli.errors import AttncliError, shown
from attncli.export.ctranslate2_engine import check_compute_type, is_export, read_settings

ENGINES = ("tensorflow", "ctranslate2")


def check_engine(engine, compute_type):
    """Refuse an unknown `--engine`, and a `--compute-type` without `--engine
    ctranslate2` or that is none of its types."""
    if engine not in ENGINES:
        raise AttncliError(f"--engine {shown(engine)} is not an engine; choose one of "
                           f"{', '.join(ENGINES)}")
    if compute_type is None:
        return
    if engine != "ctranslate2":
        raise AttncliError("--compute-type is for --engine ctranslate2: add it, or drop "
                           "--compute-type")
    check_compute_type(compute_type)


def refuse_tensorflow_options(given):
    """Refuse, with `--engine ctranslate2`, the first option of `given` (`{flag: whether
    it was given}`) that only attncli's own search has."""
    for flag, asked in given.items():
        if asked:
            raise AttncliError(f"{flag} needs the TensorFlow search: drop {flag}, or "
                               "--engine ctranslate2 and give the run itself")


def exported(path, command):
    """`path`, refused unless it is a CTranslate2 export (`--engine ctranslate2`)."""
    if not is_export(path):
        raise AttncliError(f"{path} is no CTranslate2 export: write one with `attncli "
                           f"export {path} DIR --format ctranslate2`, then {command} DIR "
                           "--engine ctranslate2")
    return path


def not_exported(path, command):
    """`path`, refused if it is a CTranslate2 export (the TensorFlow engine reads runs)."""
    if is_export(path):
        raise AttncliError(f"{path} is a CTranslate2 export: {command} it with --engine "
                           "ctranslate2")
    return path


def require_ctranslate2():
    """Refuse `--engine ctranslate2` when the ctranslate2 package is not installed."""
    try:
        import ctranslate2  # noqa: F401  (an optional package: only to tell if it is there)
    except ImportError:
        raise AttncliError("--engine ctranslate2 needs the ctranslate2 package: pip install "
                           "'attncli[ctranslate2]'") from None


def model_path(path, engine, command):
    """The directory `engine` reads for the `path` a user gave: a CTranslate2 export
    itself (`ctranslate2`, its settings read to check them), or a run's model directory
    (`tensorflow`, `attncli.cli.runs.model_directory`); the other kind is refused in one
    line."""
    if engine == "ctranslate2":
        read_settings(exported(path, command))
        return Path(path)
    return model_directory(not_exported(path, command))
