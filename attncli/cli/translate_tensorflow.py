"""`attncli translate` with the TensorFlow search: a run (or an ensemble of runs) loaded,
each batch of lines searched or sampled, with prefixes, word alignments, `[UNK]`
replaced and the corpus metric of `--reference` as asked.
"""

import sys
from contextlib import nullcontext
from pathlib import Path

from attncli.cli.engines import not_exported
from attncli.cli.options import discard_stdout
from attncli.cli.runs import SAMPLING_OPTIONS, asked_decoding, model_directory, translate_lines
from attncli.cli.translate_streams import (
    BUFFERED_BATCHES, INTERRUPTED, check_alignment, format_line, line_prefixes, open_input,
    read_prefixes, read_references,
)
from attncli.config.search import requested_sampling
from attncli.errors import AttncliError, clipped
from attncli.search.alignments import align_translation
from attncli.search.evaluation import reference_form, reference_normaliser
from attncli.search.metrics import pronunciation_scores, translation_scores


def translate_searched(*, run_path, texts, input_file, beam, alpha, n_best, output_format,
                       reference, batch_size, console, alignments, replace_unk, ensemble,
                       prefix, prefix_file, sampling, temperature, seed, token_log_probs):
    """`attncli translate --engine tensorflow` (the default); returns the process exit
    code."""
    directory = model_directory(not_exported(run_path, "translate"))
    members = [directory, *(model_directory(path) for path in ensemble)]
    source = open_input(texts, input_file)
    references = read_references(reference, source.count) if reference is not None else None
    check_sampling(sampling, temperature, seed, beam, n_best)
    prefix, prefix_lines = read_prefixes(prefix, prefix_file, source.count)
    if source.interactive:
        console.print("reading sentences from the terminal, one per line; Ctrl-D ends",
                      highlight=False)

    from attncli.search.ensemble import load_ensemble  # imports TensorFlow

    written, best = 0, []
    try:
        loaded = load_ensemble(members)
        levels = loaded.source_tokenizer.level, loaded.target_tokenizer.level
        if replace_unk:
            check_replace_unk(levels[1])
        decoding = asked_decoding(loaded.search, beam=beam, alpha=alpha, n_best=n_best,
                                  sampling=sampling, temperature=temperature, seed=seed,
                                  prefix=prefix)
        translator = loaded.translator(
            decoding, attention_weights=output_format == "json" or alignments or replace_unk,
        )
        quiet = source.interactive or sys.stdout.isatty()
        with (nullcontext() if quiet else console.status("translating")) as status:
            for lines in source.batches(batch_size * BUFFERED_BATCHES):
                prefixes = line_prefixes(prefix, prefix_lines, prefix_file, written, len(lines))
                results = translate_with_prefixes(
                    translator, lines, batch_size, prefixes, decoding.seed, written, prefix_file
                )
                links = [None] * len(results)
                if alignments or replace_unk:
                    results, links = aligned(results, levels, translator, replace_unk)
                sys.stdout.write("".join(
                    format_line(written + row, result, output_format,
                                links[row - 1] if alignments else None, token_log_probs) + "\n"
                    for row, result in enumerate(results, start=1)
                ))
                sys.stdout.flush()
                written += len(lines)
                if references is not None:
                    best.extend(result.hypotheses[0].text if result else "" for result in results)
                if status is not None:
                    status.update(f"translating: {written} line(s) written")
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error, and nothing more to say.
        discard_stdout()
        return 0
    except KeyboardInterrupt:
        console.print(f"interrupted: {written} line(s) translated and written", highlight=False)
        return INTERRUPTED
    if prefix_lines is not None and len(prefix_lines) != written:
        raise AttncliError(f"--prefix-file {prefix_file} has {len(prefix_lines)} lines for "
                           f"{written} inputs; they must be line-aligned")
    if references is not None:
        check_alignment(Path(reference), references, written)
        task = loaded.metadata.get("task", "translation")
        line = reference_scores(task, best, references, loaded.target_tokenizer)
        console.print(line, highlight=False, soft_wrap=True)
    return 0


def aligned(results, levels, translator, replace_unk):
    """`(results, alignments)`: each result's hypotheses aligned (`[UNK]` replaced if
    `replace_unk`); an empty line (None) has no hypotheses to align."""
    detokenize = translator.detokenize if replace_unk else None
    pairs = [align_translation(result, *levels, detokenize) if result is not None
             else (None, []) for result in results]
    return [result for result, _ in pairs], [links for _, links in pairs]


def reference_scores(task, best, references, target_tokenizer):
    """The corpus metric of the best translations (strings) against the reference lines,
    scored as validation scores: references are first written the way the model's target
    side is (`reference_normaliser`), and the line says which form was compared."""
    normalise = reference_normaliser(target_tokenizer)
    if normalise is not None:
        references = normalise(references)
    form = reference_form(target_tokenizer)
    if task == "pronunciation":
        scores = pronunciation_scores(
            [text.split() for text in best], [[reference.split()] for reference in references]
        )
        return f"PER {scores.per:.2f}  WER {scores.wer:.2f}  ({scores.words} words; {form})"
    scores = translation_scores(best, references)
    return f"BLEU {scores.bleu:.2f}  chrF {scores.chrf:.2f}  ({form}; {scores.bleu_signature})"


def check_sampling(sampling, temperature, seed, beam, n_best):
    """Refuse, in one line and before TensorFlow loads, `--sampling`, `--temperature` and
    `--seed` that do not go with each other or `--beam` and `--n-best` (the `Decoding`
    is made once the run's search is read)."""
    try:
        requested_sampling(SAMPLING_OPTIONS, sampling, temperature, seed, beam, n_best)
    except ValueError as error:
        raise AttncliError(str(error)) from None


def check_replace_unk(target_level):
    """Refuse `--replace-unk` unless the target is word-level."""
    if target_level != "word":
        raise AttncliError(
            f"--replace-unk copies source words into [UNK] outputs of word-level models; "
            f"this model's target is {target_level}-level, where [UNK] is no whole word: "
            "drop --replace-unk"
        )


def translate_with_prefixes(translator, lines, batch_size, prefixes, seed, written, prefix_file):
    """`translate_lines`, a prefix that cannot be forced reported in one line (naming its
    line of `--prefix-file`)."""
    from attncli.search.translation import PrefixError  # imports TensorFlow

    try:
        return translate_lines(translator, lines, batch_size=batch_size, prefixes=prefixes,
                               seed=seed)
    except PrefixError as error:
        where = (f"--prefix-file {prefix_file} line {written + error.index + 1}: "
                 if prefix_file is not None else "--prefix: ")
        raise AttncliError(clipped(where + str(error), 400)) from None
