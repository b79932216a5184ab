"""The `attncli` command line: one Typer app, one function per command.

Commands import TensorFlow inside their body, so `attncli --help` stays instant. A
command reports a mistake the user can fix by raising `AttncliError`; `AttncliGroup`
turns it into one line on stderr and exit code 2 (`attncli --debug` shows the
traceback instead).
"""

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from attncli.errors import AttncliError

_DEBUG = "attncli.debug"


class AttncliGroup(TyperGroup):
    """The app's command group: reports an `AttncliError` from any command as
    `Error: <message>` on stderr and exits with code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AttncliError as error:
            if ctx.meta.get(_DEBUG):
                raise
            typer.echo(f"Error: {error}", err=True)
            raise typer.Exit(code=2) from None


app = typer.Typer(
    cls=AttncliGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


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
):
    """Attention for sequence-to-sequence models, every step in the terminal."""
    ctx.meta[_DEBUG] = debug


@app.command("score-demo")
def score_demo(
    example: Annotated[
        str,
        typer.Option(help="Worked example of design note 002: seq2seq or self-attention."),
    ] = "seq2seq",
    score: Annotated[
        str | None,
        typer.Option(
            help="Score function: dot, scaled-dot, general, concat, additive, local-m, "
            "local-p. [default: dot]",
            show_default=False,
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(help='Query vector(s): "10,5,10"; ";" separates several queries.'),
    ] = None,
    keys: Annotated[
        str | None,
        typer.Option(help='Key vectors, one per row: "0,1,1;5,0,1".'),
    ] = None,
    values: Annotated[
        str | None,
        typer.Option(help="Value vectors, one per key. [default: the keys]", show_default=False),
    ] = None,
    input_file: Annotated[
        Path | None,
        typer.Option(
            "--input",
            help="YAML file with query, keys, and optionally values, valid_length and "
            "parameters (weights by name, e.g. W_a).",
        ),
    ] = None,
    valid_length: Annotated[
        int | None,
        typer.Option(help="Mask the keys after the first N: they get weight exactly 0."),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the learned matrices not given in --input.")
    ] = 0,
    units: Annotated[
        int | None,
        typer.Option(
            help="Hidden size of the concat and additive scores. [default: query size]",
            show_default=False,
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(help="Half-width D of local-m and local-p attention. [default: 1]",
                     show_default=False),
    ] = None,
    decimals: Annotated[
        int, typer.Option(help="Digits after the point in tables and Markdown.")
    ] = 4,
    output_format: Annotated[
        str, typer.Option("--format", help="table, markdown (for notes) or json (for scripts).")
    ] = "table",
):
    """Walk through one attention computation step by step.

    The inputs, the scores, their softmax, the weighted values and their sum, each
    figure computed by the layers of attncli.
    """
    from attncli import demo_inputs

    demo_inputs.check_choice("format", output_format, demo_inputs.FORMATS)
    if not 0 <= decimals <= 12:
        raise AttncliError(f"--decimals {decimals} is out of range; use 0 to 12")
    demo_inputs.check_choice("example", example, demo_inputs.EXAMPLES)
    if example == "self-attention":
        given = [name for name, value in (
            ("--score", score), ("--query", query), ("--keys", keys), ("--values", values),
            ("--input", input_file), ("--valid-length", valid_length), ("--units", units),
            ("--window", window),
        ) if value is not None]
        if given:
            raise AttncliError(
                f"--example self-attention walks the article's own inputs and weights and "
                f"takes no {given[0]}; drop it, or use the seq2seq example"
            )
        from attncli import score_demo as demo

        walk = demo.walk_self_attention()
    else:
        score = demo_inputs.check_choice("score", score or "dot", demo_inputs.SCORES)
        for name, value, scores in (("--units", units, ("concat", "additive")),
                                    ("--window", window, ("local-m", "local-p"))):
            if value is not None and score not in scores:
                raise AttncliError(
                    f"{name} applies to --score {' or '.join(scores)}, not {score}"
                )
            if value is not None and value < 1:
                raise AttncliError(f"{name} must be at least 1, got {value}")
        inputs = demo_inputs.resolve_inputs(
            example, query, keys, values, input_file, valid_length
        )
        demo_inputs.check_sizes(score, inputs)
        from attncli import score_demo as demo

        walk = demo.walk_score(score, inputs, seed=seed, units=units, window=window)

    from attncli import render

    if output_format == "json":
        typer.echo(render.to_json(walk, decimals), nl=False)
    elif output_format == "markdown":
        typer.echo(render.markdown(walk, decimals), nl=False)
    else:
        render.print_table(walk, decimals)
