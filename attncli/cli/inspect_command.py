"""`attncli inspect-weights RUN`: look inside a trained model.

    --text "..."    translate it and print the attention matrix as a shaded table
    --input FILE    the same for every sentence of FILE (one per line)
    --png FILE      the same matrix as a labelled picture (its folder is created if
                    missing, as --png-dir's is)
    --png-dir DIR   one picture per sentence: DIR/1.png, DIR/2.png, ... numbered by
                    line (zero-padded to the same width), an empty line skipped
    --cell-weights  print each weight in its cell of the pictures (--decimals digits)
    --html FILE     the sentence's attention as one self-contained page: every
                    attention, layer, head and step, embedded (`attncli.serve.page`)
    --step T        score-demo's table for query T, of the record the model's
                    attention layer kept (`attncli.model.trace`): each key's score,
                    softmax weight and weighted value, and the context
    --params        every weight tensor with its statistics, the attention's own first
    --reference T   the attention over the given translation T of --text instead
                    of the model's own (forced decoding, `attncli.search.forced`);
                    its score is printed: log P / lp (the search's score), log P and
                    the perplexity per token
    --words         fold the tokens into the space-separated words of the texts: a
                    row word is the mean of its pieces' rows, a column word the sum
                    of its pieces' columns (the title says so); --step still walks
                    one token's step
    --gold LINE     the sentence pair's gold links (talp: 1-based `i-j` sure, `ipj`
                    possible; i a source word, j a word of --reference), marked on
                    the words view (--gold turns --words on)
    --attention cross|encoder|decoder|alignment, --layer L, --head H
                    which attention (`attncli.attentions`): the decoder's over the
                    source, the encoder's or the decoder's own (a model with
                    self-attention), or the alignment layer (a model with
                    `model.alignment_layer`: one layer, one head, what `attncli align`
                    reads); its block (the last by default) and one head (the mean of
                    the heads by default); --step then walks a query of that head
                    through x W_q, x W_k, x W_v, scores, softmax, weighted values and
                    sum (the alignment layer's: its query q_t, score q_t · (h_s W_a),
                    softmax, weighted h_s)

In the words view, the links of the attention shown, if it is over the source (the
cross-attention's or the alignment layer's own: each target word to the source word of
its largest word weight, as `translate --alignments` links them) are marked on its cells:
`+` in the table, a dot in the picture, with a legend; gold links `S` (sure) and `P`
(possible), a solid and a dashed square. The token view shows the weights alone (the
page marks links in both views). Every matrix is of the tokens shown, teacher-forced
over them where the search did not compute it (the alignment layer's always).

The matrices and steps are a `SentenceView` (`attncli.search.sentence_view`), which
`sentence_views` gives for the sentences asked. Everything asked for is printed to
stdout (it is the result of the command); a table wider than the terminal is cut into
blocks of columns, each repeating the row labels.
"""

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from attncli.links import parse_talp
from attncli.attentions import ATTENTIONS, LINKED, choices
from attncli.cli.fonts import glyph_notice
from attncli.cli.heatmap import heatmap_table, save_heatmap_png
from attncli.cli.inspect_views import (
    chosen_step, inspection_decoding, parameter_table, read_sentences, sentence_views,
    shown_matrix,
)
from attncli.cli.options import RUN_HELP, import_tensorflow
from attncli.cli.runs import model_directory, run_name
from attncli.cli.step_table import check_decimals, model_step_section, print_section
from attncli.cli.tables import print_fitted
from attncli.errors import AttncliError, clipped
from attncli.search.loading import load_model
from attncli.search.sentence_view import START_LABEL
from attncli.serve.page import check_html_path, write_offline_page

# Piped output is laid out this wide unless COLUMNS is set: the tables are the result.
PIPED_WIDTH = 200


def command(
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
    import_tensorflow(ctx)
    inspect(run_path=run, text=text, beam=beam, png=png, step=step, params=params,
            decimals=decimals, attention=attention, layer=layer, head=head,
            input_file=input_file, png_dir=png_dir, cell_weights=cell_weights, html=html,
            reference=reference, words=words, gold=gold)


def _check_options(*, text, input_file, beam, png, png_dir, cell_weights, step, params,
                   decimals, attention, layer, head, reference=None, gold=None):
    """Refuse every bad combination and value of options before the model is loaded;
    returns the `Gold` links of `--gold` (None without it)."""
    if text and input_file is not None:
        raise AttncliError("give --text or --input, not both")
    if reference is not None:
        if not text:
            raise AttncliError("--reference is the translation of one sentence: use it "
                               "with --text \"...\"")
        if not reference.strip():
            raise AttncliError("--reference is empty: give the translation to look at")
        if beam is not None:
            raise AttncliError("--beam searches for a translation, and with --reference "
                               "none is searched: drop --beam")
    if gold is not None:
        if reference is None:
            raise AttncliError("--gold links the words of a given translation: add "
                               "--reference \"...\"")
        if attention is not None and attention not in LINKED:
            raise AttncliError(f"--gold marks an attention over the source, not the "
                               f"{clipped(attention)} attention: drop --attention or "
                               "choose cross or alignment")
        gold = parse_talp(gold, where="--gold")
    sentences = bool(text) or input_file is not None
    if png is not None and png_dir is not None:
        raise AttncliError("give --png FILE (one picture) or --png-dir DIR, not both")
    if png is not None and input_file is not None:
        raise AttncliError("--png saves one picture; with --input give --png-dir DIR "
                           "for one picture per sentence")
    if step is not None and input_file is not None:
        raise AttncliError("--step walks one sentence's step: use it with --text")
    if (png is not None or png_dir is not None or step is not None) and not sentences:
        raise AttncliError("--png, --png-dir and --step need the sentence to look at: "
                           "add --text \"...\" or --input FILE")
    if cell_weights and png is None and png_dir is None:
        raise AttncliError("--cell-weights prints the weights in a picture's cells: add "
                           "--png FILE or --png-dir DIR")
    chosen = [name for name, value in (("--attention", attention), ("--layer", layer),
                                       ("--head", head)) if value is not None]
    if chosen and not sentences:
        raise AttncliError(f"{chosen[0]} needs the sentence to look at: add --text \"...\"")
    if attention is not None and attention not in ATTENTIONS:
        raise AttncliError(f"--attention {clipped(attention)}: choose {choices()}")
    for name, value in (("--layer", layer), ("--head", head)):
        if value is not None and value < 1:
            raise AttncliError(f"{name} must be >= 1, got {value}")
    if not (sentences or params):
        raise AttncliError(
            "nothing to inspect: give --text \"SENTENCE\" (with --png or --step), "
            "--input FILE and/or --params"
        )
    if beam is not None and beam < 1:
        raise AttncliError(f"--beam must be >= 1. Received: --beam={beam}")
    check_decimals(decimals)
    if step is not None and step < 1:
        raise AttncliError(f"--step counts output tokens from 1. Received: --step={step}")
    if png is not None:
        png = Path(png)
        if png.suffix.lower() != ".png":
            raise AttncliError(f"--png {png}: the picture is a PNG; name it with .png")
        if png.parent.exists() and not png.parent.is_dir():
            raise AttncliError(f"--png {png}: {png.parent} is a file, not a folder")
        if not png.parent.parent.is_dir():
            raise AttncliError(f"--png {png}: no such folder {png.parent.parent}")
    if png_dir is not None:
        png_dir = Path(png_dir)
        if png_dir.exists() and not png_dir.is_dir():
            raise AttncliError(f"--png-dir {png_dir} is a file; give a folder")
        if not png_dir.parent.is_dir():
            raise AttncliError(f"--png-dir {png_dir}: no such folder {png_dir.parent}")
    return gold


def _save_png(shown, path, caption, cell_decimals, option):
    """Write one picture; returns the characters no installed font has."""
    try:
        return save_heatmap_png(shown.columns, shown.rows, shown.weights, path,
                                title=caption, row_label=shown.row_label,
                                column_label=shown.column_label, cell_decimals=cell_decimals,
                                links=shown.links, sure=shown.sure, possible=shown.possible)
    except OSError as error:
        raise AttncliError(f"{option} {path}: cannot write it ({error.strerror})") from None


def _console():
    """stdout at the terminal's width; piped, `COLUMNS` or `PIPED_WIDTH` wide."""
    if sys.stdout.isatty() or "COLUMNS" in os.environ:
        return Console()
    return Console(width=PIPED_WIDTH)


def inspect(*, run_path, text, beam, png, step, params, decimals, attention=None,
            layer=None, head=None, input_file=None, png_dir=None, cell_weights=False,
            html=None, reference=None, words=False, gold=None):
    """Run `attncli inspect-weights`; returns the process exit code."""
    gold = _check_options(
        text=text, input_file=input_file, beam=beam, png=png, png_dir=png_dir,
        cell_weights=cell_weights, step=step, params=params, decimals=decimals,
        attention=attention, layer=layer, head=head, reference=reference, gold=gold,
    )
    words = words or gold is not None
    if html is not None:
        if not text:
            raise AttncliError("--html writes one sentence's page: use it with --text \"...\"")
        check_html_path(html)
    lines = [text] if text else (read_sentences(input_file) if input_file is not None else [])
    directory = model_directory(run_path)

    loaded = load_model(directory)
    shown = {}  # line number (1-based) -> (SentenceView, Matrix)
    record = None
    if lines:
        # Everything that can be refused is checked before any table is printed.
        decoding = inspection_decoding(loaded, beam)
        translator = loaded.translator(decoding)
        for number, view in sentence_views(loaded, translator, lines, reference).items():
            shown[number] = (view, shown_matrix(view, attention, layer, head, words, gold))
        if step is not None:
            record = chosen_step(shown[1][0], attention, layer, head, step)
        if png is not None:
            Path(png).parent.mkdir(exist_ok=True)
        if png_dir is not None:
            Path(png_dir).mkdir(exist_ok=True)
    out = _console()
    if params:
        print_fitted(out, parameter_table(loaded.model, decimals))
    if not lines:
        return 0
    search_name = ("the reference, forced" if reference is not None else
                   "greedy" if decoding.search.beam_size == 1
                   else f"beam {decoding.search.beam_size}")
    missing = set()
    for number, (view, matrix) in shown.items():
        text_out = view.hypotheses[view.shown]["text"]
        out.print(f"{view.source}  →  {text_out}", highlight=False, markup=False)
        if view.reference is not None:
            out.print(f"reference {view.reference.describe()}", highlight=False,
                      markup=False)
        print_fitted(out, heatmap_table(
            matrix.columns, matrix.rows, matrix.weights, decimals=decimals,
            title=f"{matrix.title} ({search_name})" + (matrix.note and f"\n{matrix.note}"),
            row_label=matrix.row_label,
            column_label=matrix.column_label, links=matrix.links, sure=matrix.sure,
            possible=matrix.possible,
        ))
        path, option = (png, "--png") if png is not None else (
            (Path(png_dir) / f"{number:0{len(str(len(lines)))}d}.png", "--png-dir")
            if png_dir is not None else (None, None)
        )
        if path is not None:
            caption = f"{view.source} → {text_out}\n{matrix.title}" + (
                matrix.note and f"\n{matrix.note}")
            if view.reference is not None:
                caption += f"\nreference {view.reference.describe()}"
            missing.update(_save_png(matrix, path, caption,
                                     decimals if cell_weights else None, option))
            out.print(f"saved {path}", highlight=False, markup=False)
    if missing:
        print(glyph_notice(sorted(missing)), file=sys.stderr)
    if html is not None:
        write_offline_page(html, shown[1][0], run_name(run_path, directory), decoding,
                           words=words, gold=gold, attention=attention)
        out.print(f"saved {html}", highlight=False, markup=False)
    if record is not None:
        tokens = shown[1][0].tokens
        previous = START_LABEL if record.step == 1 else tokens[record.step - 2]
        print_section(out, model_step_section(record, decimals, previous_token=previous))
    return 0
