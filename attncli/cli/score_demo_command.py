"""`attncli score-demo`: its options, and the walk they ask for printed.

`demo_inputs` checks the options and reads the inputs before TensorFlow is imported,
`score_demo` walks the computation with the layers of `layers/`, `demo_render` prints
the walk as tables, Markdown or JSON.
"""

from pathlib import Path
from typing import Annotated

import typer

from attncli.cli.demo_inputs import request_from_options
from attncli.cli.demo_render import render
from attncli.cli.options import import_tensorflow
from attncli.scores import DEMO_SCORES


def command(
    ctx: typer.Context,
    example: Annotated[
        str,
        typer.Option(help="Worked example: seq2seq (Raimi Karim's \"Attn: Illustrated "
                     "Attention\", 2019) or self-attention (his \"Illustrated: "
                     "Self-Attention\", 2019)."),
    ] = "seq2seq",
    score: Annotated[
        str | None,
        typer.Option(
            help=f"Score function: {', '.join(DEMO_SCORES)}.",
            show_default="dot",
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(metavar="VECTORS",
                     help='Query vector(s): "10,5,10"; ";" separates several queries.'),
    ] = None,
    keys: Annotated[
        str | None,
        typer.Option(metavar="VECTORS", help='Key vectors, one per row: "0,1,1;5,0,1".'),
    ] = None,
    values: Annotated[
        str | None,
        typer.Option(metavar="VECTORS", help="Value vectors, one per key.",
                     show_default="the keys"),
    ] = None,
    input_file: Annotated[
        Path | None,
        typer.Option(
            "--input",
            metavar="FILE",
            help="YAML file with query, keys, and optionally values, valid_length and "
            "parameters (weights by name, e.g. W_a).",
        ),
    ] = None,
    valid_length: Annotated[
        int | None,
        typer.Option(help="Mask the keys after the first N: they get weight exactly 0."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed of the learned matrices not given in --input.",
                     show_default="0"),
    ] = None,
    units: Annotated[
        int | None,
        typer.Option(
            help="Hidden size of the concat and additive scores and of local-p's W_p.",
            show_default="the query size",
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(help="Half-width D of local-m and local-p attention.",
                     show_default="1"),
    ] = None,
    decimals: Annotated[
        int, typer.Option(help="Digits after the point in tables and Markdown.")
    ] = 4,
    output_format: Annotated[
        str, typer.Option("--format", metavar="FORMAT",
                          help="table, markdown (for notes) or json (for scripts).")
    ] = "table",
):
    """Walk through one attention computation step by step.

    The inputs, the scores, their softmax, the weighted values and their sum, each
    figure computed by the layers of attncli.
    """
    request = request_from_options(
        example=example, score=score, query=query, keys=keys, values=values,
        input_file=input_file, valid_length=valid_length, seed=seed, units=units,
        window=window, decimals=decimals, output_format=output_format,
    )
    import_tensorflow(ctx)
    from attncli.cli.score_demo import walk  # imports Keras

    typer.echo(render(walk(request), request.output_format, request.decimals),
               nl=False)
