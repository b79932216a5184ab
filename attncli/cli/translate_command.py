"""`attncli translate RUN [TEXT...]`: sentences in, translations out, line by line.

Sentences come from the arguments, `--input FILE` or stdin, one per line. stdout
gets exactly one line per input line (an empty line for an empty one), so the output
pastes beside the input; progress and the corpus metric of `--reference` go to
stderr. `translate_streams` reads the lines and writes the results (the formats
are its docstring's); `translate_tensorflow` and `translate_ctranslate2` translate them
with the engine `--engine` chooses.

`--token-log-probs` (with `--format json`) adds `token_log_probs` to each hypothesis:
`log p(y_t | y_<t, x)` of each of its tokens, `[END]` included, the terms the search
summed, so their sum is its `log P` (score x lp); a sampled token's under the model
itself (temperature 1, no cut), an ensemble's of its members' mean distribution.

`--ensemble OTHER_RUN` (repeatable) decodes RUN together with other runs trained on
the same data: at each step the search emits from the mean of their next-token
distributions (`attncli.search.ensemble`); the decoding settings are RUN's.

`--replace-unk` replaces each `[UNK]` of a word-level target by the source word it is
aligned to; on a subword- or character-level target it is refused (no `[UNK]` stands
for a whole word there).

`--engine ctranslate2` (with `--compute-type float32|int8`) translates an export of
`attncli export RUN DIR --format ctranslate2` with CTranslate2 and the run's tokenizer
files read without TensorFlow (`attncli.export.ctranslate2_engine`), which is never
imported: the same lines in every format, the json one without `token_log_probs`. The
options that need the TensorFlow search (`--alignments`, `--replace-unk`, `--ensemble`,
prefixes, sampling, `--token-log-probs`, `--reference`) are refused with it.

`--prefix TEXT` makes every translation begin with TEXT (as the model writes it: TEXT
is tokenized by the target tokenizer, its tokens forced, then the search goes on);
`--prefix-file FILE` gives each input line its own, line-aligned, an empty line for
none. `--sampling random|topk:K|topp:P` (with `--temperature T`, `--seed S`) draws
each translation at random instead of searching, `--n-best N` times per line
(`attncli.search.sampling` says what is reproducible). docs/decoding.md has the rules.
"""

from pathlib import Path
from typing import Annotated

import typer

from attncli.cli.engines import check_engine, refuse_tensorflow_options
from attncli.cli.options import RUN_HELP, ComputeType, import_tensorflow, stderr_console
from attncli.cli.translate_ctranslate2 import translate_exported
from attncli.cli.translate_streams import FORMATS
from attncli.cli.translate_tensorflow import translate_searched
from attncli.errors import AttncliError, shown


def command(
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
        import_tensorflow(ctx)
    code = translate(
        run_path=run, texts=texts or [], input_file=input_file, beam=beam, alpha=alpha,
        n_best=n_best, output_format=output_format, reference=reference,
        batch_size=batch_size, console=stderr_console(), alignments=alignments,
        replace_unk=replace_unk, ensemble=ensemble or [], prefix=prefix,
        prefix_file=prefix_file, sampling=sampling, temperature=temperature, seed=seed,
        token_log_probs=token_log_probs, engine=engine, compute_type=compute_type,
    )
    raise typer.Exit(code=code)


def translate(*, run_path, texts, input_file, beam, alpha, n_best, output_format, reference,
              batch_size, console, alignments=False, replace_unk=False, ensemble=(),
              prefix=None, prefix_file=None, sampling=None, temperature=None, seed=None,
              token_log_probs=False, engine="tensorflow", compute_type=None):
    """Run `attncli translate`; returns the process exit code."""
    if output_format not in FORMATS:
        raise AttncliError(
            f"--format {shown(output_format)} is not a format; choose one of {', '.join(FORMATS)}"
        )
    if token_log_probs and output_format != "json":
        raise AttncliError("--token-log-probs adds a field to each hypothesis of --format "
                           "json: add --format json")
    if batch_size < 1:
        raise AttncliError(f"--batch-size must be >= 1. Received: --batch-size={batch_size}")
    check_engine(engine, compute_type)
    if engine == "ctranslate2":
        refuse_tensorflow_options({
            "--alignments": alignments, "--replace-unk": replace_unk, "--ensemble": ensemble,
            "--prefix": prefix is not None, "--prefix-file": prefix_file is not None,
            "--sampling": sampling, "--temperature": temperature is not None,
            "--seed": seed is not None, "--token-log-probs": token_log_probs,
            "--reference": reference is not None})
        return translate_exported(run_path, texts, input_file, beam, alpha, n_best,
                                  output_format, batch_size, console, compute_type)
    return translate_searched(
        run_path=run_path, texts=texts, input_file=input_file, beam=beam, alpha=alpha,
        n_best=n_best, output_format=output_format, reference=reference,
        batch_size=batch_size, console=console, alignments=alignments,
        replace_unk=replace_unk, ensemble=ensemble, prefix=prefix, prefix_file=prefix_file,
        sampling=sampling, temperature=temperature, seed=seed,
        token_log_probs=token_log_probs,
    )
