"""The `attncli` command line: one Typer app, its commands registered in the order
`--help` lists them.

Each command is declared (its options and help) beside its body, in a module of its
own (`score_demo_command`, `train_command`, ...), whose `command` is registered here;
`group.AttncliGroup` reports every mistake as one line. Commands import TensorFlow
inside their body, so `attncli --help` stays instant.
"""

from pathlib import Path
from typing import Annotated

import typer

from attncli.own_layers import exit_if_shadowed

# The commands' modules import `layers` as they load: a module of the user's own that
# shadows it is named before they do.
exit_if_shadowed()

from attncli import __version__  # noqa: E402
from attncli.cli import (  # noqa: E402
    align_command, configs_command, export_command, inspect_command, score_demo_command,
    train_command, translate_command,
)
from attncli.cli.group import AttncliGroup  # noqa: E402
from attncli.cli.options import DEBUG, ComputeType, import_tensorflow, stderr_console  # noqa: E402
from attncli.serve.limits import Limits  # noqa: E402

app = typer.Typer(
    no_args_is_help=True,
    cls=AttncliGroup,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _print_version(asked):
    if asked:
        typer.echo(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar="ATTNCLI_DEBUG",
            help="Show the full traceback of an error instead of its one-line message.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version,
                     help="Print attncli's version and exit."),
    ] = False,
):
    """Attention for sequence-to-sequence models, every step in the terminal."""
    ctx.meta[DEBUG] = debug


app.command("score-demo")(score_demo_command.command)
app.command("train")(train_command.command)
app.command("configs")(configs_command.command)
app.command("translate")(translate_command.command)
app.command("align")(align_command.command)


# serve's options stay here while attncli/cli/serve_command.py, its body, is reworked
# with the serve package (issue 42); they move beside it as the other commands' did.
@app.command("serve")
def serve(
    ctx: typer.Context,
    run: Annotated[
        Path | None,
        typer.Argument(help="A run directory, a model directory, or demo (the model "
                       "shipped with attncli), served under its directory's name; with "
                       "--engine ctranslate2, an export of `attncli export RUN DIR --format "
                       "ctranslate2`.", show_default=False),
    ] = None,
    ensemble: Annotated[
        list[Path] | None,
        typer.Option("--ensemble", metavar="RUN", help="Another run decoded together with "
                     "RUN, as translate --ensemble. Repeat for more."),
    ] = None,
    models: Annotated[
        list[str] | None,
        typer.Option("--model", metavar="NAME=RUN", help="Also serve RUN as NAME (requests "
                     'say "model": NAME). Repeat for more; the first model is the default.'),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(metavar="tensorflow|ctranslate2",
                     help="ctranslate2: serve exports of `attncli export RUN DIR --format "
                     "ctranslate2` with CTranslate2, without loading TensorFlow (no "
                     "sampling, token log probabilities, /inspect or /step)."),
    ] = "tensorflow",
    compute_type: ComputeType = None,
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="Address to listen on; 0.0.0.0 opens the "
                          "server to other machines.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 8000,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", metavar="NAME[:PORT]",
                     help="Also answer requests that name the server NAME (its Host "
                     "header), and pages of NAME: on any port, or on PORT only. Besides "
                     "localhost, loopback addresses and --host on --port. Repeat for more."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(metavar="TOKEN", envvar="ATTNCLI_TOKEN",
                     help="Every request must send 'Authorization: Bearer TOKEN'."),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option(help="Largest request body, in bytes.")
    ] = Limits.max_body_bytes,
    max_texts: Annotated[int, typer.Option(help="Texts per request.")] = (
        Limits.max_texts),
    max_chars: Annotated[int, typer.Option(help="Characters per text.")] = (
        Limits.max_chars),
    max_output_tokens: Annotated[
        int, typer.Option(help="Refuse a text whose translation may be longer "
                          "(the run's max_length_ratio and max_length_offset).")
    ] = Limits.max_output_tokens,
    max_beam: Annotated[int, typer.Option(help="Largest beam a request may "
                                          "ask for.")] = Limits.max_beam,
    max_queue: Annotated[
        int, typer.Option(help="Texts waiting or being translated; past it, "
                          "503 with Retry-After.")
    ] = Limits.max_queue,
    batch_tokens: Annotated[
        int, typer.Option(help="A batch's budget: source tokens times beam.")
    ] = Limits.batch_tokens,
    batch_wait_ms: Annotated[
        float, typer.Option(metavar="MS", help="How long a batch waits for more texts.")
    ] = Limits.batch_wait_ms,
    max_connections: Annotated[
        int, typer.Option(help="Connections open at once; past it, 503.")
    ] = Limits.max_connections,
    header_timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Time a request's headers may take; "
                            "past it, 408 and the connection closed.")
    ] = Limits.header_timeout,
    body_timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Time a request's body may take after "
                            "its headers; past it, 408 and the connection closed.")
    ] = Limits.body_timeout,
):
    """Serve translations and attention over HTTP: a JSON API and a page at /.

    Loads each model once and traces its searches; GET /health answers 200 when ready.
    The API is described at /docs. SIGTERM or Ctrl-C closes the connections still
    sending a request and finishes the requests in flight.
    """
    from attncli.cli.serve_command import serve as run_server

    limits = {
        "max_body_bytes": max_body_bytes, "max_texts": max_texts, "max_chars": max_chars,
        "max_output_tokens": max_output_tokens, "max_beam": max_beam,
        "max_queue": max_queue, "batch_tokens": batch_tokens, "batch_wait_ms": batch_wait_ms,
        "max_connections": max_connections, "header_timeout": header_timeout,
        "body_timeout": body_timeout,
    }
    code = run_server(
        run_path=run, ensemble=ensemble or [], named=models or [], host=host, port=port,
        allowed=allow_host or [], token=token, limits=limits, console=stderr_console(),
        load_tensorflow=lambda: import_tensorflow(ctx), engine=engine,
        compute_type=compute_type,
    )
    raise typer.Exit(code=code)


app.command("export")(export_command.command)
app.command("inspect-weights")(inspect_command.command)
