"""What the commands share: the options several take, the quiet TensorFlow import and
the stderr console.

A command's own options are declared beside its body (`*_command.py`); those here read
the same in every command that takes them.
"""

import os
import sys
from typing import Annotated

import typer
from rich.console import Console

from attncli.data.quiet_stderr import quiet_stderr

# The key of `--debug` in the context's `meta`, read by every command.
DEBUG = "attncli.debug"

# RUN as every command takes it (attncli.cli.runs.model_directory); the figures are the
# shipped model's own (docs/results.md#the-demo-model).
RUN_HELP = ("A run directory, a model directory, or demo: the Spanish → English model "
            "shipped with attncli (cased BLEU 43.33, chrF 58.81 on the bundled validation "
            "split, beam 5).")

# `--compute-type` of the CTranslate2 engine, for translate and serve.
ComputeType = Annotated[
    str | None,
    typer.Option(metavar="float32|int8", help="With --engine ctranslate2: the weights' "
                 "type (int8 is faster, not exact).", show_default="float32"),
]


def import_tensorflow(ctx):
    """Import TensorFlow before a command needs it, without its start-up chatter.

    TensorFlow's C++ core prints device probing and CPU-feature notices on stderr
    while it is imported and initialised; they say nothing a user can act on. They
    are kept (as is every other log line) with --debug or a TF_CPP_MIN_LOG_LEVEL of
    the user's own. Python errors are never hidden.
    """
    if ctx.meta.get(DEBUG) or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with quiet_stderr():
        import tensorflow  # noqa: F401  (lazy: the point of this function)


def discard_stdout():
    """After the reader of stdout stopped early (`| head`, a `BrokenPipeError`): what is
    still written goes nowhere, so neither the command nor Python's exit complains."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def stderr_console():
    """The console of progress and reports: stderr, so stdout holds only results."""
    return Console(stderr=True)
