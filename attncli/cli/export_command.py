"""`attncli export RUN DIR [--format FORMAT]`: the run's model in a format other programs
run, checked in a fresh process. `FORMATS` lists them, each an `ExportFormat`: its
description, the options it takes beyond RUN, DIR, `--beam`, `--alpha`, `--n-best` and
`--sample`, and the function that writes and checks it.

`savedmodel` (the default): the SavedModel (`attncli.search.serving`) translates strings
to strings with a `greedy` and a `beam` signature, the same with a prefix per sentence
(`greedy_prefix`, `beam_prefix`) and a `sample` signature that draws a translation with a
seed per sentence; the beam's width, alpha, n-best and maximum length are the run's
decoding settings unless `--beam`, `--alpha` or `--n-best` change them, as in `attncli
translate`, and the sampling is `--sampling` and `--temperature`'s (the whole
distribution at temperature 1 by default); with `--ensemble OTHER_RUN` (repeatable) the
graph decodes RUN and the other runs as one ensemble, as `attncli translate --ensemble`
does. DIR must be new or empty: the export is written into a temporary directory beside
it and takes its name with one rename once it has passed its check, so DIR never holds
half an export and nothing of the user's is ever replaced.

The check (`export_check`): a fresh Python (`python -I`) that imports TensorFlow and
tensorflow-text only, not attncli, loads the export and translates sample sentences with
every signature; the translations must equal what `attncli translate` prints for them
here. What it found goes to stderr; stdout stays empty.

`ctranslate2`: a CTranslate2 model directory, for Transformer models only
(`attncli.export.ctranslate2_export` says what it holds and how it is checked: greedy and
beam translations of `CTRANSLATE2_SAMPLES` validation sentences, by a fresh Python without
TensorFlow, equal to `attncli translate`'s). It is written and renamed into place as the
SavedModel is.
"""

from pathlib import Path
from typing import Annotated, Callable, NamedTuple

import typer

from attncli.cli.export_check import (
    CTRANSLATE2_SAMPLES, best_texts, check_prefixes, run_check, sample_sentences,
    validation_sentences, vocabulary_sentences,
)
from attncli.cli.options import RUN_HELP, import_tensorflow, stderr_console
from attncli.cli.runs import asked_decoding, model_directory, run_name
from attncli.config.search import Sampling
from attncli.errors import AttncliError, shown
from attncli.export import ctranslate2_export as ctranslate2_files
from attncli.export.convertible import ctranslate2_refusal
from attncli.files import clear_abandoned, new_directory, vacant
from attncli.model.saving import read_model_config
from attncli.search.loading import load_model


def command(
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
    code = export(
        format_name=format_name,
        run_path=run, destination=directory, beam=beam, alpha=alpha, n_best=n_best,
        samples=samples or [], console=stderr_console(),
        load_tensorflow=lambda: import_tensorflow(ctx), ensemble=ensemble or [],
        sampling=sampling, temperature=temperature,
    )
    raise typer.Exit(code=code)


def claim_destination(destination, console):
    """Refuse a DIR that holds anything, and remove what an interrupted export to it left
    (every format writes into a new or empty directory, never replacing anything)."""
    if not vacant(destination):
        raise AttncliError(
            f"{destination} exists and is not an empty directory; give a new directory "
            "(an export never replaces anything)"
        )
    for path in clear_abandoned(destination):
        console.print(f"removed {path}, what an interrupted export to {destination} left",
                      highlight=False, markup=False, soft_wrap=True)


class ExportFormat(NamedTuple):
    """One format of `attncli export --format`.

    Attributes:
        description: what DIR holds, for `--help` and errors.
        options: the command-line options the format takes beyond those every format does
            (`--ensemble`, `--sampling`, `--temperature`), as `export` names them.
        export: the function that writes and checks it, called with `export`'s arguments;
            returns the exit code.
    """

    description: str
    options: frozenset
    export: Callable


def export(*, format_name="savedmodel", **arguments):
    """Run `attncli export`: the format's `export` with `arguments`; returns the process
    exit code. An option the format does not take is one line."""
    chosen = FORMATS.get(format_name)
    if chosen is None:
        raise AttncliError(f"--format {shown(format_name)} is not a format; choose one of "
                           f"{', '.join(FORMATS)}")
    for name, flag in (("ensemble", "--ensemble"), ("sampling", "--sampling"),
                       ("temperature", "--temperature")):
        if arguments.get(name) not in (None, (), []) and name not in chosen.options:
            raise AttncliError(f"{flag} is an option of other formats; --format "
                               f"{format_name} writes {chosen.description}: drop {flag}")
    return chosen.export(**{name: value for name, value in arguments.items()
                            if name in chosen.options or name not in OPTIONAL})


def export_saved_model(*, run_path, destination, beam, alpha, n_best, samples, console,
                       load_tensorflow, ensemble=(), sampling=None, temperature=None):
    """Write and check a SavedModel; returns the process exit code."""
    destination = Path(destination)
    try:
        drawing = Sampling.parse("random" if sampling is None else sampling,
                                 1.0 if temperature is None else temperature)
    except ValueError as error:
        raise AttncliError(f"--sampling: {error}") from None
    directory = model_directory(run_path)
    members = [directory, *(model_directory(path) for path in ensemble)]
    claim_destination(destination, console)
    load_tensorflow()

    from attncli.search import serving  # imports TensorFlow
    from attncli.search.ensemble import load_ensemble

    loaded = load_ensemble(members)
    greedy = asked_decoding(loaded.search, beam=1, alpha=alpha)
    decodings = {"greedy": greedy, "sample": greedy._replace(sampling=drawing),
                 "beam": asked_decoding(loaded.search, beam=beam, alpha=alpha, n_best=n_best)}
    samples = list(samples) or sample_sentences(loaded.source_tokenizer, run_path)
    # The translators the export's signatures call: the texts they give here are those the
    # export must reproduce, and the export reuses their traces.
    translators = serving.signature_translators(
        loaded.model, loaded.source_tokenizer, loaded.target_tokenizer, decodings,
        source_end=loaded.source_end,
    )
    prefixes = check_prefixes(translators["greedy"], samples)
    expected = {name: best_texts(translators[name.removesuffix("_prefix")], samples,
                                 prefixes if "prefixes" in inputs else None)
                for name, inputs in serving.INPUTS.items()}
    try:
        with new_directory(destination) as staging:
            with console.status(f"exporting {directory} to {destination}"):
                serving.write_saved_model(staging, translators)
            with console.status("loading the export in a fresh Python"):
                served = run_check(staging, samples, prefixes)
            if served != expected:
                raise AttncliError(
                    f"the export translated {shown(samples)} as {shown(served)} where "
                    f"attncli translate gives {shown(expected)}; nothing was written"
                )
            ops = serving.custom_ops(staging)
    except FileExistsError:
        raise AttncliError(
            f"{destination} was created or filled while exporting; nothing was replaced, "
            "give a new directory"
        ) from None
    report(console, destination, decodings, ops, samples, prefixes, served)
    return 0


def report(console, destination, decodings, ops, samples, prefixes, served):
    """What was written (each signature's `Decoding`) and what the check found, on
    stderr."""

    def say(text):
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    beam, drawing = decodings["beam"].search, decodings["sample"].sampling
    say(f"exported to {destination}: a TensorFlow SavedModel")
    say(f"  signatures: greedy (also serving_default); beam with beam_size={beam.beam_size}, "
        f"n_best={beam.n_best or beam.beam_size}, alpha={beam.alpha}, at most "
        f"{beam.max_length_ratio} x source + {beam.max_length_offset} tokens; "
        f"greedy_prefix and beam_prefix; sample ({drawing}, temperature "
        f"{drawing.temperature:g})")
    say("  inputs: texts string (batch,); prefixes string (batch,) (the _prefix signatures "
        "and sample); seeds int64 (batch,) (sample)")
    say("  outputs: translation string (batch,), score float32 (batch,), translations "
        "string (batch, n), scores float32 (batch, n)")
    say("  tensorflow-text ops: " + (", ".join(ops) if ops else "none")
        + " (run `import tensorflow_text` before loading it)")
    say("checked in a fresh Python (TensorFlow and tensorflow-text only, attncli not "
        "imported): every signature translates as attncli translate does")
    for index, sample in enumerate(samples):
        say(f"  {shown(sample)} -> greedy {shown(served['greedy'][index])}, "
            f"beam {shown(served['beam'][index])}")
        say(f"    prefix {shown(prefixes[index])} -> greedy "
            f"{shown(served['greedy_prefix'][index])}, beam "
            f"{shown(served['beam_prefix'][index])}, sample (seed 0) "
            f"{shown(served['sample'][index])}")


def export_ctranslate2(*, run_path, destination, beam, alpha, n_best, samples, console,
                       load_tensorflow):
    """Write and check a CTranslate2 model directory; returns the process exit code."""
    destination = Path(destination)
    directory = model_directory(run_path)
    refused = ctranslate2_refusal(read_model_config(directory)["model"])
    if refused is not None:
        raise AttncliError(f"cannot export {run_path} as ctranslate2: {refused}")
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise AttncliError("--format ctranslate2 needs the ctranslate2 package: pip install "
                           "'attncli[ctranslate2]'") from None
    claim_destination(destination, console)
    load_tensorflow()
    loaded = load_model(directory)
    decodings = {"greedy": asked_decoding(loaded.search, beam=1, alpha=alpha),
                 "beam": asked_decoding(loaded.search, beam=beam, alpha=alpha, n_best=n_best)}
    # A blank line is not translated by `attncli translate`: there is nothing to compare.
    samples = [sample for sample in samples if sample.strip()] or (
        validation_sentences(run_path, CTRANSLATE2_SAMPLES)
        or vocabulary_sentences(loaded.source_tokenizer))
    wanted = {name: ctranslate2_files.expected(
                  loaded.translator(decoding, attention_weights=False), samples)
              for name, decoding in decodings.items()}
    searches = {name: decoding.search for name, decoding in decodings.items()}
    name = run_name(run_path, directory)
    try:
        with new_directory(destination) as staging:
            with console.status(f"converting {directory} for CTranslate2"):
                ctranslate2_files.write(staging, directory, loaded, searches["beam"], name,
                                        (samples[0], wanted["greedy"][0][0]), str(destination))
            with console.status("translating with it in a fresh Python"):
                found = ctranslate2_files.run_check(staging, samples, searches)
            for search_name in searches:
                different = ctranslate2_files.difference(samples, search_name, found[search_name],
                                                         wanted[search_name])
                if different is not None:
                    raise AttncliError(f"the export failed its check: {different}; nothing "
                                       "was written")
    except FileExistsError:
        raise AttncliError(
            f"{destination} was created or filled while exporting; nothing was replaced, "
            "give a new directory"
        ) from None
    beam_search = searches["beam"]

    def say(text):
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    say(f"exported to {destination}: a CTranslate2 model (float32; int8 when loaded with "
        "--compute-type int8), the run's tokenizer files and README.md")
    say(f"  decoding: beam_size={beam_search.beam_size}, n_best={beam_search.returned}, "
        f"alpha={beam_search.alpha}, at most {beam_search.max_length_ratio} x source + "
        f"{beam_search.max_length_offset} tokens; sources of at most "
        f"{ctranslate2_files.SOURCE_POSITIONS} tokens")
    say(f"checked in a fresh Python without TensorFlow: greedy and beam translations of "
        f"{len(samples)} sentence(s) are attncli translate's (tokens identical, scores "
        f"within {ctranslate2_files.SCORE_TOLERANCE:g})")
    say(f"  translate: attncli translate {destination} TEXT --engine ctranslate2")
    return 0


# The options only some formats take (`ExportFormat.options`).
OPTIONAL = frozenset({"ensemble", "sampling", "temperature"})

FORMATS = {
    "savedmodel": ExportFormat(
        "a TensorFlow SavedModel (strings in, translations out; TensorFlow Serving)",
        frozenset({"ensemble", "sampling", "temperature"}), export_saved_model,
    ),
    "ctranslate2": ExportFormat(
        "a CTranslate2 model directory with the run's tokenizer files (Transformer models)",
        frozenset(), export_ctranslate2,
    ),
}
