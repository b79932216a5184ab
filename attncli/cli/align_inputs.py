"""What `attncli align` reads: sentence pairs and gold links, each error one line naming
the file and the line.

Pairs (`PairSource`) come as tab-separated lines (`--input FILE`, or stdin: `source TAB
target`, exactly two fields; stdin's answered as they arrive) or as two line-aligned files
(`--source F --target F`). Gold links come from a talp file (`--gold FILE`,
`attncli.links.parse_talp`), line-aligned with the pairs; each gold link must
name words of its pair (its space-separated words).
"""

import io
import sys
from pathlib import Path
from typing import NamedTuple

from attncli.links import LinkError, parse_talp
from attncli.cli.line_stream import LineReader, list_batches, read_lines
from attncli.errors import AttncliError

CHUNK_BATCHES = 4  # batches forced between two writes of a file's links
WAIT = 0.05  # seconds a batch of piped stdin waits for more lines after its first


class Pair(NamedTuple):
    """A source and its given translation, with where they were read (`--input F line 3`)
    for messages."""

    source: str
    target: str
    where: str

    @property
    def empty(self):
        """Whether a side has no word: such a pair gets no links."""
        return not self.source.split() or not self.target.split()


def tsv_pair(line, where):
    """The `Pair` of one `source TAB target` line.

    Raises:
        AttncliError: the line has not exactly two tab-separated fields.
    """
    fields = line.split("\t")
    if len(fields) != 2:
        raise AttncliError(
            f"{where}: {len(fields)} tab-separated field{'s' if len(fields) != 1 else ''}; "
            "write the source, a tab, then its translation"
        )
    return Pair(fields[0], fields[1], where)


def read_tsv(path):
    """The `Pair`s of a tab-separated file (`--input`)."""
    option = f"--input {path}"
    return [tsv_pair(line, f"{option} line {number}")
            for number, line in enumerate(read_lines(path, "--input"), start=1)]


def read_parallel(source_path, target_path):
    """The `Pair`s of two line-aligned files (`--source`, `--target`).

    Raises:
        AttncliError: the files have different numbers of lines (naming the first line
            without a partner).
    """
    sources = read_lines(source_path, "--source")
    targets = read_lines(target_path, "--target")
    if len(sources) != len(targets):
        longer, option = ((source_path, "--source") if len(sources) > len(targets)
                          else (target_path, "--target"))
        raise AttncliError(
            f"--source {source_path} has {len(sources)} lines and --target {target_path} "
            f"{len(targets)}: line {min(len(sources), len(targets)) + 1} of {option} "
            f"{longer} has no partner; the files must be line-aligned"
        )
    return [Pair(source, target, f"line {number} of --source/--target")
            for number, (source, target) in enumerate(zip(sources, targets), start=1)]


class PairSource:
    """The pairs: read whole from files (`pairs`, `count`) or streamed from stdin."""

    def __init__(self, input_file, source_file, target_file):
        self.interactive = False
        if input_file is not None:
            self.pairs = read_tsv(input_file)
        elif source_file is not None:
            self.pairs = read_parallel(source_file, target_file)
        else:
            self.pairs = None
            self.stdin = sys.stdin
            self.interactive = self.stdin.isatty()

    @property
    def count(self):
        return None if self.pairs is None else len(self.pairs)

    def chunks(self, batch_size):
        """Lists of pairs in order: a file's in chunks of a few batches, stdin's as its
        lines arrive (`attncli.cli.line_stream`)."""
        if self.pairs is not None:
            yield from list_batches(self.pairs, batch_size * CHUNK_BATCHES)
            return
        stream = getattr(self.stdin, "buffer", None)
        if stream is None:  # a text stream without bytes underneath (a test's StringIO)
            stream = io.BytesIO(self.stdin.read().encode("utf-8"))
        number = 0
        for lines in LineReader(stream, "stdin").batches(batch_size,
                                                          0.0 if self.interactive else WAIT):
            chunk = []
            for line in lines:
                number += 1
                try:
                    chunk.append(tsv_pair(line, f"stdin line {number}"))
                except AttncliError:
                    yield chunk  # the lines before it are answered first
                    raise
            yield chunk


class GoldLinks:
    """The gold links of `--gold FILE`, read whole, handed out pair by pair.

    Args:
        path: the talp file, line i the gold links of pair i.

    Raises:
        LinkError: a link that is not `i-j` or `ipj` (counted from 1), naming its line.
    """

    def __init__(self, path):
        self.path = Path(path)
        self.lines = read_lines(path, "--gold")
        self.golds = [parse_talp(line, self._where(number))
                      for number, line in enumerate(self.lines, start=1)]

    def _where(self, number):
        return f"--gold {self.path} line {number}"

    def check_count(self, count, where="the pairs"):
        """Refuse a gold file of more or fewer lines than `count` pairs."""
        if len(self.golds) < count:
            raise AttncliError(
                f"--gold {self.path} has {len(self.golds)} lines for {count} pairs: pair "
                f"{len(self.golds) + 1} of {where} has no gold line; they must be line-aligned"
            )
        if len(self.golds) > count:
            raise AttncliError(
                f"--gold {self.path} has {len(self.golds)} lines for {count} pairs: its line "
                f"{count + 1} has no pair in {where}; they must be line-aligned"
            )

    def of(self, index, pair):
        """The `Gold` of pair `index` (0-based), checked to name words of `pair`.

        Raises:
            AttncliError: the gold file has no line `index + 1`.
            LinkError: a gold link past the pair's words.
        """
        if index >= len(self.golds):
            raise AttncliError(
                f"--gold {self.path} has {len(self.golds)} lines, but {pair.where} is pair "
                f"{index + 1}; they must be line-aligned"
            )
        gold = self.golds[index]
        sources, targets = len(pair.source.split()), len(pair.target.split())
        for i, j in sorted(gold.possible):
            if i >= sources or j >= targets:
                written = f"{i + 1}{'-' if (i, j) in gold.sure else 'p'}{j + 1}"
                raise LinkError(
                    f"{self._where(index + 1)}: link {written} is past {pair.where}, of "
                    f"{sources} source and {targets} target words (counted from 1)"
                )
        return gold
