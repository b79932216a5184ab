"""`attncli translate RUN [TEXT...]`: sentences in, translations out, line by line.

Sentences come from the arguments, `--input FILE` or stdin, one per line. stdout
gets exactly one line per input line (an empty line for an empty one), so the output
pastes beside the input; progress and the corpus metric of `--reference` go to
stderr.

A file and stdin are read as they arrive (`attncli.cli.line_stream`) and translated
a batch at a time, each batch's lines written and flushed as soon as it is done:
at a terminal every line is answered when it is typed, a pipe that sends lines
slowly gets each answered within `WAIT` seconds, a file or a fast pipe is translated
in buffers of `BUFFERED_BATCHES` batches (sorted by length inside a buffer, they pad
less). Ctrl-C stops with exit code 130 and keeps what was written.

Formats:
    text   the translation; with `--n-best N` the N translations joined by " ||| "
    tsv    line number, rank, score and translation: one row per hypothesis
    json   one JSON object per input line: source, source tokens, and each
           hypothesis with its tokens, score and attention weights

`--alignments` adds each translation's word alignment in the Pharaoh format, `i-j` for
source word `i` and target word `j`, 0-based (`attncli.search.alignments` states the
rule), as OpenNMT-py's `-report_align`. The translation is printed as without it; `j`
counts its whitespace-separated words (`Don't` is one word, `hungry.` another):

    text   TRANSLATION ||| ALIGNMENT (with `--n-best N`: N such pairs, joined by " ||| ")
    tsv    a fifth column, the alignment
    json   `source_words` (the words `i` counts), and `words` and `alignment` in each
           hypothesis

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

import io
import json
import os
import stat
import sys
from contextlib import nullcontext
from pathlib import Path

from attncli.cli.engines import (
    check_engine, exported, not_exported, refuse_tensorflow_options, require_ctranslate2,
)
from attncli.cli.line_stream import LineReader, decode_utf8, list_batches
from attncli.cli.runs import model_directory, search_config, split_lines, translate_lines
from attncli.config.search import SamplingOptions, requested_sampling
from attncli.errors import AttncliError, clipped, shown

FORMATS = ("text", "tsv", "json")
BUFFERED_BATCHES = 4
WAIT = 0.05  # seconds a batch from a file or pipe waits for more lines after its first
INTERRUPTED = 130


class Input:
    """Where the sentences come from, and how they are batched.

    Attributes:
        lines: the lines of the arguments, or a `LineReader` of a file or stdin.
        count: the number of lines when known before translating (arguments, a regular
            file), else None.
        interactive: stdin is a terminal: each line is answered as soon as it is read.
    """

    def __init__(self, lines, count, interactive=False):
        self.lines, self.count, self.interactive = lines, count, interactive

    def batches(self, size):
        """Lists of at most `size` lines, in order, as they arrive."""
        if isinstance(self.lines, list):
            return list_batches(self.lines, size)
        return self.lines.batches(size, 0.0 if self.interactive else WAIT)


def _check_regular_file(path):
    """The number of lines of a regular file, read once to report a bad one before
    loading the model: empty, unreadable or not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise AttncliError(f"--input {path}: cannot read it ({error.strerror})") from None
    if not data:
        raise AttncliError(f"--input {path} is empty: give one sentence per line")
    return len(split_lines(decode_utf8(data, f"--input {path}")))


def open_input(texts, input_file, stdin=None):
    """The input lines: arguments, else the file, else stdin; files and stdin are read as
    they arrive (a file is checked first when it is a regular file, not a pipe)."""
    if texts and input_file is not None:
        raise AttncliError("give sentences as arguments or with --input, not both")
    if texts:
        lines = [" ".join(text.split("\n")) for text in texts]
        return Input(lines, len(lines))
    if input_file is not None:
        path = Path(input_file)
        try:
            is_regular = stat.S_ISREG(path.stat().st_mode)
        except FileNotFoundError:
            raise AttncliError(f"--input {path}: no such file") from None
        except OSError as error:
            raise AttncliError(f"--input {path}: cannot read it ({error.strerror})") from None
        count = _check_regular_file(path) if is_regular else None
        try:
            stream = path.open("rb")
        except OSError as error:
            raise AttncliError(f"--input {path}: cannot read it ({error.strerror})") from None
        return Input(LineReader(stream, f"--input {path}"), count)
    stdin = stdin if stdin is not None else sys.stdin
    if hasattr(stdin, "buffer"):
        stream = stdin.buffer
    else:  # a text stream without bytes underneath (a test's StringIO)
        stream = io.BytesIO(stdin.read().encode("utf-8"))
    return Input(LineReader(stream, "stdin"), None, interactive=stdin.isatty())


def aligned(results, levels, translator, replace_unk):
    """`(results, alignments)`: each result's hypotheses aligned (`[UNK]` replaced if
    `replace_unk`); an empty line (None) has no hypotheses to align."""
    from attncli.search.alignments import align_translation

    detokenize = translator.detokenize if replace_unk else None
    pairs = [align_translation(result, *levels, detokenize) if result is not None
             else (None, []) for result in results]
    return [result for result, _ in pairs], [links for _, links in pairs]


def format_line(number, result, output_format, alignments=None, token_log_probs=False):
    """The stdout text of one input line's result (no trailing newline).

    `alignments`, one `WordAlignment` per hypothesis (an empty list for an empty line),
    are printed as the module says; None: no alignments. `token_log_probs` adds each
    hypothesis's to the JSON format.
    """
    if output_format == "text":
        if result is None:
            return ""
        if alignments is not None:
            return " ||| ".join(f"{hypothesis.text} ||| {alignment.pharaoh()}"
                                for hypothesis, alignment in zip(result.hypotheses, alignments))
        return " ||| ".join(hypothesis.text for hypothesis in result.hypotheses)
    if output_format == "tsv":
        if result is None:
            return f"{number}\t1\t\t" + ("\t" if alignments is not None else "")
        return "\n".join(
            f"{number}\t{rank}\t{hypothesis.score:.4f}\t" + (
                hypothesis.text if alignments is None
                else f"{hypothesis.text}\t{alignments[rank - 1].pharaoh()}"
            )
            for rank, hypothesis in enumerate(result.hypotheses, start=1)
        )
    if result is None:
        empty = {"line": number, "source": "", "hypotheses": []}
        return json.dumps(empty if alignments is None else {**empty, "source_words": []})
    line = {"line": number, "source": result.source,
            "source_tokens": list(result.source_tokens)}
    if alignments is not None:
        line["source_words"] = [word.text for word in alignments[0].source_words]
    line["hypotheses"] = []
    for rank, hypothesis in enumerate(result.hypotheses):
        entry = {
            "text": hypothesis.text,
            "tokens": list(hypothesis.tokens),
            "score": round(float(hypothesis.score), 6),
            "weights": [
                [round(float(weight), 5) for weight in row] for row in hypothesis.weights
            ],
        }
        if alignments is not None:
            entry["words"] = [word.text for word in alignments[rank].target_words]
            entry["alignment"] = alignments[rank].pharaoh()
        if token_log_probs:
            entry["token_log_probs"] = [round(value, 6) for value in hypothesis.token_log_probs]
        line["hypotheses"].append(entry)
    return json.dumps(line, ensure_ascii=False)


def read_references(reference_path, count):
    """The lines of `--reference`, checked to align with the `count` inputs (if known)."""
    path = Path(reference_path)
    try:
        references = split_lines(decode_utf8(path.read_bytes(), f"--reference {path}"))
    except OSError as error:
        raise AttncliError(f"--reference {path}: cannot read it ({error.strerror})") from None
    if count is not None:
        check_alignment(path, references, count)
    return references


def check_alignment(path, references, count):
    """Raises unless there are as many reference lines as inputs."""
    if len(references) != count:
        raise AttncliError(
            f"--reference {path} has {len(references)} lines for {count} inputs; "
            "they must be line-aligned"
        )


def reference_scores(task, best, references, target_tokenizer):
    """The corpus metric of the best translations (strings) against the reference lines,
    scored as validation scores: references are first written the way the model's target
    side is (`reference_normaliser`), and the line says which form was compared."""
    from attncli.search.evaluation import reference_form, reference_normaliser
    from attncli.search.metrics import pronunciation_scores, translation_scores

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


# The options of sampling as the command line spells them.
SAMPLING_OPTIONS = SamplingOptions(
    sampling="--sampling", temperature="--temperature", seed="--seed", beam="--beam",
    n_best="--n-best", asking="--sampling random (or topk:K, topp:P)", per="line",
    value_prefix="--sampling: ",
)


def sampling_of(sampling, temperature, seed, beam, n_best):
    """The `Sampling` of `--sampling`, `--temperature` and `--n-best` (None without
    `--sampling`); options that do not go with it are one line."""
    try:
        return requested_sampling(SAMPLING_OPTIONS, sampling, temperature, seed, beam, n_best)
    except ValueError as error:
        raise AttncliError(str(error)) from None


def read_prefixes(prefix, prefix_file, count):
    """`(text, lines)`: the one prefix of `--prefix` (else None), or the lines of
    `--prefix-file` (else None), checked to align with the `count` inputs (if known)."""
    if prefix is not None and prefix_file is not None:
        raise AttncliError("give one prefix for every line with --prefix, or one per line "
                           "with --prefix-file, not both")
    if prefix is not None:
        if not prefix.strip() or "\n" in prefix:
            raise AttncliError(f"--prefix {shown(prefix)} is blank or holds a line break; "
                               "give the words every translation must begin with")
        return prefix, None
    if prefix_file is None:
        return None, None
    path = Path(prefix_file)
    try:
        lines = split_lines(decode_utf8(path.read_bytes(), f"--prefix-file {path}"))
    except OSError as error:
        raise AttncliError(f"--prefix-file {path}: cannot read it ({error.strerror})") from None
    if count is not None and len(lines) != count:
        raise AttncliError(f"--prefix-file {path} has {len(lines)} lines for {count} inputs; "
                           "they must be line-aligned (an empty line for no prefix)")
    return None, lines


def check_replace_unk(target_level):
    """Refuse `--replace-unk` unless the target is word-level."""
    if target_level != "word":
        raise AttncliError(
            f"--replace-unk copies source words into [UNK] outputs of word-level models; "
            f"this model's target is {target_level}-level, where [UNK] is no whole word: "
            "drop --replace-unk"
        )


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
    directory = model_directory(not_exported(run_path, "translate"))
    members = [directory, *(model_directory(path) for path in ensemble)]
    source = open_input(texts, input_file)
    references = read_references(reference, source.count) if reference is not None else None
    drawing = sampling_of(sampling, temperature, seed, beam, n_best)
    prefix, prefix_lines = read_prefixes(prefix, prefix_file, source.count)
    if source.interactive:
        console.print("reading sentences from the terminal, one per line; Ctrl-D ends",
                      highlight=False)

    from attncli.search.ensemble import load_ensemble

    written, best = 0, []
    try:
        loaded = load_ensemble(members)
        levels = loaded.source_tokenizer.level, loaded.target_tokenizer.level
        if replace_unk:
            check_replace_unk(levels[1])
        search = (search_config(loaded.search, 1, alpha, 1) if drawing is not None
                  else search_config(loaded.search, beam, alpha, n_best))
        translator = loaded.translator(
            search, attention_weights=output_format == "json" or alignments or replace_unk,
            sampling=drawing,
        )
        quiet = source.interactive or sys.stdout.isatty()
        with (nullcontext() if quiet else console.status("translating")) as status:
            for lines in source.batches(batch_size * BUFFERED_BATCHES):
                prefixes = line_prefixes(prefix, prefix_lines, prefix_file, written, len(lines))
                results = translate_with_prefixes(
                    translator, lines, batch_size, prefixes, seed or 0, written, prefix_file
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
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
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


def line_prefixes(prefix, prefix_lines, prefix_file, start, count):
    """The prefixes of input lines `start` to `start + count` (None: no prefixes)."""
    if prefix is not None:
        return [prefix] * count
    if prefix_lines is None:
        return None
    if start + count > len(prefix_lines):
        raise AttncliError(f"--prefix-file {prefix_file} has {len(prefix_lines)} lines for "
                           f"more inputs; they must be line-aligned")
    return prefix_lines[start : start + count]


def translate_with_prefixes(translator, lines, batch_size, prefixes, seed, written, prefix_file):
    """`translate_lines`, a prefix that cannot be forced reported in one line (naming its
    line of `--prefix-file`)."""
    from attncli.search.translation import PrefixError

    try:
        return translate_lines(translator, lines, batch_size=batch_size, prefixes=prefixes,
                               seed=seed)
    except PrefixError as error:
        where = (f"--prefix-file {prefix_file} line {written + error.index + 1}: "
                 if prefix_file is not None else "--prefix: ")
        raise AttncliError(clipped(where + str(error), 400)) from None


def translate_exported(run_path, texts, input_file, beam, alpha, n_best, output_format,
                       batch_size, console, compute_type):
    """`attncli translate --engine ctranslate2`: as `translate`, on an export, without
    TensorFlow; returns the process exit code."""
    from attncli.export.ctranslate2_engine import ExportedTranslator, read_settings

    exported(run_path, "translate")
    source = open_input(texts, input_file)
    require_ctranslate2()
    translator = ExportedTranslator(
        run_path, compute_type or "float32",
        search=search_config(read_settings(run_path)["decoding"], beam, alpha, n_best),
        attention_weights=output_format == "json",
    )
    if source.interactive:
        console.print("reading sentences from the terminal, one per line; Ctrl-D ends",
                      highlight=False)
    written = 0
    try:
        for lines in source.batches(batch_size * BUFFERED_BATCHES):
            filled = [index for index, line in enumerate(lines) if line.strip()]
            results = [None] * len(lines)  # a blank line is not translated
            found = translator.translate([lines[index] for index in filled], batch_size)
            for index, result in zip(filled, found):
                results[index] = result
            sys.stdout.write("".join(format_line(written + row, result, output_format) + "\n"
                                     for row, result in enumerate(results, start=1)))
            sys.stdout.flush()
            written += len(lines)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        console.print(f"interrupted: {written} line(s) translated and written", highlight=False)
        return INTERRUPTED
    return 0
