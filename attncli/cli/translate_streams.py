"""Lines in, lines out: where `attncli translate` reads its sentences, references and
prefixes, and how each input line's result is written.

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
           hypothesis with its tokens, score and attention weights (and, with
           `--token-log-probs`, each token's log probability)

`--alignments` adds each translation's word alignment in the Pharaoh format, `i-j` for
source word `i` and target word `j`, 0-based (`attncli.search.alignments` states the
rule), as OpenNMT-py's `-report_align`. The translation is printed as without it; `j`
counts its whitespace-separated words (`Don't` is one word, `hungry.` another):

    text   TRANSLATION ||| ALIGNMENT (with `--n-best N`: N such pairs, joined by " ||| ")
    tsv    a fifth column, the alignment
    json   `source_words` (the words `i` counts), and `words` and `alignment` in each
           hypothesis
"""

import io
import json
import stat
import sys
from pathlib import Path

from attncli.cli.line_stream import LineReader, decode_utf8, list_batches
from attncli.cli.runs import split_lines
from attncli.errors import AttncliError, shown

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
