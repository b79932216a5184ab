"""Readers for the three shapes parallel corpora come in, with a report of every bad line.

- Tab-separated pairs (`read_tsv`): Tatoeba's `English<TAB>Spanish`, optionally with a
  third attribution column (`cmn.txt`); which column is the source is configurable.
- Line-aligned parallel files (`read_parallel`): Multi30k's `train.de` + `train.en`.
- Pronunciation dictionaries (`read_pronunciations`): CMUdict's `WORD<TAB>PH ON ES`, a word
  repeated once per pronunciation; `Corpus.references()` groups them for evaluation.

A bad line (wrong number of columns, an empty side, bytes that are not UTF-8, a line with no
partner in the other file of a parallel pair) never crashes a reader and is never dropped
silently: it is counted in the `CorpusReport` with its line number, and either skipped with
a warning on the `attncli.data` logger (the default) or, with `strict=True`, turned into a
`CorpusError` whose message is one line. Entirely blank lines (the trailing one of
`cmn.txt`) carry no pair and are only counted.

This module does not import TensorFlow.
"""

from __future__ import annotations

import gzip
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from attncli.errors import DataError

logger = logging.getLogger("attncli.data")

#: How many line numbers a report quotes per kind of bad line.
EXAMPLES_PER_REASON = 5

WRONG_COLUMNS = "wrong number of columns"
EMPTY_SIDE = "empty side"
UNDECODABLE = "undecodable bytes"
UNPAIRED = "mismatched line counts"


class CorpusError(DataError):
    """A corpus has bad lines and strict reading was asked for, or cannot be read at all."""


@dataclass
class CorpusReport:
    """What a reader saw in one corpus.

    Attributes:
        path: the file (or `source | target` pair of files) read.
        lines: lines read (for parallel files: lines of the longer file).
        pairs: pairs kept.
        blank_lines: entirely blank lines, skipped (they carry no pair).
        bad_counts: number of bad lines per reason.
        bad_examples: the first `EXAMPLES_PER_REASON` 1-based line numbers per reason.
    """

    path: str
    lines: int = 0
    pairs: int = 0
    blank_lines: int = 0
    bad_counts: Counter = field(default_factory=Counter)
    bad_examples: dict = field(default_factory=dict)

    @property
    def bad_lines(self) -> int:
        return sum(self.bad_counts.values())

    def add_bad(self, reason: str, line_number: int) -> None:
        self.bad_counts[reason] += 1
        examples = self.bad_examples.setdefault(reason, [])
        if len(examples) < EXAMPLES_PER_REASON:
            examples.append(line_number)

    def summary(self) -> str:
        """One line: `path: N bad lines (3 empty side: lines 4, 9, 12; ...)`."""
        parts = []
        for reason in sorted(self.bad_counts):
            count = self.bad_counts[reason]
            examples = ", ".join(str(n) for n in self.bad_examples[reason])
            more = ", ..." if count > len(self.bad_examples[reason]) else ""
            noun = "line" if count == 1 else "lines"
            parts.append(f"{count} {reason}: {noun} {examples}{more}")
        noun = "line" if self.bad_lines == 1 else "lines"
        return f"{self.path}: {self.bad_lines} bad {noun} ({'; '.join(parts)})"

    def settle(self, strict: bool) -> None:
        """Raises `CorpusError` (strict) or logs a warning when there are bad lines."""
        if not self.bad_lines:
            return
        if strict:
            raise CorpusError(self.summary() + "; fix them or read without strict to skip them")
        logger.warning("%s; skipped", self.summary())


@dataclass
class Corpus:
    """Parallel text: `sources[i]` translates (or is pronounced as) `targets[i]`.

    Attributes:
        sources: source sentences (or words), stripped of surrounding whitespace.
        targets: target sentences (or pronunciations).
        report: the `CorpusReport` of the file(s) read; `None` for a corpus made in code.
        lines: the 1-based line of its file each pair was read from (what a file
            line-aligned with the corpus, as `data.alignments`, is matched by); `None`
            for a corpus made in code.
    """

    sources: list[str]
    targets: list[str]
    report: CorpusReport | None = None
    lines: list[int] | None = None

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ValueError(
                f"sources and targets differ in length. Received: {len(self.sources)} "
                f"sources and {len(self.targets)} targets"
            )

    def __len__(self) -> int:
        return len(self.sources)

    def select(self, indices) -> Corpus:
        """The pairs at `indices`, in that order (the report is shared)."""
        return Corpus(
            [self.sources[i] for i in indices], [self.targets[i] for i in indices], self.report,
            None if self.lines is None else [self.lines[i] for i in indices],
        )

    def head(self, n: int) -> Corpus:
        """The first `n` pairs."""
        return Corpus(self.sources[:n], self.targets[:n], self.report,
                      None if self.lines is None else self.lines[:n])

    def references(self) -> tuple[list[str], list[list[str]]]:
        """Unique sources in order of first appearance, each with all of its targets.

        For CMUdict, a word with several pronunciations gets all of them as references (a
        prediction is right if it matches any); for Tatoeba, a sentence with several
        translations gets them all (sacreBLEU's multi-reference input once transposed).
        """
        grouped: dict[str, list[str]] = {}
        for source, target in zip(self.sources, self.targets):
            grouped.setdefault(source, []).append(target)
        return list(grouped), list(grouped.values())


def _numbered_lines(path: Path, report: CorpusReport):
    """Yields `(line_number, text)` for each decodable line; counts the undecodable ones."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                report.lines = number
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    report.add_bad(UNDECODABLE, number)
                    yield number, None
                    continue
                yield number, line.rstrip("\r\n")
    except (OSError, EOFError) as error:  # EOFError: a truncated gzip file
        reason = getattr(error, "strerror", None) or error or "file ends too early"
        raise CorpusError(f"cannot read {path}: {reason}") from error


def read_tsv(
    path,
    source_column: int = 0,
    target_column: int = 1,
    columns: int | None = None,
    strict: bool = False,
    limit: int | None = None,
) -> Corpus:
    """Reads tab-separated pairs, one per line (plain text, or gzip when the name ends .gz).

    Args:
        path: the file.
        source_column: 0-based column of the source side. Defaults to 0 (Tatoeba's English).
        target_column: 0-based column of the target side. Defaults to 1.
        columns: exact number of columns a line must have. Defaults to `None`: the two
            sides plus at most one more column (Tatoeba's attribution).
        strict: raise `CorpusError` on bad lines instead of skipping them with a warning.
        limit: stop after this many lines (a slice for tests). Defaults to all lines.

    Returns:
        A `Corpus` with its `CorpusReport`.
    """
    path = Path(path)
    if source_column == target_column or min(source_column, target_column) < 0:
        raise ValueError(
            "source_column and target_column must be two different non-negative columns. "
            f"Received: source_column={source_column}, target_column={target_column}"
        )
    needed = max(source_column, target_column) + 1
    allowed = {columns} if columns is not None else {needed, 3} if needed <= 3 else {needed}
    report = CorpusReport(str(path))
    sources, targets, lines = [], [], []
    for number, line in _numbered_lines(path, report):
        if line is None:
            pass  # counted as undecodable while reading
        elif not line.strip():
            report.blank_lines += 1
        else:
            fields = line.split("\t")
            if len(fields) not in allowed or len(fields) < needed:
                report.add_bad(WRONG_COLUMNS, number)
            else:
                source, target = fields[source_column].strip(), fields[target_column].strip()
                if not source or not target:
                    report.add_bad(EMPTY_SIDE, number)
                else:
                    sources.append(source)
                    targets.append(target)
                    lines.append(number)
        if limit is not None and number >= limit:
            break
    report.pairs = len(sources)
    report.settle(strict)
    return Corpus(sources, targets, report, lines)


def read_parallel(source_path, target_path, strict: bool = False, limit: int | None = None):
    """Reads two line-aligned files: line i of one translates line i of the other.

    Args:
        source_path: the source-language file (e.g. Multi30k `train.de`).
        target_path: the target-language file (e.g. `train.en`).
        strict: raise `CorpusError` on bad lines instead of skipping them with a warning.
        limit: stop after this many lines. Defaults to all lines.

    Returns:
        A `Corpus`. Lines past the end of the shorter file are bad ("mismatched line
        counts"); a line that is empty on one side only is bad ("empty side"); a line
        blank on both sides is only counted.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    report = CorpusReport(f"{source_path} | {target_path}")
    source_report, target_report = CorpusReport(str(source_path)), CorpusReport(str(target_path))
    source_lines = dict(_limited(_numbered_lines(source_path, source_report), limit))
    target_lines = dict(_limited(_numbered_lines(target_path, target_report), limit))
    for side_report in (source_report, target_report):
        for reason, count in side_report.bad_counts.items():
            report.bad_counts[reason] += count
            merged = report.bad_examples.setdefault(reason, [])
            merged[:] = sorted(set(merged + side_report.bad_examples[reason]))
            del merged[EXAMPLES_PER_REASON:]
    report.lines = max(source_report.lines, target_report.lines)
    sources, targets, lines = [], [], []
    for number in range(1, report.lines + 1):
        if number not in source_lines or number not in target_lines:
            report.add_bad(UNPAIRED, number)
            continue
        source, target = source_lines[number], target_lines[number]
        if source is None or target is None:
            continue  # counted as undecodable by the side it came from
        source, target = source.strip(), target.strip()
        if not source and not target:
            report.blank_lines += 1
        elif not source or not target:
            report.add_bad(EMPTY_SIDE, number)
        else:
            sources.append(source)
            targets.append(target)
            lines.append(number)
    report.pairs = len(sources)
    report.settle(strict)
    return Corpus(sources, targets, report, lines)


def _limited(numbered_lines, limit):
    for number, line in numbered_lines:
        yield number, line
        if limit is not None and number >= limit:
            return


def read_pronunciations(path, strict: bool = False, limit: int | None = None) -> Corpus:
    """Reads a pronunciation dictionary: `WORD<TAB>PH ON ES`, one pronunciation per line.

    Each line is one pair (word, phonemes separated by single spaces); a word with several
    pronunciations appears once per pronunciation, so training sees them all and
    `Corpus.references()` gives every reference for evaluation.
    """
    corpus = read_tsv(path, columns=2, strict=strict, limit=limit)
    corpus.targets = [" ".join(target.split()) for target in corpus.targets]
    return corpus
