"""eflomal on the Hansards training text: the aligner beside attncli's attention, and the
links a guided-alignment training reads.

eflomal (Östling & Tiedemann 2016, "Efficient word alignment with Markov chain Monte
Carlo") samples an IBM model 1, then an HMM, then an HMM with fertility, in each direction;
it is installed with `pip install 'attncli[align]'` (a C program with a Python wrapper, not
a dependency of attncli). It runs on the 400,000 training pairs with the 447 gold test
sentences appended, their links unread, as every unsupervised aligner is run on the text
it aligns. Both directions come out English first, `i-j` with English word `i` and French
word `j` counted from 0 (`eflomal.rev` too: it is already flipped), so they are
symmetrised as they are (`attncli.alignment.symmetrization`). eflomal takes no seed: two
runs differ a little.

    python -m benchmarks.eflomal_links [--data ../shared/data] [--out runs/eflomal-hansards]

writes into OUT:

    corpus.en, corpus.fr        train.{en,fr}.gz with test.{en,fr} appended (400,447 lines)
    eflomal.fwd, eflomal.rev    eflomal-align's links, one line per corpus line
    eflomal.command             the command that made them, and its wall time
    eflomal.METHOD              the two symmetrised by METHOD (`SYMMETRIZED`), every line
    test.eflomal.fwd|rev|METHOD the 447 test lines of each, line-aligned with test.talp
    train.en-fr.gdfa            grow-diag-final-and of the training lines only, line-aligned
                                with train.en.gz: a guided training's `data.alignments`

`benchmarks.alignment` scores the test lines (`--eflomal-dir OUT`), or runs `run` itself.
"""

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from attncli.links import format_pharaoh, parse_pharaoh
from attncli.alignment.symmetrization import symmetrize
from attncli.errors import AttncliError

REPO = Path(__file__).resolve().parents[1]
TEST_SENTENCES = 447
# The symmetrisations written for every line: the one a guided training reads, and the
# two it grows from.
SYMMETRIZED = ("intersection", "grow-diag", "grow-diag-final-and")


def eflomal_align():
    """The path of the installed `eflomal-align` script (this Python's scripts folder
    first), or None when eflomal is not installed."""
    folders = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    return shutil.which("eflomal-align", path=folders)


def training_lines(hansards):
    """The number of training pairs (lines of train.en.gz)."""
    with gzip.open(hansards / "train.en.gz", "rt", encoding="utf-8") as train:
        return sum(1 for _ in train)


def write_corpus(hansards, out):
    """Writes OUT/corpus.en and OUT/corpus.fr: the training text, then the test sentences."""
    for language in ("en", "fr"):
        with gzip.open(hansards / f"train.{language}.gz", "rt", encoding="utf-8") as train, \
                open(out / f"corpus.{language}", "w", encoding="utf-8") as corpus:
            shutil.copyfileobj(train, corpus)
            corpus.write((hansards / f"test.{language}").read_text("utf-8"))


def run(hansards, out):
    """Aligns the corpus with eflomal's defaults (model 3, 3 samplers): writes
    OUT/corpus.*, OUT/eflomal.fwd, OUT/eflomal.rev and OUT/eflomal.command.

    Returns:
        The command as shown (run in OUT).

    Raises:
        AttncliError: eflomal is not installed, or failed.
    """
    program = eflomal_align()
    if program is None:
        raise AttncliError("eflomal is not installed: pip install 'attncli[align]'")
    out.mkdir(parents=True, exist_ok=True)
    write_corpus(hansards, out)
    lines = training_lines(hansards) + TEST_SENTENCES
    arguments = ["-s", "corpus.en", "-t", "corpus.fr", "-f", "eflomal.fwd", "-r", "eflomal.rev",
                 "--overwrite"]
    shown = " ".join(["eflomal-align", *arguments])
    print(f"$ cd {out} && {shown}", file=sys.stderr)
    start = time.monotonic()
    result = subprocess.run([program, *arguments], cwd=out, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    minutes = (time.monotonic() - start) / 60
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise AttncliError(f"eflomal-align exited with {result.returncode}: {last}")
    print(f"eflomal aligned {lines:,} pairs in {minutes:.1f} minutes (wall)", file=sys.stderr)
    (out / "eflomal.command").write_text(
        f"{shown}\n# corpus = train + test, {lines:,} lines; {minutes:.1f} minutes wall\n",
        "utf-8")
    return shown


def read_links(path, lines, start=0):
    """The links of each line of a Pharaoh file from line `start + 1` on, the file
    checked to have `lines` lines.

    Raises:
        AttncliError: the file is missing or has another number of lines.
        LinkError: a malformed link, naming its line.
    """
    try:
        text = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        raise AttncliError(f"{path}: no such file") from None
    if len(text) != lines:
        raise AttncliError(f"{path} has {len(text):,} lines for {lines:,} sentence pairs")
    return [parse_pharaoh(line, f"{path} line {number}")
            for number, line in enumerate(text[start:], start=start + 1)]


def write_links(path, links):
    path.write_text("".join(format_pharaoh(line) + "\n" for line in links), "utf-8")


def write_outputs(hansards, out):
    """Writes the symmetrised files, the test slices and train.en-fr.gdfa (see the module)."""
    training = training_lines(hansards)
    directions = {name: read_links(out / f"eflomal.{name}", training + TEST_SENTENCES)
                  for name in ("fwd", "rev")}
    for method in SYMMETRIZED:
        print(f"symmetrising every line: {method}", file=sys.stderr)
        directions[method] = [symmetrize(forward, reverse, method) for forward, reverse
                              in zip(directions["fwd"], directions["rev"])]
        write_links(out / f"eflomal.{method}", directions[method])
    for name, links in directions.items():
        write_links(out / f"test.eflomal.{name}", links[training:])
    write_links(out / "train.en-fr.gdfa", directions["grow-diag-final-and"][:training])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
        help="the shared data folder, holding hansards-en-fr/ (default: ../shared/data)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "eflomal-hansards",
                        help="where the corpus and the links are written")
    args = parser.parse_args()
    hansards = args.data / "hansards-en-fr"
    for name in ("train.en.gz", "train.fr.gz", "test.en", "test.fr"):
        if not (hansards / name).is_file():
            print(f"Error: --data {args.data}: no hansards-en-fr/{name} there; give the "
                  "shared data folder", file=sys.stderr)
            sys.exit(2)
    try:
        run(hansards, args.out)
        write_outputs(hansards, args.out)
    except AttncliError as error:
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(2)
    print(args.out / "train.en-fr.gdfa")


if __name__ == "__main__":
    main()
