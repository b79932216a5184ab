"""Word alignment on the Hansards gold sentences: attncli's attention beside eflomal,
fast_align, GIZA++ and a diagonal, each scored by its alignment error rate.

Prints one table on the 447 English–French sentences of the NAACL 2003 task
(`hansards-en-fr/test.{en,fr}`, gold links `test.talp`): for each method the alignment
error rate, precision and recall (Och & Ney 2003, `attncli.links`: every row
scored by the same function, links read English first) and the command that made its
links.

- **diagonal**: target word j is linked to source word i = round(j (I - 1) / (J - 1)),
  I and J the source and target lengths in words, halves rounded up (a one-word target
  to source word 0): the straight line from the first words to the last, what an aligner
  that read no word would guess.
- **eflomal** (`benchmarks.eflomal_links`): forward, reverse and each symmetrisation of
  the two. Run here on the training text with the test sentences appended when
  `--eflomal-dir` is not given and eflomal is installed (minutes; its links are kept in
  `--eflomal-out`), else read from `--eflomal-dir`.
- **published**: the fast_align and GIZA++ outputs of `hansards-en-fr/reference/`; the
  `*.reverse.talp` ones are written French first and are flipped.
- **attncli**: `attncli align` run as a user runs it (the mean of the heads), on
  `--forward RUN` (English→French): the attention raw and shifted (Chen et al. 2020),
  each read by argmax and by mutual argmax (Jalili Sabet et al. 2020), per decoder layer
  for a Transformer (its rows named `attncli Transformer`); with `--reverse RUN2`
  (French→English) the reverse model's links and the symmetrised ones (Koehn et al.
  2003), and the links read off the mean of both directions' weights (`--symmetrize
  mean`), by both extractions, both models read at their last layer or at `--layer N`;
  with `--guided RUN3` (an English→French run trained with guided alignment) its rows as
  RUN's. With `--aligner RUN4` (an English→French run with an alignment layer,
  `model.alignment_layer`, which `attncli align` reads) its rows by both extractions (no
  shift: the layer reads the token itself), and with `--aligner-reverse RUN5`
  (French→English, likewise) the reverse and symmetrised ones.
  Adding `--gold $H/test.talp` to a row's command prints the row's figures.

    python -m benchmarks.alignment [--data ../shared/data] [--forward RUN] [--reverse RUN2]
        [--layer N] [--guided RUN3] [--aligner RUN4 [--aligner-reverse RUN5]]
        [--eflomal-dir DIR | --eflomal-out DIR]

Rows whose inputs are not given are left out, with a line on stderr saying why. This
module makes the attncli rows; `benchmarks.alignment_table` reads the gold sentences,
makes the other rows and prints the table.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from attncli.links import parse_pharaoh
from attncli.alignment.symmetrization import JOINED_WEIGHTS, symmetrize
from attncli.errors import AttncliError
from benchmarks.alignment_table import (
    FOLDER, HANSARDS, Row, check_rows, diagonal_rows, eflomal_rows, left_out, print_table,
    published_rows, read_sentences)
# The tests read these two where the command is.
from benchmarks.alignment_table import PUBLISHED, diagonal  # noqa: F401
from benchmarks.eflomal_links import TEST_SENTENCES

REPO = Path(__file__).resolve().parents[1]
# The extractions of each attncli model's rows (`attncli.alignment.extraction`).
EXTRACTIONS = ("argmax", "mutual-argmax")
# The symmetrisations of attncli's rows: `attncli align` runs both models once for each.
ATTNCLI_SYMMETRIZATIONS = ("intersection", "grow-diag", "grow-diag-final-and")


class Model(NamedTuple):
    """A run given to the script, and the cross-attention layers `attncli align --layer`
    can name in its model: `[None]` for one (a recurrent decoder's: no --layer), else
    1..L (a Transformer's blocks)."""

    run: Path
    layers: list


def given_models(args):
    """The `Model` of each run option given (`forward`, `reverse`, `guided`; None when
    not given), checked before anything runs: a folder without a model is one line
    naming the option."""
    from attncli.cli.runs import model_directory
    from attncli.model.saving import read_model_config

    models = {}
    for option in ("forward", "reverse", "guided", "aligner", "aligner_reverse"):
        run = getattr(args, option)
        if run is None:
            models[option] = None
            continue
        try:
            config = read_model_config(model_directory(run))["model"]
        except AttncliError as error:
            raise AttncliError(f"--{option.replace('_', '-')}: {error}") from None
        layers = config.decoder_layers if config.decoder == "self-attention" else 1
        models[option] = Model(run, list(range(1, layers + 1)) if layers > 1 else [None])
    return models


def align_arguments(folder, run, options):
    """The arguments of `attncli align RUN` on the test sentences in `folder`."""
    return [str(run), "--source", f"{folder}/test.en", "--target", f"{folder}/test.fr",
            *map(str, options)]


def shown_command(run, options):
    """`attncli align RUN ...` as the table shows it, the Hansards folder written `$H`."""
    return " ".join(["attncli align", *align_arguments(FOLDER, run, options)])


def attncli_align(test, run, options=()):
    """Runs `attncli align RUN` on the test sentences (English→French) as a user does.

    Returns:
        `(lines, command)`: its stdout lines, one per sentence pair, and `shown_command`.
    """
    command = shown_command(run, options)
    print(f"$ {command}", file=sys.stderr)
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "align", *align_arguments(test.folder, run, options)],
        capture_output=True, text=True,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ},
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"{command} exited with {result.returncode}: {last}")
    print(f"  {time.monotonic() - start:.0f} s", file=sys.stderr)
    lines = result.stdout.split("\n")[:-1]
    if len(lines) != TEST_SENTENCES:
        sys.exit(f"{command} printed {len(lines)} lines for {TEST_SENTENCES} sentence pairs")
    return lines, command


def choice_options(shift, extraction):
    """`attncli align`'s options for a shift and an extraction (argmax, the default,
    written out of none)."""
    return [*(["--shift"] if shift else []),
            *(["--extraction", extraction] if extraction != "argmax" else [])]


def choice_name(shift, extraction):
    """`raw`, `shifted, mutual-argmax`, ...: how a row names them."""
    return ("shifted" if shift else "raw") + (f", {extraction}" if extraction != "argmax"
                                              else "")


def model_rows(test, name, model, shifts=(False, True)):
    """Raw and shifted rows of one English→French model, by argmax and by mutual argmax,
    per decoder layer for a Transformer."""
    rows = []
    for layer in model.layers:
        for shift in shifts:
            for extraction in EXTRACTIONS:
                options = [*(["--layer", layer] if layer else []),
                           *choice_options(shift, extraction)]
                lines, command = attncli_align(test, model.run, options)
                links = [parse_pharaoh(line, f"{command} line {number}")
                         for number, line in enumerate(lines, start=1)]
                method = f"{name}, {choice_name(shift, extraction)}"
                if layer:
                    method += f", layer {layer} of {len(model.layers)}"
                rows.append(Row(method, f"`{command}`", links))
    return rows


def joined_rows(test, forward, reverse, name="attncli", shifts=(False, True), layer=None):
    """The reverse model's rows and the symmetrised ones, raw and shifted, by each of
    `EXTRACTIONS` (see the module), both models read at decoder block `layer` (None: each
    model's last).

    One `attncli align RUN --reverse RUN2 --format json` per shift and extraction gives
    both directions' links (`forward`; `reverse`, already flipped) and their join by
    `--symmetrize`; each `ATTNCLI_SYMMETRIZATIONS` row joins the two by the function
    `attncli align` calls, so it is what `--symmetrize METHOD` prints (checked on the
    method the run was given). The `JOINED_WEIGHTS` rows join the weights, not the
    links: one `attncli align --symmetrize METHOD` each.
    """
    reverse_rows = []
    symmetrized = {method: [] for method in (*ATTNCLI_SYMMETRIZATIONS, *JOINED_WEIGHTS)}
    for shift in shifts:
        for extraction in EXTRACTIONS:
            chosen, named = choice_options(shift, extraction), choice_name(shift, extraction)
            if layer is not None:
                chosen, named = ["--layer", layer, *chosen], f"{named}, layer {layer}"
            base = ["--reverse", reverse.run, "--symmetrize"]
            lines, command = attncli_align(
                test, forward.run,
                [*base, ATTNCLI_SYMMETRIZATIONS[-1], "--format", "json", *chosen])
            records = [json.loads(line) for line in lines]
            directions = {direction: [frozenset(map(tuple, record.get(direction, [])))
                                      for record in records]
                          for direction in ("forward", "reverse", "links")}
            reverse_rows.append(Row(f"{name} fr→en, {named}",
                                    f"`{command}`: its `reverse` links", directions["reverse"]))
            for method in ATTNCLI_SYMMETRIZATIONS:
                links = [symmetrize(*pair, method)
                         for pair in zip(directions["forward"], directions["reverse"])]
                if method == ATTNCLI_SYMMETRIZATIONS[-1] and links != directions["links"]:
                    sys.exit(f"{command}: its links are not the {method} of its forward and "
                             "reverse ones")
                shown = shown_command(forward.run, [*base, method, *chosen])
                symmetrized[method].append(Row(f"{name} {method}, {named}", f"`{shown}`",
                                               links))
            for method in JOINED_WEIGHTS:  # joined before the links: a run of its own
                lines, command = attncli_align(test, forward.run, [*base, method, *chosen])
                links = [parse_pharaoh(line, f"{command} line {number}")
                         for number, line in enumerate(lines, start=1)]
                symmetrized[method].append(Row(f"{name} {method} of the weights, {named}",
                                               f"`{command}`", links))
    return [*reverse_rows, *(row for rows in symmetrized.values() for row in rows)]


def model_name(model):
    """How the rows of `model` begin: `attncli`, or `attncli Transformer` for a model of
    several cross-attention blocks (a self-attention decoder)."""
    return "attncli" if model.layers == [None] else "attncli Transformer"


def attncli_rows(test, models, layer=None):
    """The rows of `attncli align` on the runs given (see the module); the reverse and
    symmetrised ones read at decoder block `layer` (None: the last)."""
    forward, reverse, guided = models["forward"], models["reverse"], models["guided"]
    rows = []
    if forward is None:
        left_out("attncli rows but the guided ones",
                 "no --forward RUN (an English→French run) was given")
    else:
        name = model_name(forward)
        rows += model_rows(test, f"{name} en→fr", forward)
        if reverse is None:
            left_out("attncli reverse and symmetrised rows",
                     "no --reverse RUN2 (a French→English run) was given")
        else:
            rows += joined_rows(test, forward, reverse, name=name, layer=layer)
    if guided is None:
        left_out("attncli guided rows", "no --guided RUN3 (a run trained with guided "
                 "alignment) was given")
    else:
        rows += model_rows(test, "attncli guided", guided)
    aligner, aligner_reverse = models["aligner"], models["aligner_reverse"]
    if aligner is None:
        left_out("alignment layer rows", "no --aligner RUN4 (an English→French run with "
                 "an alignment layer) was given")
    else:
        # One layer, which reads the token itself: no --layer, no shift.
        one = Model(aligner.run, [None])
        rows += model_rows(test, "attncli alignment layer en→fr", one, shifts=(False,))
        if aligner_reverse is not None:
            rows += joined_rows(test, one, Model(aligner_reverse.run, [None]),
                                name="attncli alignment layer", shifts=(False,))
    return rows


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
        help=f"the shared data folder, holding {HANSARDS}/ (default: ../shared/data)")
    parser.add_argument("--forward", type=Path, metavar="RUN",
                        help="an English→French run (or model directory)")
    parser.add_argument("--reverse", type=Path, metavar="RUN2",
                        help="a French→English run: its rows, and the symmetrised ones")
    parser.add_argument("--guided", type=Path, metavar="RUN3",
                        help="an English→French run trained with guided alignment")
    parser.add_argument("--aligner", type=Path, metavar="RUN4",
                        help="an English→French run with an alignment layer")
    parser.add_argument("--aligner-reverse", type=Path, metavar="RUN5",
                        help="a French→English run with an alignment layer (with --aligner)")
    parser.add_argument("--layer", type=int, metavar="N",
                        help="the decoder block of --forward and --reverse the reverse and "
                             "symmetrised rows read, for Transformers (default: the last; "
                             "Garg et al. 2019 found the penultimate's attention the closest "
                             "to alignments)")
    eflomal = parser.add_mutually_exclusive_group()
    eflomal.add_argument("--eflomal-dir", type=Path, metavar="DIR",
                         help="read eflomal.fwd and eflomal.rev (of the training text with "
                              "the test sentences appended) from DIR instead of aligning")
    eflomal.add_argument("--eflomal-out", type=Path, metavar="DIR",
                         default=REPO / "runs" / "eflomal-hansards",
                         help="where eflomal's corpus and links are written when it runs "
                              "here (default: runs/eflomal-hansards)")
    return parser.parse_args()


def main():
    args = arguments()
    try:
        test = read_sentences(args.data)
        models = given_models(args)
        if args.eflomal_dir is not None and not args.eflomal_dir.is_dir():
            raise AttncliError(f"--eflomal-dir {args.eflomal_dir}: no such folder")
        rows = [*diagonal_rows(test), *eflomal_rows(args, test), *published_rows(test),
                *attncli_rows(test, models, args.layer)]
        check_rows(test, rows)
    except AttncliError as error:
        print(f"Error: {error}", file=sys.stderr)
        sys.exit(2)
    print_table(test, rows)


if __name__ == "__main__":
    main()
