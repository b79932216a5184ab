"""The table of `benchmarks.alignment` but its attncli rows: the gold test sentences read,
the rows of the diagonal, eflomal and the published outputs (the module `benchmarks.alignment`
says how each is made), every row checked against its sentence pairs and scored by its
alignment error rate (Och & Ney 2003)."""

import sys
from pathlib import Path
from typing import NamedTuple

from attncli.links import check_within, parse_talp, score_corpus
from attncli.alignment.symmetrization import SYMMETRIZATIONS, symmetrize
from attncli.errors import AttncliError
from benchmarks import eflomal_links
from benchmarks.eflomal_links import TEST_SENTENCES, read_links

HANSARDS = "hansards-en-fr"
# The files of HANSARDS the table reads (the training text for eflomal's corpus).
DATA_FILES = ("test.en", "test.fr", "test.talp", "train.en.gz", "train.fr.gz", "reference")
# Where a command shows the Hansards folder; the table's heading says what it stands for.
FOLDER = "$H"
PUBLISHED = [
    ("fast_align forward", "fastalign.enfr.talp"),
    ("fast_align reverse", "fastalign.enfr.reverse.talp"),
    ("fast_align grow-diagonal", "fastalign.enfr.grow-diagonal.talp"),
    ("fast_align grow-diagonal-final", "fastalign.enfr.grow-diagonal-final.talp"),
    ("GIZA++ forward", "giza.enfr.talp"),
    ("GIZA++ reverse", "giza.enfr.reverse.talp"),
    ("GIZA++ grow-diagonal", "giza.enfr.grow-diagonal.talp"),
    ("GIZA++ grow-diagonal-final", "giza.enfr.grow-diagonal-final.talp"),
]


class Row(NamedTuple):
    """A line of the table: the method, the command that made its links, and the links
    (one set of `(English word, French word)` per test sentence)."""

    method: str
    command: str
    links: list


class Sentences(NamedTuple):
    """The gold test sentences."""

    folder: Path  # the Hansards folder
    sources: list  # English sentences
    targets: list  # French sentences
    golds: list  # `Gold` per sentence


def diagonal(source_length, target_length):
    """The diagonal baseline's links of a sentence pair (see `benchmarks.alignment`),
    computed in integers: i = floor(j (I - 1) / (J - 1) + 1/2)."""
    if not source_length or not target_length:
        return frozenset()
    rise, run = source_length - 1, max(target_length - 1, 1)
    return frozenset(((2 * j * rise + run) // (2 * run), j) for j in range(target_length))


def read_sentences(data):
    """The test `Sentences` under `--data`; a folder without the Hansards files is one line
    naming the option."""
    folder = data / HANSARDS
    for name in DATA_FILES:
        if not (folder / name).exists():
            raise AttncliError(f"--data {data}: there is no {HANSARDS}/{name}; give the shared "
                               f"data folder, the one that holds {HANSARDS}/")
    sources = (folder / "test.en").read_text("utf-8").splitlines()
    targets = (folder / "test.fr").read_text("utf-8").splitlines()
    golds = [parse_talp(line, f"{folder / 'test.talp'} line {number}") for number, line
             in enumerate((folder / "test.talp").read_text("utf-8").splitlines(), start=1)]
    if not len(sources) == len(targets) == len(golds) == TEST_SENTENCES:
        raise AttncliError(f"--data {data}: {HANSARDS}/test.en, test.fr and test.talp must "
                           f"hold {TEST_SENTENCES} lines each")
    return Sentences(folder, sources, targets, golds)


def flipped(links):
    """Links written target first, `j-i`, as `(i, j)`."""
    return [frozenset((i, j) for j, i in line) for line in links]


def left_out(rows, why):
    print(f"{rows} left out: {why}", file=sys.stderr)


def diagonal_rows(test):
    links = [diagonal(len(source.split()), len(target.split()))
             for source, target in zip(test.sources, test.targets)]
    return [Row("diagonal", "i = round(j (I - 1) / (J - 1)), I and J the sentences' lengths",
                links)]


def published_rows(test):
    rows = []
    for method, name in PUBLISHED:
        links = read_links(test.folder / "reference" / name, TEST_SENTENCES)
        command = f"published: `reference/{name}`"
        if ".reverse." in name:
            links, command = flipped(links), command + ", French first, flipped"
        rows.append(Row(method, command, links))
    return rows


def eflomal_rows(args, test):
    """eflomal's rows, read from `--eflomal-dir` or aligned here (see
    `benchmarks.alignment`)."""
    directory = args.eflomal_dir
    if directory is None:
        if eflomal_links.eflomal_align() is None:
            left_out("eflomal rows", "eflomal is not installed (pip install 'attncli[align]') "
                     "and no --eflomal-dir was given")
            return []
        directory = args.eflomal_out
        eflomal_links.run(test.folder, directory)
        print(f"eflomal's links are in {directory}; score them again without aligning with "
              f"--eflomal-dir {directory}", file=sys.stderr)
    training = eflomal_links.training_lines(test.folder)
    forward, reverse = (read_links(directory / f"eflomal.{name}", training + TEST_SENTENCES,
                                   start=training) for name in ("fwd", "rev"))
    record = directory / "eflomal.command"
    command = (f"`{record.read_text('utf-8').splitlines()[0]}`" if record.is_file()
               else f"eflomal links of {directory}")
    rows = [Row("eflomal forward", command + ": `eflomal.fwd`", forward),
            Row("eflomal reverse", command + ": `eflomal.rev`", reverse)]
    for method in SYMMETRIZATIONS:
        links = [symmetrize(*pair, method) for pair in zip(forward, reverse)]
        rows.append(Row(f"eflomal {method}", f'`symmetrize(fwd, rev, "{method}")`', links))
    return rows


def print_table(test, rows):
    sure = sum(len(gold.sure) for gold in test.golds)
    possible = sum(len(gold.possible) for gold in test.golds)
    print(f"Hansards English–French, the {len(test.golds)} gold sentences of the NAACL 2003 "
          f"task ({sure:,} sure gold links, {possible:,} possible ones, the sure included); "
          f"{FOLDER} = {test.folder}. AER of Och & Ney 2003, lower is better.\n")
    print("| method | AER % | precision % | recall % | links made by |")
    print("| --- | ---: | ---: | ---: | --- |")
    for row in rows:
        scores = score_corpus(row.links, test.golds)
        print(f"| {row.method} | {100 * scores.aer:.2f} | {100 * scores.precision:.2f} | "
              f"{100 * scores.recall:.2f} | {row.command} |")


def check_rows(test, rows):
    """Refuse links past their sentence pair (a file of other sentences), naming the line."""
    for row in rows:
        for number, (links, source, target) in enumerate(
                zip(row.links, test.sources, test.targets), start=1):
            check_within(links, len(source.split()), len(target.split()),
                         f"{row.method}, line {number}")
