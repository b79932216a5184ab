"""`python -m benchmarks.alignment`: its table on the Hansards gold sentences without any
model (the diagonal, eflomal's links read from a folder, the published outputs), its
diagonal rule, and its refusals; its attncli rows on a stand-in test set, made by
`attncli align` on the small trained run of `tests/fixtures/run-0.1.0`."""

import gzip
import json
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from math import floor
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner
from attncli_process import FIXTURE_RUN
from cli_errors import one_line_error
from guided_runs import with_alignment_layer
from process_watch import run
from shared_data import shared_data

from attncli.links import check_within, parse_pharaoh, parse_talp, score_corpus
from attncli.cli.app import app
from benchmarks import alignment
from benchmarks.alignment import PUBLISHED, diagonal, given_models
from benchmarks.eflomal_links import eflomal_align, write_outputs

REPO = Path(__file__).resolve().parents[2]
TRAINING_PAIRS = 400_000


def benchmark(*args):
    """`python -m benchmarks.alignment ARGS`, waiting as long as it works (`process_watch`)."""
    return run([sys.executable, "-m", "benchmarks.alignment", *map(str, args)], cwd=REPO)


def table_row(stdout, method):
    """`(AER, precision, recall, command)` of the row named `method`."""
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if cells[0] == method:
            return (*map(float, cells[1:4]), cells[4])
    raise AssertionError(f"no row {method!r} in\n{stdout}")


def test_diagonal_links_the_first_words_and_the_last_by_a_straight_line():
    # 3 source words, 5 target words: j * 2 / 4 = 0, 0.5, 1, 1.5, 2; halves go up.
    assert diagonal(3, 5) == {(0, 0), (1, 1), (1, 2), (2, 3), (2, 4)}
    # 5 source words, 3 target words: j * 4 / 2 = 0, 2, 4.
    assert diagonal(5, 3) == {(0, 0), (2, 1), (4, 2)}
    assert diagonal(4, 1) == {(0, 0)}
    assert diagonal(1, 3) == {(0, 0), (0, 1), (0, 2)}
    assert diagonal(0, 3) == diagonal(3, 0) == frozenset()


@pytest.mark.parametrize("source_length", [1, 2, 3, 7, 20, 41])
@pytest.mark.parametrize("target_length", [1, 2, 5, 9, 20, 33])
def test_diagonal_is_the_rounded_line_in_exact_arithmetic(source_length, target_length):
    slope = Fraction(source_length - 1, max(target_length - 1, 1))
    expected = {(floor(j * slope + Fraction(1, 2)), j) for j in range(target_length)}
    assert diagonal(source_length, target_length) == expected


@pytest.fixture(scope="module")
def data():
    return shared_data("hansards-en-fr").parent


@pytest.fixture(scope="module")
def eflomal_dir(data, tmp_path_factory):
    """eflomal's two files as `benchmarks.eflomal_links` leaves them: one line per pair
    of the training text, then the 447 test sentences. Here the training lines hold a
    link each and the test lines the gold sure links, so only a reader of the last 447
    lines scores AER 0."""
    directory = tmp_path_factory.mktemp("eflomal")
    gold = (data / "hansards-en-fr" / "test.talp").read_text("utf-8").splitlines()
    sure = [" ".join(f"{int(i) - 1}-{int(j) - 1}" for i, j in re.findall(r"(\d+)-(\d+)", line))
            for line in gold]
    text = "0-0\n" * TRAINING_PAIRS + "".join(line + "\n" for line in sure)
    for name in ("eflomal.fwd", "eflomal.rev"):
        (directory / name).write_text(text, "utf-8")
    (directory / "eflomal.command").write_text("eflomal-align -s corpus.en -t corpus.fr\n")
    return directory


@pytest.fixture(scope="module")
def table(data, eflomal_dir):
    result = benchmark("--data", data, "--eflomal-dir", eflomal_dir)
    assert result.returncode == 0, result.stderr
    return result


def test_published_outputs_score_their_published_aer(table):
    """fast_align's and GIZA++'s grow-diagonal outputs: AER 10.48 and 5.94 (10.5 and 5.9
    as published)."""
    assert table_row(table.stdout, "fast_align grow-diagonal")[:3] == (10.48, 90.84, 87.77)
    assert table_row(table.stdout, "GIZA++ grow-diagonal")[:3] == (5.94, 97.54, 89.70)
    for method in ("fast_align", "GIZA++"):
        for output in ("forward", "reverse", "grow-diagonal-final"):
            table_row(table.stdout, f"{method} {output}")


def test_reverse_outputs_are_read_french_first(table):
    """`*.reverse.talp` are written French first: read as they are, they would link few
    gold pairs (AER above 70); flipped, they score as well as the forward outputs."""
    assert table_row(table.stdout, "fast_align reverse")[0] == 15.89
    assert table_row(table.stdout, "GIZA++ reverse")[0] == 9.75


def test_diagonal_row(table):
    aer, precision, recall, command = table_row(table.stdout, "diagonal")
    assert (aer, precision, recall) == (53.18, 49.61, 41.46)
    assert "round(j (I - 1) / (J - 1))" in command


def test_eflomal_rows_read_the_test_lines_at_the_end(table):
    for method in ("forward", "reverse", "intersection", "grow-diag", "grow-diag-final-and"):
        aer, precision, recall, command = table_row(table.stdout, f"eflomal {method}")
        assert (aer, precision, recall) == (0.0, 100.0, 100.0), method
    assert "eflomal-align -s corpus.en -t corpus.fr" in table_row(table.stdout,
                                                                  "eflomal forward")[3]


def test_rows_without_their_runs_are_left_out_saying_why(table):
    assert "attncli" not in table.stdout.split("\n\n", 1)[1]
    for why in ("no --forward RUN", "no --guided RUN3", "no --aligner RUN4"):
        assert why in table.stderr


def test_data_without_the_hansards_files_is_one_line_naming_the_option(tmp_path):
    line = one_line_error(benchmark("--data", tmp_path, "--eflomal-dir", tmp_path))
    assert line.startswith(f"Error: --data {tmp_path}: ")
    assert "hansards-en-fr/test.en" in line


def test_a_run_that_is_not_one_is_refused_before_anything_runs(data, tmp_path):
    line = one_line_error(benchmark("--data", data, "--forward", tmp_path / "nothing"))
    assert line.startswith("Error: --forward: ") and "nothing" in line
    line = one_line_error(benchmark("--data", data, "--aligner-reverse", tmp_path / "nothing"))
    assert line.startswith("Error: --aligner-reverse: ") and "nothing" in line


def test_eflomal_links_of_another_corpus_are_refused(data, tmp_path):
    (tmp_path / "eflomal.fwd").write_text("0-0\n" * 447)
    (tmp_path / "eflomal.rev").write_text("0-0\n" * 447)
    line = one_line_error(benchmark("--data", data, "--eflomal-dir", tmp_path))
    assert "eflomal.fwd has 447 lines for 400,447 sentence pairs" in line


def test_a_transformer_gets_a_row_per_decoder_layer(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE_RUN / "model", model)
    none = dict.fromkeys(("forward", "reverse", "guided", "aligner", "aligner_reverse"))
    assert given_models(SimpleNamespace(**{**none, "forward": model})) == {
        **none, "forward": (model, [None])}
    config = json.loads((model / "config.json").read_text("utf-8"))
    config["model"].update(decoder="self-attention", decoder_layers=3)
    (model / "config.json").write_text(json.dumps(config), "utf-8")
    assert given_models(SimpleNamespace(**{**none, "guided": model}))[
        "guided"].layers == [1, 2, 3]


def test_layer_reads_both_models_at_that_block_in_every_joined_row(monkeypatch):
    """`--layer N`: each `attncli align` of the reverse and symmetrised rows names the
    block, and each row says it; without it, none does."""
    commands = []

    def attncli_align(test, run, options=()):
        commands.append([str(option) for option in options])
        record = {"forward": [[0, 0]], "reverse": [[0, 0]], "links": [[0, 0]]}
        lines = [json.dumps(record) if "json" in commands[-1] else "0-0"] * 2
        return lines, alignment.shown_command(run, options)

    monkeypatch.setattr(alignment, "attncli_align", attncli_align)
    test = SimpleNamespace(folder=Path("hansards"))
    forward, reverse = (alignment.Model(Path(run), [1, 2, 3]) for run in ("enfr", "fren"))
    rows = alignment.joined_rows(test, forward, reverse, layer=2)
    assert commands and all(options[options.index("--layer") + 1] == "2"
                            for options in commands)
    assert all(row.method.endswith(", layer 2") and "--layer 2" in row.command
               for row in rows)
    commands.clear()
    rows = alignment.joined_rows(test, forward, reverse)
    assert commands and not any("--layer" in options for options in commands)
    assert not any("layer" in row.method for row in rows)


def test_a_transformers_rows_are_named_so():
    assert alignment.model_name(alignment.Model(Path("run"), [None])) == "attncli"
    assert alignment.model_name(alignment.Model(Path("run"), [1, 2, 3])) == (
        "attncli Transformer")


# A stand-in for the gold sentences in the fixture run's languages (Spanish -> English,
# punctuation spaced off), repeated to the test set's 447 lines, with talp gold links.
STAND_IN = [
    ("tengo hambre .", "i am hungry .", "1-1 1-2 2-3 3-4"),
    ("¿ quién es él ?", "who is he ?", "2-1 3-2 4-3 1p4 5-4"),
    ("tom no está aquí .", "tom is not here .", "1-1 3-2 2-3 4-4 5-5"),
]


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """`(data, eflomal_dir)`: a shared data folder whose hansards-en-fr/ holds the stand-in
    test set, two training lines and published outputs of one link a line; eflomal's
    links of the same."""
    data = tmp_path_factory.mktemp("stand-in")
    folder = data / "hansards-en-fr"
    (folder / "reference").mkdir(parents=True)
    lines = [STAND_IN[number % len(STAND_IN)] for number in range(447)]
    for index, name in enumerate(("test.en", "test.fr", "test.talp")):
        (folder / name).write_text("".join(line[index] + "\n" for line in lines), "utf-8")
    for language in ("en", "fr"):
        with gzip.open(folder / f"train.{language}.gz", "wt", encoding="utf-8") as train:
            train.write("un .\nuno .\n")
    for _, name in PUBLISHED:
        (folder / "reference" / name).write_text("0-0\n" * 447)
    eflomal_dir = data / "eflomal"
    eflomal_dir.mkdir()
    for name in ("eflomal.fwd", "eflomal.rev"):
        (eflomal_dir / name).write_text("0-0\n" * (2 + 447))
    return data, eflomal_dir


def align(*args):
    """`attncli align ARGS` in this process: the script's own rows are `attncli align`
    processes already."""
    result = CliRunner().invoke(app, ["align", *map(str, args)], prog_name="attncli")
    assert result.exit_code == 0, result.output
    return result


def benchmark_here(monkeypatch, capsys, *args):
    """`python -m benchmarks.alignment ARGS` in this process, each `attncli align` it
    starts run here too (`CliRunner`): what it printed, as `.stdout` and `.stderr`. Its
    align processes spent 5 s each starting TensorFlow and loading the model, and
    aligning the 447 pairs took almost nothing. The script runs as a process in `table`,
    and `attncli align` in test_align_command."""
    def run(command, **_):
        assert command[:4] == [sys.executable, "-m", "attncli", "align"], command
        result = CliRunner().invoke(app, command[3:], prog_name="attncli")
        return subprocess.CompletedProcess(command, result.exit_code, result.stdout,
                                           result.stderr)

    monkeypatch.setattr(alignment, "subprocess", SimpleNamespace(run=run))
    monkeypatch.setattr(sys, "argv", ["benchmarks.alignment", *map(str, args)])
    alignment.main()
    printed = capsys.readouterr()
    return SimpleNamespace(stdout=printed.out, stderr=printed.err)


def figures(text):
    """`(AER, precision, recall)` of `attncli align --gold`'s line."""
    match = re.match(r"AER (\S+)  precision (\S+)  recall (\S+)", text)
    return tuple(map(float, match.groups()))


@pytest.mark.slow
def test_attncli_rows_are_what_attncli_align_prints(stand_in, monkeypatch, capsys):
    data, eflomal_dir = stand_in
    result = benchmark_here(monkeypatch, capsys, "--data", data, "--eflomal-dir", eflomal_dir,
                            "--forward", FIXTURE_RUN, "--reverse", FIXTURE_RUN)
    methods = [line.split(" | ")[0].strip("| ") for line in result.stdout.splitlines()
               if line.startswith("| attncli")]
    assert methods == [
        "attncli en→fr, raw", "attncli en→fr, raw, mutual-argmax",
        "attncli en→fr, shifted", "attncli en→fr, shifted, mutual-argmax",
        *(f"attncli {method}, {named}"
          for method in ("fr→en", "intersection", "grow-diag", "grow-diag-final-and",
                         "mean of the weights")
          for named in ("raw", "raw, mutual-argmax", "shifted", "shifted, mutual-argmax")),
    ]
    folder = data / "hansards-en-fr"
    # A row's command with --gold prints the row's figures: one run alone, and a
    # symmetrisation the script joined from another run's two directions.
    for method in ("attncli en→fr, shifted", "attncli en→fr, raw, mutual-argmax",
                   "attncli grow-diag, shifted", "attncli grow-diag-final-and, raw, mutual-argmax",
                   "attncli mean of the weights, raw, mutual-argmax"):
        *row, command = table_row(result.stdout, method)
        arguments = command.strip("`").replace("$H", str(folder)).split()[2:]
        printed = align(*arguments, "--gold", folder / "test.talp")
        assert figures(printed.stdout) == tuple(row), method
    # The reverse row: the reverse model alone, its links flipped.
    alone = align(FIXTURE_RUN, "--source", folder / "test.fr", "--target", folder / "test.en")
    links = [{(i, j) for j, i in parse_pharaoh(line)} for line in alone.stdout.splitlines()]
    golds = [parse_talp(line) for line in (folder / "test.talp").read_text().splitlines()]
    scores = score_corpus(links, golds)
    expected = tuple(round(100 * value, 2)
                     for value in (scores.aer, scores.precision, scores.recall))
    assert table_row(result.stdout, "attncli fr→en, raw")[:3] == expected


@pytest.mark.slow
def test_alignment_layer_rows_read_the_layer_one_way_and_both(stand_in, tmp_path,
                                                              monkeypatch, capsys):
    data, eflomal_dir = stand_in
    aligner = with_alignment_layer(FIXTURE_RUN, tmp_path / "aligner")
    result = benchmark_here(monkeypatch, capsys, "--data", data, "--eflomal-dir", eflomal_dir,
                            "--aligner", aligner, "--aligner-reverse", aligner)
    methods = [line.split(" | ")[0].strip("| ") for line in result.stdout.splitlines()
               if line.startswith("| attncli")]
    assert methods == [
        "attncli alignment layer en→fr, raw", "attncli alignment layer en→fr, raw, mutual-argmax",
        *(f"attncli alignment layer {method}, {named}"
          for method in ("fr→en", "intersection", "grow-diag", "grow-diag-final-and",
                         "mean of the weights")
          for named in ("raw", "raw, mutual-argmax")),
    ]
    folder = data / "hansards-en-fr"
    *row, command = table_row(result.stdout, "attncli alignment layer en→fr, raw")
    assert "--attention" not in command and "--shift" not in command
    arguments = command.strip("`").replace("$H", str(folder)).split()[2:]
    printed = align(*arguments, "--gold", folder / "test.talp")
    assert figures(printed.stdout) == tuple(row)
    # The layer's links are not the cross-attention's.
    cross = align(*arguments, "--attention", "cross", "--gold", folder / "test.talp")
    assert figures(cross.stdout) == figures(align(
        FIXTURE_RUN, *arguments[1:], "--gold", folder / "test.talp").stdout)


def test_eflomal_outputs_slice_the_test_lines_and_the_training_lines(stand_in, tmp_path):
    """`write_outputs`: every line symmetrised; the last 447 lines are the test set's, the
    first ones (line-aligned with train.en.gz) the guided training's `data.alignments`."""
    data, _ = stand_in
    forward = ["0-0 1-1", "0-0", *(["0-0 1-1 2-2"] * 447)]
    reverse = ["0-0 1-0", "", *(["0-0 2-2"] * 447)]
    (tmp_path / "eflomal.fwd").write_text("".join(line + "\n" for line in forward))
    (tmp_path / "eflomal.rev").write_text("".join(line + "\n" for line in reverse))
    write_outputs(data / "hansards-en-fr", tmp_path)
    # grow-diag-final-and of line 1: the intersection 0-0 grows by its neighbours in the
    # union, 1-0 (source word 1 unaligned) then 1-1 (target word 1 unaligned); of line 2,
    # the forward link alone (final-and: both its words unaligned).
    assert (tmp_path / "train.en-fr.gdfa").read_text() == "0-0 1-0 1-1\n0-0\n"
    assert (tmp_path / "test.eflomal.fwd").read_text() == "0-0 1-1 2-2\n" * 447
    assert (tmp_path / "test.eflomal.intersection").read_text() == "0-0 2-2\n" * 447
    assert len((tmp_path / "eflomal.grow-diag").read_text().splitlines()) == 449


@pytest.mark.slow
def test_eflomal_aligns_the_training_text_with_the_test_set_appended(stand_in, tmp_path):
    if eflomal_align() is None:
        pytest.skip("eflomal is not installed (pip install 'attncli[align]')")
    data, _ = stand_in
    result = run(
        [sys.executable, "-m", "benchmarks.eflomal_links", "--data", data, "--out", tmp_path],
        cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'train.en-fr.gdfa'}\n"
    folder = data / "hansards-en-fr"
    assert (tmp_path / "corpus.fr").read_text() == "un .\nuno .\n" + (
        folder / "test.fr").read_text()
    sentences = list(zip((tmp_path / "corpus.en").read_text().splitlines(),
                         (tmp_path / "corpus.fr").read_text().splitlines()))
    for name in ("fwd", "rev", "grow-diag-final-and"):
        lines = (tmp_path / f"eflomal.{name}").read_text().splitlines()
        assert len(lines) == len(sentences) == 449
        for line, (source, target) in zip(lines, sentences):
            check_within(parse_pharaoh(line), len(source.split()), len(target.split()))
    assert (tmp_path / "eflomal.command").read_text().startswith(
        "eflomal-align -s corpus.en -t corpus.fr -f eflomal.fwd -r eflomal.rev")
