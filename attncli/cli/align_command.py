"""`attncli align RUN`: sentence pairs in, word alignments read off the attention out.

Pairs come from `--input FILE` (`source TAB target` per line), `--source F --target F`
(line-aligned), or stdin (tab-separated lines, each answered as it is read, as
`attncli translate` reads stdin). For each pair the model is fed the given translation
(`attncli.search.forced`), and its attention is read as links
(`attncli.alignment.extraction` states the rule; `--reverse` joins a model of the other
direction by `attncli.alignment.symmetrization`).

Out (stdout), one line per pair:
    text   the links in the Pharaoh format, `i-j` for source word `i` and target word
           `j`, counted from 0 over the space-separated words, source first (an empty
           line for a pair with an empty side)
    json   one object per pair: `line`, `source_words`, `target_words`, `links` (a list
           of `[i, j]`); with `--reverse` also `forward` and `reverse` (its links flipped
           to source first) before symmetrisation; with `--gold` also `scores`

With `--gold FILE` (talp, line-aligned with the pairs), text prints one line of AER,
precision and recall (percentages) and the counts they are made of instead of the
links; json adds a last object `{"totals": {...}}` with the same figures and `pairs`.
Files show a count on stderr; stdin shows nothing.
"""

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, NamedTuple

import typer

from attncli.alignment.extraction import (
    ATTENTIONS, EXTRACTIONS, AttentionChoice, ChoiceError, Extraction, FoldingError,
    forced_links, threshold_methods,
)
from attncli.links import Scores, format_pharaoh, score_sentence
from attncli.alignment.symmetrization import (
    JOINED_WEIGHTS, METHODS, SYMMETRIZATIONS, symmetrize,
)
from attncli.cli.align_inputs import GoldLinks, PairSource
from attncli.cli.options import discard_stdout, import_tensorflow, stderr_console
from attncli.cli.runs import model_directory
from attncli.errors import AttncliError, clipped, shown
from attncli.search.loading import load_model

FORMATS = ("text", "json")
DEFAULT_SYMMETRIZATION = "grow-diag-final-and"
INTERRUPTED = 130


def command(
    ctx: typer.Context,
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help="A run directory (or a model directory) "
                             "trained source -> target.")
    ],
    input_file: Annotated[
        Path | None,
        typer.Option("--input", metavar="FILE",
                     help="Pairs, one per line: source, a tab, its translation."),
    ] = None,
    source_file: Annotated[
        Path | None,
        typer.Option("--source", metavar="FILE", help="Sources, one per line (with "
                     "--target)."),
    ] = None,
    target_file: Annotated[
        Path | None,
        typer.Option("--target", metavar="FILE", help="Their translations, line-aligned "
                     "with --source."),
    ] = None,
    attention: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="cross: the decoder's attention over the "
                     "source; alignment: the alignment layer (model.alignment_layer).",
                     show_default="alignment where the model has it, else cross"),
    ] = None,
    layer: Annotated[
        int | None, typer.Option(help="The cross-attention block (1-based).",
                                 show_default="the last")
    ] = None,
    head: Annotated[
        int | None, typer.Option(help="One head (1-based).",
                                 show_default="the mean of all")
    ] = None,
    extraction: Annotated[
        str | None,
        typer.Option(metavar="METHOD", help="argmax: each target word's best source "
                     "word; mutual-argmax: those links whose target word is also the "
                     "source word's best (SimAlign); threshold: every source word "
                     "weighing at least --threshold.",
                     show_default="argmax, threshold with --threshold"),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="The least word weight of a link, in (0, 1].")
    ] = None,
    shift: Annotated[
        bool,
        typer.Option("--shift", help="Read target word j's links at the step whose "
                     "input is j (shift-att, Chen et al. 2020)."),
    ] = False,
    reverse: Annotated[
        Path | None,
        typer.Option(metavar="RUN2", help="A run trained target -> source: its links, "
                     "flipped, are joined with RUN's (--symmetrize)."),
    ] = None,
    symmetrize: Annotated[
        str | None,
        typer.Option(metavar="METHOD", help=f"With --reverse: {', '.join(SYMMETRIZATIONS)} "
                     "(of the links, Koehn et al. 2003), or mean (of the word weights, "
                     "then --extraction).", show_default=DEFAULT_SYMMETRIZATION),
    ] = None,
    gold: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Gold links (talp: 1-based i-j sure, ipj "
                     "possible), line-aligned: print AER, precision and recall instead."),
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", metavar="FORMAT",
                          help="text (Pharaoh links) or json (words, links, scores).")
    ] = "text",
    batch_size: Annotated[int, typer.Option(help="Pairs run through the model at once.")] = 32,
):
    """Word alignments of given translations, read off the model's attention.

    One line of links i-j per pair (source word i, target word j, counted from 0
    over the space-separated words); with --gold, AER against gold links.
    """
    settings = check_settings(
        input_file=input_file, source_file=source_file, target_file=target_file,
        attention=attention, layer=layer, head=head, extraction=extraction,
        threshold=threshold, shift=shift, reverse=reverse, symmetrize=symmetrize,
        gold=gold, output_format=output_format,
        batch_size=batch_size,
    )
    raise typer.Exit(code=run_align(run, settings, stderr_console(),
                                    lambda: import_tensorflow(ctx)))


class Settings(NamedTuple):
    """The command line's choices, checked (`check_settings`) before anything is read."""

    input_file: Path | None
    source_file: Path | None
    target_file: Path | None
    choice: object  # attncli.alignment.extraction.AttentionChoice
    extraction: object  # attncli.alignment.extraction.Extraction
    reverse: Path | None
    symmetrization: str | None  # with `reverse` only
    gold: Path | None
    output_format: str
    batch_size: int


def check_settings(*, input_file, source_file, target_file, layer, head, extraction,
                   threshold, shift, reverse, symmetrize, gold, output_format, batch_size,
                   attention=None):
    """The `Settings` of the options; each bad value or combination is one line."""
    if output_format not in FORMATS:
        raise AttncliError(f"--format {shown(output_format)} is not a format; choose "
                           f"one of {', '.join(FORMATS)}")
    if batch_size < 1:
        raise AttncliError(f"--batch-size must be >= 1. Received: --batch-size={batch_size}")
    if attention is not None and attention not in ATTENTIONS:
        raise AttncliError(f"--attention {shown(attention)}: choose one of "
                           f"{', '.join(ATTENTIONS)}")
    for name, value in (("--layer", layer), ("--head", head)):
        if value is not None and value < 1:
            raise AttncliError(f"{name} counts from 1. Received: {name}={value}")
    if (source_file is None) != (target_file is None):
        given, missing = (("--source", "--target") if target_file is None
                          else ("--target", "--source"))
        raise AttncliError(f"{given} needs {missing}: give the two line-aligned files")
    if input_file is not None and source_file is not None:
        raise AttncliError("give the pairs with --input or with --source and --target, "
                           "not both")
    method = extraction or ("threshold" if threshold is not None else "argmax")
    if method not in EXTRACTIONS:
        raise AttncliError(f"--extraction {shown(method)}: choose one of "
                           f"{', '.join(EXTRACTIONS)}")
    if EXTRACTIONS[method].takes_threshold and threshold is None:
        raise AttncliError(f"--extraction {method} needs --threshold F, the least word "
                           "weight of a link, in (0, 1]")
    if not EXTRACTIONS[method].takes_threshold and threshold is not None:
        raise AttncliError(f"--threshold goes with --extraction "
                           f"{' or '.join(threshold_methods())}; {method} takes none")
    if threshold is not None and not 0 < threshold <= 1:
        raise AttncliError(f"--threshold must be in (0, 1]. Received: --threshold={threshold}")
    if symmetrize is not None and reverse is None:
        raise AttncliError("--symmetrize joins RUN's links with those of --reverse RUN2: "
                           "add --reverse, or drop --symmetrize")
    if symmetrize is not None and symmetrize not in METHODS:
        raise AttncliError(f"--symmetrize {shown(symmetrize)}: choose one of "
                           f"{', '.join(METHODS)}")
    return Settings(
        input_file, source_file, target_file,
        AttentionChoice(layer, head, shift, attention),
        Extraction(method, threshold), reverse,
        (symmetrize or DEFAULT_SYMMETRIZATION) if reverse is not None else None,
        gold, output_format, batch_size,
    )


class Aligner:
    """One model's links of a chunk of pairs (`direction`: `forward` reads pairs as they
    are, `reverse` reads each target as a source and flips its links)."""

    def __init__(self, run_path, settings, direction):
        loaded = load_model(model_directory(run_path))
        self.translator = loaded.translator(attention_weights=False)
        self.levels = loaded.source_tokenizer.level, loaded.target_tokenizer.level
        self.settings, self.direction = settings, direction
        self.option = "" if direction == "forward" else f" for --reverse {run_path}"
        # Pairs whose words the model's tokens do not spell: `(where, why)`.
        self.unfolded = []

    def read(self, pairs):
        """`(links, weights)` of each of `pairs`: the links source word first, and the
        word weights they were read from, `(target words, source words)` of this
        model's reading (None, with no links, for an empty side or words that do not
        fold)."""
        from attncli.search.forced import force  # imports TensorFlow

        sources = [pair.source for pair in pairs]
        targets = [pair.target for pair in pairs]
        if self.direction == "reverse":
            sources, targets = targets, sources
        results = force(self.translator, sources, targets, self.settings.batch_size,
                        log_probs=False)
        read = []
        for pair, forced in zip(pairs, results):
            try:
                attention, found = forced_links(forced, self.levels, self.settings.choice,
                                                self.settings.extraction)
                weights = attention.weights
            except ChoiceError as error:
                raise AttncliError(f"--{error}{self.option}") from None
            except FoldingError as error:
                # One such pair (a word read as [UNK]) gives no links, and is counted:
                # it must not stop the scoring of every other pair.
                side = (" (--reverse's model reads the target as its source)"
                        if self.direction == "reverse" else "")
                self.unfolded.append((pair.where, clipped(str(error), 400) + side))
                found, weights = frozenset(), None
            if self.direction == "reverse":
                found = frozenset((i, j) for j, i in found)
            read.append((found, weights))
        return read


def run_align(run, settings, console, load_tensorflow):
    """Run `attncli align` with checked `settings`; returns the exit code."""
    model_directory(run)
    if settings.reverse is not None:
        model_directory(settings.reverse)
    source = PairSource(settings.input_file, settings.source_file, settings.target_file)
    golds = GoldLinks(settings.gold) if settings.gold is not None else None
    if golds is not None and source.pairs is not None:
        golds.check_count(source.count, _named(settings))
        for index, pair in enumerate(source.pairs):
            golds.of(index, pair)
    if source.interactive:
        console.print("reading pairs from the terminal: source, a tab, its translation, one "
                      "per line; Ctrl-D ends", highlight=False)
    load_tensorflow()
    forward = Aligner(run, settings, "forward")
    reverse = Aligner(settings.reverse, settings, "reverse") if settings.reverse else None
    written, totals = 0, Scores(0, 0, 0, 0)
    show = source.count is not None and console.is_terminal
    try:
        with console.status("aligning") if show else nullcontext() as status:
            for pairs in source.chunks(settings.batch_size):
                records = _aligned(pairs, forward, reverse, settings)
                lines = []
                for offset, (pair, record) in enumerate(zip(pairs, records)):
                    if golds is not None:
                        record["scores"] = score_sentence(
                            record["links"], golds.of(written + offset, pair))
                        totals = totals + record["scores"]
                    lines.append(_line(written + offset + 1, record, settings))
                if settings.output_format == "json" or golds is None:
                    sys.stdout.write("".join(line + "\n" for line in lines))
                    sys.stdout.flush()
                written += len(pairs)
                if status is not None:
                    status.update(f"aligning: {written} of {source.count} pairs")
        if golds is not None:
            golds.check_count(written, _named(settings))
            _write_totals(totals, written, settings.output_format)
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error, and nothing more to say.
        discard_stdout()
        return 0
    except KeyboardInterrupt:
        console.print(f"interrupted: {written} pair(s) aligned", highlight=False)
        return INTERRUPTED
    if source.count is not None:
        console.print(f"{written} pairs aligned", highlight=False)
    _report_unfolded(forward, reverse)
    return 0


def _report_unfolded(*aligners):
    """Say on stderr how many pairs got no links because their words could not be
    folded, and why the first did."""
    unfolded = [each for aligner in aligners if aligner is not None
                for each in aligner.unfolded]
    if unfolded:
        where, why = unfolded[0]
        print(f"warning: {len(unfolded)} pair(s) got no links, their words not being the "
              f"model's; the first, {where}: {why}", file=sys.stderr)


def _named(settings):
    if settings.input_file is not None:
        return f"--input {settings.input_file}"
    if settings.source_file is not None:
        return "--source/--target"
    return "stdin"


def _aligned(pairs, forward, reverse, settings):
    """One record per pair: its words and links (and with `reverse`, both directions')."""
    records = [{"source_words": pair.source.split(), "target_words": pair.target.split(),
                "links": frozenset()} for pair in pairs]
    filled = [index for index, pair in enumerate(pairs) if not pair.empty]
    if not filled:
        return records
    chosen = [pairs[index] for index in filled]
    read = forward.read(chosen)
    if reverse is None:
        for index, (found, _) in zip(filled, read):
            records[index]["links"] = found
        return records
    for index, (found, weights), (flipped, reverse_weights) in zip(
            filled, read, reverse.read(chosen)):
        records[index].update(forward=found, reverse=flipped, links=_joined(
            found, weights, flipped, reverse_weights, settings))
    return records


def _joined(forward, weights, reverse, reverse_weights, settings):
    """The links of both directions joined by `settings.symmetrization`: of their links,
    or of their weights (`JOINED_WEIGHTS`), then read by `settings.extraction`. A pair
    one model cannot read (no weights) takes the other's links."""
    method = settings.symmetrization
    if method not in JOINED_WEIGHTS:
        return symmetrize(forward, reverse, method)
    if weights is None or reverse_weights is None:
        return forward if reverse_weights is None else reverse
    return settings.extraction.links(JOINED_WEIGHTS[method](weights, reverse_weights))


def _pairs_of(links):
    return [[i, j] for i, j in sorted(links)]


def _line(number, record, settings):
    """The stdout line of one pair's `record`."""
    if settings.output_format == "text":
        return format_pharaoh(record["links"])
    line = {"line": number, "source_words": record["source_words"],
            "target_words": record["target_words"], "links": _pairs_of(record["links"])}
    for direction in ("forward", "reverse"):
        if direction in record:
            line[direction] = _pairs_of(record[direction])
    if "scores" in record:
        line["scores"] = _rounded(record["scores"].to_dict())
    return json.dumps(line, ensure_ascii=False)


def _rounded(figures):
    return {name: round(value, 4) if isinstance(value, float) else value
            for name, value in figures.items()}


def _write_totals(totals, pairs, output_format):
    if output_format == "json":
        sys.stdout.write(json.dumps({"totals": {**_rounded(totals.to_dict()),
                                                "pairs": pairs}}) + "\n")
    else:
        sys.stdout.write(
            f"AER {100 * totals.aer:.2f}  precision {100 * totals.precision:.2f}  recall "
            f"{100 * totals.recall:.2f}  ({pairs} pairs; |A| {totals.predicted}, |S| "
            f"{totals.sure}, |A∩S| {totals.sure_hits}, |A∩P| {totals.possible_hits})\n"
        )
    sys.stdout.flush()
