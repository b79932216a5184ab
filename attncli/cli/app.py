"""The `attncli` command line: one Typer app, one function per command.

Commands import TensorFlow inside their body, so `attncli --help` stays instant. A
command reports a mistake the user can fix by raising `AttncliError`; `AttncliGroup`
turns it, and every command-line parsing error (unknown option, bad integer, ...), into
one line on stderr and exit code 2 (`attncli --debug` shows an `AttncliError`'s
traceback instead).
"""

import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperArgument, TyperGroup

from attncli import __version__
from attncli.cli.align_command import align_command
from attncli.errors import AttncliError, shown
from attncli.own_layers import check_own_layers
from attncli.scores import DEMO_SCORES
from attncli.serve.limits import Limits

_DEBUG = "attncli.debug"

# Click's UsageError, the base of every parsing error. Typer exports its subclass
# BadParameter but not the class itself, whether Click is vendored (Typer >= 0.25) or not.
_UsageError = typer.BadParameter.__mro__[1]


# `--compute-type` of the CTranslate2 engine, for translate and serve.
ComputeType = Annotated[
    str | None,
    typer.Option(metavar="float32|int8", help="With --engine ctranslate2: the weights' "
                 "type (int8 is faster, not exact).", show_default="float32"),
]


class AttncliGroup(TyperGroup):
    """The app's command group: reports an `AttncliError` from any command, and any
    command-line parsing error, as `Error: <message>` on stderr and exits with code 2.

    The parsing errors of the app's own options arise in `make_context`, those of a
    command's options and of an unknown or missing command in `invoke`.
    """

    def make_context(self, info_name, args, parent=None, **extra):
        _check_utf8(args)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _UsageError as error:
            _report_usage_error(error)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AttncliError as error:
            if ctx.meta.get(_DEBUG):
                raise
            typer.echo(f"Error: {error}", err=True)
            raise typer.Exit(code=2) from None
        except _UsageError as error:
            _report_usage_error(error)

    def get_command(self, ctx, cmd_name):
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _show_what_users_type(command, ctx)
        return command

    def format_help(self, ctx, formatter):
        _show_what_users_type(self, ctx)
        super().format_help(ctx, formatter)


# RUN as every command takes it (attncli.cli.runs.model_directory); the figures are the
# shipped model's own (docs/results.md#the-demo-model).
RUN_HELP = ("A run directory, a model directory, or demo: the Spanish → English model "
            "shipped with attncli (cased BLEU 43.33, chrF 58.81 on the bundled validation "
            "split, beam 5).")

# What --help shows for an option's value when the command does not name it.
_TYPE_METAVARS = {"int": "N", "float": "NUMBER", "Path": "PATH"}


def _show_what_users_type(command, ctx):
    """Make --help show what a user types, not Python types (`<bool>`, `<list[Path]>`).

    A flag shows nothing after its name, an option its `metavar` (else N, NUMBER, PATH
    or TEXT by its type), an argument its `metavar` (else its name in capitals) in the
    usage line, bare when required and in brackets when optional. Typer has no setting
    for this, so the parameters are adjusted before their help is drawn; it applies to
    every command, including any added later.
    """
    for param in command.get_params(ctx):
        if isinstance(param, TyperArgument):
            param.metavar = param.metavar or param.name.upper()
            param.__class__ = _ShownArgument
        elif param.is_flag:
            param.metavar = ""
        elif param.metavar is None:
            element = param.bare_type().removeprefix("list[").removesuffix("]")
            param.metavar = _TYPE_METAVARS.get(element, "TEXT")


class _ShownArgument(TyperArgument):
    """A command-line argument shown by its metavar alone: no type column, no braces."""

    def display_type_rich(self, ctx):
        return None

    def get_usage_pieces(self, ctx):
        name = self.metavar + ("..." if self.nargs != 1 else "")
        return [name if self.required else f"[{name}]"]


def _check_utf8(args):
    """Refuse an argument that is not UTF-8 (Python keeps its bytes as lone surrogates,
    which neither TensorFlow, the terminal nor a UTF-8 file can take)."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            typer.echo(f"Error: argument {number}, {shown(arg)}, is not valid UTF-8; attncli "
                       "takes text, file and folder names in UTF-8", err=True)
            raise typer.Exit(code=2) from None
        except AttributeError:  # not a string: given in Python, not on a command line
            continue


# What a word too many most likely meant, by command: `inspect-weights RUN Tengo` is
# `translate RUN Tengo`'s habit, `train CONFIG pairs.tsv` names the data beside the config.
_EXTRA_ARGUMENT_HINTS = {
    "inspect-weights": 'give the text with --text "..."',
    "train": "name the data in the config (data.train) or with --data-dir",
    "serve": "serve more runs with --model NAME=RUN, or decode them together with --ensemble",
}


def _report_usage_error(error):
    message = " ".join(error.format_message().split())
    if not message:
        # `attncli` alone: the help was printed in place of an error.
        raise typer.Exit(code=0) from None
    command = error.ctx.command_path if error.ctx is not None else "attncli"
    if "unexpected extra argument" in message and error.ctx is not None:
        hint = _EXTRA_ARGUMENT_HINTS.get(error.ctx.info_name)
        message += f"; {hint}" if hint else ""
    typer.echo(f"Error: {message} (see '{command} --help')", err=True)
    raise typer.Exit(code=2) from None


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
    ctx.meta[_DEBUG] = debug
    check_own_layers()


def _load_tensorflow(ctx):
    """Import TensorFlow before a command needs it, without its start-up chatter.

    TensorFlow's C++ core prints device probing and CPU-feature notices on stderr
    while it is imported and initialised; they say nothing a user can act on. They
    are kept (as is every other log line) with --debug or a TF_CPP_MIN_LOG_LEVEL of
    the user's own. Python errors are never hidden.
    """
    if ctx.meta.get(_DEBUG) or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@app.command("score-demo")
def score_demo(
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
    from attncli.cli.demo_inputs import request_from_options

    request = request_from_options(
        example=example, score=score, query=query, keys=keys, values=values,
        input_file=input_file, valid_length=valid_length, seed=seed, units=units,
        window=window, decimals=decimals, output_format=output_format,
    )
    _load_tensorflow(ctx)
    from attncli.cli import render
    from attncli.cli.score_demo import walk

    typer.echo(render.render(walk(request), request.output_format, request.decimals),
               nl=False)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


@app.command("train")
def train(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Argument(metavar="CONFIG", help="YAML run configuration, or the name of a shipped "
                       "one (attncli configs lists them).", show_default="the shipped default"),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override one key: --set model.score=general --set training.epochs=3.",
        ),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Where the run is written.", show_default="runs/NAME"),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Folder the config's relative data paths are read from.",
                     show_default="the config's data.directory, else the current folder"),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted run from its checkpoint.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start the run again, replacing it.")
    ] = False,
    init_from: Annotated[
        Path | None,
        typer.Option("--init-from", metavar="RUN",
                     help="Fine-tune: start from the model RUN kept and its vocabularies "
                     "(same model and tokenization settings, or RUN's recurrent encoder "
                     "grown into a cascade); the optimizer starts fresh."),
    ] = None,
):
    """Train an attention encoder-decoder; progress on stderr, summary on stdout.

    With no CONFIG: Spanish to English on the bundled Tatoeba pairs, about ten
    minutes on a laptop CPU. Ctrl-C saves a checkpoint; --resume continues.
    """
    from attncli.cli.train_command import train as run_training

    code = run_training(
        config_path=config, overrides=overrides or [], run_dir=run_dir, data_dir=data_dir,
        resume=resume, overwrite=overwrite, console=_stderr_console(),
        load_tensorflow=lambda: _load_tensorflow(ctx), init_from=init_from,
    )
    raise typer.Exit(code=code)


@app.command("configs")
def configs():
    """List the shipped run configurations: attncli train NAME trains one."""
    from attncli.config.run import load_run_config
    from attncli.config.shipped import describe, shipped_configs

    shipped = shipped_configs()
    rows = [(name, load_run_config(path).data.task, describe(path))
            for name, path in shipped.items()]
    widths = [max(len(row[column]) for row in rows) for column in (0, 1)]
    # Descriptions are wrapped into their column at the terminal's width, never cut.
    indent = widths[0] + widths[1] + 4
    room = max(shutil.get_terminal_size().columns - indent, 20)
    for name, task, description in rows:
        first, *rest = textwrap.wrap(description, room) or [""]
        typer.echo(f"{name:<{widths[0]}}  {task:<{widths[1]}}  {first}".rstrip())
        for line in rest:
            typer.echo(" " * indent + line)


@app.command("translate")
def translate(
    ctx: typer.Context,
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help=RUN_HELP)
    ],
    texts: Annotated[
        list[str] | None,
        typer.Argument(metavar="TEXT", help="Sentences; else --input, else stdin."),
    ] = None,
    input_file: Annotated[
        Path | None,
        typer.Option("--input", metavar="FILE", help="File with one sentence per line."),
    ] = None,
    beam: Annotated[
        int | None, typer.Option(help="Beam size; 1 is greedy.", show_default="the run's")
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(help="Length penalty exponent (Wu et al. 2016).", show_default="the run's"),
    ] = None,
    n_best: Annotated[
        int | None, typer.Option(help="Translations per sentence.", show_default="the run's")
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", metavar="FORMAT",
                          help="text, tsv, or json (scores and attention weights).")
    ] = "text",
    reference: Annotated[
        Path | None,
        typer.Option(metavar="FILE",
                     help="Line-aligned references: print BLEU/chrF (or PER/WER) on stderr."),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Sentences translated at once.")] = 64,
    alignments: Annotated[
        bool,
        typer.Option("--alignments", help="Add word alignments i-j (source word i, target "
                     "word j, 0-based; Pharaoh format) taken from the attention weights; j "
                     "counts the translation's whitespace-separated words."),
    ] = False,
    replace_unk: Annotated[
        bool,
        typer.Option("--replace-unk", help="Replace each [UNK] output by the source word "
                     "aligned to it (word-level targets only)."),
    ] = False,
    ensemble: Annotated[
        list[Path] | None,
        typer.Option("--ensemble", metavar="RUN",
                     help="Another run (or model directory) trained on the "
                     "same data, decoded together with RUN: their next-token probabilities "
                     "are averaged. Repeat for more."),
    ] = None,
    prefix: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="Every translation begins with TEXT (tokenized as "
                     "the target side; its tokens forced, then the search goes on)."),
    ] = None,
    prefix_file: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="One prefix per input line, line-aligned; an empty "
                     "line for none."),
    ] = None,
    sampling: Annotated[
        str | None,
        typer.Option(metavar="random|topk:K|topp:P", help="Draw each translation at random "
                     "instead of searching (--n-best N draws N per line)."),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(metavar="T", help="Divide the logits by T before sampling.",
                     show_default="1.0"),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(metavar="S", help="Sampling's seed: the same seed draws the same "
                     "translations.", show_default="0"),
    ] = None,
    token_log_probs: Annotated[
        bool,
        typer.Option("--token-log-probs", help="With --format json: add each token's log "
                     "probability, [END] included (their sum is the hypothesis's log P)."),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(metavar="tensorflow|ctranslate2",
                     help="ctranslate2: translate an export of `attncli export RUN DIR "
                     "--format ctranslate2` with CTranslate2, without loading TensorFlow."),
    ] = "tensorflow",
    compute_type: ComputeType = None,
):
    """Translate sentences with a trained run, one output line per input line."""
    if engine != "ctranslate2":
        _load_tensorflow(ctx)
    from attncli.cli.translate_command import translate as run_translation

    code = run_translation(
        run_path=run, texts=texts or [], input_file=input_file, beam=beam, alpha=alpha,
        n_best=n_best, output_format=output_format, reference=reference,
        batch_size=batch_size, console=_stderr_console(), alignments=alignments,
        replace_unk=replace_unk, ensemble=ensemble or [], prefix=prefix,
        prefix_file=prefix_file, sampling=sampling, temperature=temperature, seed=seed,
        token_log_probs=token_log_probs, engine=engine, compute_type=compute_type,
    )
    raise typer.Exit(code=code)


# Its options and body are in attncli/cli/align_command.py.
app.command("align")(align_command(_load_tensorflow))


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
        allowed=allow_host or [], token=token, limits=limits, console=_stderr_console(),
        load_tensorflow=lambda: _load_tensorflow(ctx), engine=engine,
        compute_type=compute_type,
    )
    raise typer.Exit(code=code)


@app.command("export")
def export(
    ctx: typer.Context,
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help=RUN_HELP)
    ],
    directory: Annotated[
        Path, typer.Argument(metavar="DIR",
                             help="Where the export goes: a new or empty directory.")
    ],
    format_name: Annotated[
        str, typer.Option("--format", metavar="savedmodel|ctranslate2",
                          help="savedmodel: a TensorFlow SavedModel; ctranslate2: a "
                          "CTranslate2 model directory (Transformer models) with the run's "
                          "tokenizer files, for translate --engine ctranslate2.")
    ] = "savedmodel",
    beam: Annotated[
        int | None,
        typer.Option(help="Beam size of the beam signature; 1 is greedy.",
                     show_default="the run's"),
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(help="Length penalty exponent of both signatures.",
                     show_default="the run's"),
    ] = None,
    n_best: Annotated[
        int | None,
        typer.Option(help="Translations per sentence of the beam signature.",
                     show_default="the run's"),
    ] = None,
    samples: Annotated[
        list[str] | None,
        typer.Option("--sample", metavar="TEXT", help="A sentence for the check (repeatable).",
                     show_default="the run's first two validation sentences"),
    ] = None,
    ensemble: Annotated[
        list[Path] | None,
        typer.Option("--ensemble", metavar="RUN",
                     help="Another run (or model directory) trained on the "
                     "same data, exported together with RUN as one ensemble (as translate "
                     "--ensemble decodes it). Repeat for more."),
    ] = None,
    sampling: Annotated[
        str | None, typer.Option(metavar="random|topk:K|topp:P",
                                 help="How the sample signature draws (as translate "
                                 "--sampling).", show_default="random")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(metavar="T", help="The sample signature's temperature.",
                                   show_default="1.0")
    ] = None,
):
    """Export a trained model: a TensorFlow SavedModel (strings in, translations out), or
    a CTranslate2 model directory (--format ctranslate2).

    SavedModel: signatures greedy and beam (also with prefixes) and sample, tokenizers in
    the graph. Either is checked in a fresh Python.
    """
    from attncli.cli.export_command import export as run_export

    code = run_export(
        format_name=format_name,
        run_path=run, destination=directory, beam=beam, alpha=alpha, n_best=n_best,
        samples=samples or [], console=_stderr_console(),
        load_tensorflow=lambda: _load_tensorflow(ctx), ensemble=ensemble or [],
        sampling=sampling, temperature=temperature,
    )
    raise typer.Exit(code=code)


@app.command("inspect-weights")
def inspect_weights(
    ctx: typer.Context,
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help=RUN_HELP)
    ],
    text: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="Translate this and show its attention matrix."),
    ] = None,
    input_file: Annotated[
        Path | None,
        typer.Option("--input", metavar="FILE",
                     help="File with one sentence per line: each one's matrix "
                     "(and with --png-dir its picture)."),
    ] = None,
    beam: Annotated[
        int | None, typer.Option(help="Beam size for --text and --input; 1 is greedy.",
                                 show_default="the run's")
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Also save the matrix as a labelled PNG picture."),
    ] = None,
    png_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR",
                     help="Save one PNG per sentence into this folder, named by line "
                     "number (1.png, 2.png, ...; 01.png, ... from 10 lines on)."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(metavar="FILE",
                     help="Also write the sentence's attention as one self-contained HTML "
                     "page (every attention, layer, head and step) that opens with no "
                     "server."),
    ] = None,
    cell_weights: Annotated[
        bool, typer.Option("--cell-weights", help="Print each weight in its cell of the "
                           "PNG, with --decimals digits.")
    ] = False,
    step: Annotated[
        int | None,
        typer.Option(metavar="T", help="Walk through the attention of output token T (1-based), "
                          "as score-demo does."),
    ] = None,
    params: Annotated[
        bool, typer.Option("--params", help="List every weight tensor with its statistics.")
    ] = False,
    decimals: Annotated[int, typer.Option(help="Digits after the point.")] = 3,
    attention: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Which attention: cross (the decoder's over the source), "
                          "encoder or decoder (their self-attention), or alignment (the "
                          "alignment layer of a model with one).",
                     show_default="cross"),
    ] = None,
    layer: Annotated[
        int | None, typer.Option(help="The block of that attention (1-based).",
                                 show_default="the last")
    ] = None,
    head: Annotated[
        int | None, typer.Option(help="One head (1-based).", show_default="the mean of all")
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(metavar="TEXT",
                     help="Show the attention over this translation of --text instead of "
                     "the model's own (forced decoding), and print its score."),
    ] = None,
    words: Annotated[
        bool, typer.Option("--words", help="Fold the tokens into the space-separated words "
                           "of the texts: a row word is the mean of its pieces' rows, a "
                           "column word the sum of its pieces' columns.")
    ] = False,
    gold: Annotated[
        str | None,
        typer.Option(metavar="LINE",
                     help="Gold links of --text and --reference (talp: 1-based i-j sure, "
                     "ipj possible; i a source word), marked on the words view."),
    ] = None,
):
    """Look inside a trained model: attention heatmaps, one step's scores, the weights."""
    _load_tensorflow(ctx)
    from attncli.cli.inspect_command import inspect

    inspect(run_path=run, text=text, beam=beam, png=png, step=step, params=params,
            decimals=decimals, attention=attention, layer=layer, head=head,
            input_file=input_file, png_dir=png_dir, cell_weights=cell_weights, html=html,
            reference=reference, words=words, gold=gold)
