"""`attncli align RUN` as a user runs it, on the session's tiny run (word level,
recurrent; `attncli_runs.trained`): links against a NumPy argmax of the forced attention,
AER against the formula of Och & Ney 2003, stdin answered line by line (a real
process), and every bad input one line, exit 2, naming its file and line.

The sentences have their punctuation spaced off, so at the word level each word given is
one token, and the expected links are the argmax of the attention's rows themselves.
"""

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from attncli_process import FIXTURE_RUN
from attncli_runs import trained  # noqa: F401 (a fixture)
from cli_errors import one_line_error
from process_watch import run, wait, wait_until
from typer.testing import CliRunner

from attncli.alignment.symmetrization import symmetrize
from attncli.cli.app import app

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
PAIRS = [
    ("tengo hambre .", "i am hungry ."),
    ("¿ dónde está el baño ?", "where is the bathroom ?"),
    ("hace frío hoy .", ""),
    ("tom no vino a la escuela .", "tom did not come to school ."),
]
# talp, 1-based: sure "i-j", possible "ipj"; the third pair's target is empty.
GOLD = ["1-1 1-2 2-3 3-4", "2-1 3-2 4-3 5-4 1p1 6-5", "", "1-1 2-3 3-4 4p5 5-5 6-6 7-7"]
# A model directory for the refusals that come before any model is loaded (read only).
MODEL = FIXTURE_RUN / "model"


def align(*args, stdin=None):
    """`attncli align ARGS` in this process."""
    return CliRunner().invoke(app, ["align", *map(str, args)], input=stdin,
                              prog_name="attncli")


def succeeded(result):
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("align")
    (folder / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), "utf-8")
    (folder / "source.txt").write_text("".join(s + "\n" for s, _ in PAIRS), "utf-8")
    (folder / "target.txt").write_text("".join(t + "\n" for _, t in PAIRS), "utf-8")
    (folder / "gold.talp").write_text("".join(line + "\n" for line in GOLD), "utf-8")
    return folder


@pytest.fixture(scope="module")
def attention(trained):  # noqa: F811 (the fixture)
    """The tiny model's cross-attention `(target tokens, source tokens)` over each pair
    (None for an empty side), forward and with the sides swapped."""
    from attncli.search.forced import force
    from attncli.search.loading import load_model

    translator = load_model(trained / "model").translator()
    filled = [pair for pair in PAIRS if pair[1]]

    def weights(sources, targets):
        found = iter(forced.weights for forced in force(translator, sources, targets))
        return [next(found) if target else None for _, target in PAIRS]

    return (weights([s for s, _ in filled], [t for _, t in filled]),
            weights([t for _, t in filled], [s for s, _ in filled]))


def argmax_links(weights, source, target, shift=False):
    """{(argmax_i W[t, i], t)} over the words (one token each); row t + 1 when shifted."""
    rows = weights[1:] if shift else weights
    return {(int(np.argmax(rows[t, :len(source.split())])), t)
            for t in range(len(target.split()))}


def pharaoh(links):
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def read_pharaoh(line):
    return {tuple(map(int, link.split("-"))) for link in line.split()}



@pytest.mark.slow
@pytest.mark.parametrize("shift", [False, True])
def test_links_are_the_argmax_of_the_attention(trained, files, attention, shift):  # noqa: F811
    forward, _ = attention
    expected = [pharaoh(argmax_links(weights, s, t, shift)) if weights is not None else ""
                for weights, (s, t) in zip(forward, PAIRS)]
    options = ["--shift"] if shift else []
    result = succeeded(align(trained, "--input", files / "pairs.tsv", *options))
    assert result.stdout.split("\n") == expected + [""]
    assert result.stderr.strip().endswith(f"{len(PAIRS)} pairs aligned")
    # The same from two files, and with the layer and head a recurrent decoder has.
    again = succeeded(align(trained, "--source", files / "source.txt", "--target",
                            files / "target.txt", "--layer", 1, "--head", 1, *options))
    assert again.stdout == result.stdout


@pytest.mark.slow
def test_a_threshold_keeps_every_word_above_it(trained, files, attention):  # noqa: F811
    forward, _ = attention
    result = succeeded(align(trained, "--input", files / "pairs.tsv", "--threshold", 0.2,
                             "--format", "json"))
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["line"] for line in lines] == [1, 2, 3, 4]
    for line, weights, (source, target) in zip(lines, forward, PAIRS):
        assert line["source_words"] == source.split()
        assert line["target_words"] == target.split()
        expected = set() if weights is None else {
            (i, t) for t in range(len(target.split())) for i in range(len(source.split()))
            if weights[t, i] >= 0.2}
        assert {tuple(link) for link in line["links"]} == expected


@pytest.mark.slow
def test_mutual_argmax_keeps_the_links_both_words_agree_on(trained, files, attention):  # noqa: F811
    forward, _ = attention
    result = succeeded(align(trained, "--input", files / "pairs.tsv", "--extraction",
                             "mutual-argmax", "--format", "json"))
    for line, weights, (source, target) in zip(result.stdout.splitlines(), forward, PAIRS):
        if weights is not None:  # the words' rows and columns, without [END]'s
            weights = weights[:len(target.split()), :len(source.split())]
        expected = set() if weights is None else {
            (i, t) for t, i in enumerate(weights.argmax(axis=1))
            if weights[:, i].argmax() == t}
        assert {tuple(link) for link in json.loads(line)["links"]} == expected


@pytest.mark.slow
def test_reverse_links_are_flipped_and_symmetrised(trained, files, attention):  # noqa: F811
    forward, backward = attention
    result = succeeded(align(trained, "--input", files / "pairs.tsv", "--reverse", trained,
                             "--format", "json", "--symmetrize", "grow-diag"))
    for text, weights, reverse_weights, (source, target) in zip(
            result.stdout.splitlines(), forward, backward, PAIRS):
        line = json.loads(text)
        if weights is None:
            assert line["links"] == [] and "forward" not in line
            continue
        forward_links = argmax_links(weights, source, target)
        # The reverse model reads the target as its source: its links, flipped, give
        # each source word one target word.
        reverse_links = {(j, i) for i, j in argmax_links(reverse_weights, target, source)}
        assert {tuple(link) for link in line["forward"]} == forward_links
        assert {tuple(link) for link in line["reverse"]} == reverse_links
        assert {tuple(link) for link in line["links"]} == symmetrize(
            forward_links, reverse_links, "grow-diag")
    # grow-diag-final-and unless told.
    default = succeeded(align(trained, "--input", files / "pairs.tsv", "--reverse", trained))
    chosen = succeeded(align(trained, "--input", files / "pairs.tsv", "--reverse", trained,
                             "--symmetrize", "grow-diag-final-and"))
    assert default.stdout == chosen.stdout


@pytest.mark.slow
def test_mean_joins_the_weights_of_both_directions_before_the_links(
        trained, files, attention):  # noqa: F811
    forward, backward = attention
    result = succeeded(align(trained, "--input", files / "pairs.tsv", "--reverse", trained,
                             "--format", "json", "--symmetrize", "mean",
                             "--extraction", "mutual-argmax"))
    for text, weights, reverse_weights, (source, target) in zip(
            result.stdout.splitlines(), forward, backward, PAIRS):
        line = json.loads(text)
        if weights is None:
            assert line["links"] == []
            continue
        words, reverse_words = len(source.split()), len(target.split())
        # M = (A + B^T) / 2 over the words (without either [END] row).
        joined = (weights[:reverse_words, :words]
                  + reverse_weights[:words, :reverse_words].T) / 2
        expected = {(i, t) for t, i in enumerate(joined.argmax(axis=1))
                    if joined[:, i].argmax() == t}
        assert {tuple(link) for link in line["links"]} == expected
        assert "forward" in line and "reverse" in line


def aer_of(predicted, gold_lines):
    """Och & Ney 2003 over the corpus, from the talp lines as written (1-based)."""
    a = s = a_s = a_p = 0
    for links, line in zip(predicted, gold_lines):
        sure = {(int(x) - 1, int(y) - 1) for x, y in
                (field.split("-") for field in line.split() if "-" in field)}
        possible = sure | {(int(x) - 1, int(y) - 1) for x, y in
                           (field.split("p") for field in line.split() if "p" in field)}
        a, s = a + len(links), s + len(sure)
        a_s, a_p = a_s + len(links & sure), a_p + len(links & possible)
    return 100 * (1 - (a_s + a_p) / (a + s)), 100 * a_p / a, 100 * a_s / s, (a, s, a_s, a_p)


@pytest.mark.slow
def test_gold_prints_aer_precision_and_recall(trained, files):  # noqa: F811
    links = succeeded(align(trained, "--input", files / "pairs.tsv")).stdout.split("\n")[:-1]
    aer, precision, recall, counts = aer_of([read_pharaoh(line) for line in links], GOLD)
    result = succeeded(align(trained, "--input", files / "pairs.tsv", "--gold",
                             files / "gold.talp"))
    assert result.stdout == (
        f"AER {aer:.2f}  precision {precision:.2f}  recall {recall:.2f}  (4 pairs; "
        f"|A| {counts[0]}, |S| {counts[1]}, |A∩S| {counts[2]}, |A∩P| {counts[3]})\n")
    lines = [json.loads(line) for line in succeeded(align(
        trained, "--input", files / "pairs.tsv", "--gold", files / "gold.talp",
        "--format", "json")).stdout.splitlines()]
    assert [pharaoh(tuple(link) for link in line["links"]) for line in lines[:-1]] == links
    totals = lines[-1]["totals"]
    assert totals["pairs"] == 4
    assert (totals["predicted"], totals["sure"], totals["sure_hits"],
            totals["possible_hits"]) == counts
    assert totals["aer"] == pytest.approx(aer, abs=1e-4)
    assert totals["precision"] == pytest.approx(precision, abs=1e-4)
    assert totals["recall"] == pytest.approx(recall, abs=1e-4)
    assert sum(line["scores"]["predicted"] for line in lines[:-1]) == counts[0]


@pytest.mark.slow
def test_stdin_answers_each_pair_as_it_is_read(trained, files, tmp_path):  # noqa: F811
    expected = succeeded(align(trained, "--input", files / "pairs.tsv")).stdout.split("\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "attncli", "align", str(trained)], cwd=tmp_path, env=ENV,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers = queue.Queue()
    threading.Thread(target=lambda: [answers.put(line) for line in process.stdout],
                     daemon=True).start()
    try:
        for (source, target), links in zip(PAIRS, expected):
            process.stdin.write(f"{source}\t{target}\n".encode("utf-8"))
            process.stdin.flush()
            wait_until(lambda: not answers.empty(), process)
            assert answers.get().decode("utf-8") == links + "\n"
        assert process.poll() is None  # still reading: stdin is open
        process.stdin.close()
        assert wait(process) == 0
        assert b"aligned" not in process.stderr.read()  # no progress for stdin
    finally:
        process.kill()


@pytest.mark.slow
@pytest.mark.parametrize("option, value, message", [
    ("--layer", 2, "--layer 2 is out of range: the model's cross-attention has 1 layer (1..1)"),
    ("--head", 3, "--head 3 is out of range: the model's cross-attention has 1 head (1..1)"),
])
def test_a_layer_or_head_the_model_lacks(trained, files, option, value, message):  # noqa: F811
    result = align(trained, "--input", files / "pairs.tsv", option, value)
    assert one_line_error(result) == f"Error: {message}"
    assert result.stdout == ""


@pytest.mark.slow
def test_a_line_after_good_ones_on_stdin_is_refused_after_them(trained):  # noqa: F811
    result = align(trained, stdin="tengo hambre .\ti am hungry .\nno tab here\n")
    assert one_line_error(result) == ("Error: stdin line 2: 1 tab-separated field; write the "
                                      "source, a tab, then its translation")


@pytest.mark.parametrize("content, message", [
    ("a\tb\tc\n", "--input {dir}/bad.tsv line 1: 3 tab-separated fields"),
    ("a\tb\nno tab\n", "--input {dir}/bad.tsv line 2: 1 tab-separated field"),
])
def test_a_tsv_line_without_two_fields(tmp_path, content, message):
    (tmp_path / "bad.tsv").write_text(content, "utf-8")
    result = align(MODEL, "--input", tmp_path / "bad.tsv")
    assert message.format(dir=tmp_path) in one_line_error(result)


def test_files_of_different_lengths_name_the_first_unpaired_line(tmp_path):
    (tmp_path / "s.txt").write_text("a\nb\nc\n", "utf-8")
    (tmp_path / "t.txt").write_text("x\ny\n", "utf-8")
    result = align(MODEL, "--source", tmp_path / "s.txt", "--target", tmp_path / "t.txt")
    assert one_line_error(result) == (
        f"Error: --source {tmp_path}/s.txt has 3 lines and --target {tmp_path}/t.txt 2: "
        f"line 3 of --source {tmp_path}/s.txt has no partner; the files must be line-aligned")


@pytest.mark.parametrize("lines, message", [
    (GOLD[:1] + ["2-1 3x2"] + GOLD[2:],
     "--gold {gold} line 2: '3x2' is not a gold link"),
    (GOLD[:1] + ["0-1"] + GOLD[2:], "--gold {gold} line 2: '0-1' is not a gold link"),
    (GOLD[:3] + ["1-1 8-7"],
     "--gold {gold} line 4: link 8-7 is past --input {pairs} line 4, of 7 source and 7 "
     "target words (counted from 1)"),
    (GOLD[:2] + ["1p1"] + GOLD[3:],
     "--gold {gold} line 3: link 1p1 is past --input {pairs} line 3, of 4 source and 0 "
     "target words (counted from 1)"),
    (GOLD[:3], "--gold {gold} has 3 lines for 4 pairs: pair 4 of --input {pairs} has no "
     "gold line"),
    (GOLD + ["1-1"], "--gold {gold} has 5 lines for 4 pairs: its line 5 has no pair in "
     "--input {pairs}"),
])
def test_bad_gold_is_one_line_naming_it(files, tmp_path, lines, message):
    gold = tmp_path / "gold.talp"
    gold.write_text("".join(line + "\n" for line in lines), "utf-8")
    result = align(MODEL, "--input", files / "pairs.tsv", "--gold", gold)
    assert message.format(gold=gold, pairs=files / "pairs.tsv") in one_line_error(result)
    assert result.stdout == ""


@pytest.mark.slow
def test_gold_on_stdin_must_cover_every_pair(trained, files):  # noqa: F811
    stdin = "".join(f"{s}\t{t}\n" for s, t in PAIRS[:2])
    result = align(trained, "--gold", files / "gold.talp", stdin=stdin)
    assert "--gold" in one_line_error(result) and "4 lines for 2 pairs" in result.stderr


@pytest.mark.slow
def test_a_word_the_model_spells_otherwise_gets_no_links_and_is_named(trained,  # noqa: F811
                                                                       tmp_path):
    # The tiny model folds case: "İ" becomes two characters, "i" and a combining dot, so
    # its tokens no longer spell the word given. The pair gets no links; the others theirs.
    (tmp_path / "pairs.tsv").write_text(
        "tengo hambre .\ti am hungry .\nİstanbul .\tx\nhola .\thello .\n", "utf-8")
    result = align(trained, "--input", tmp_path / "pairs.tsv")
    assert result.exit_code == 0, result.output
    first, second, third = result.stdout.splitlines()
    assert first and second == "" and third
    assert (f"warning: 1 pair(s) got no links, their words not being the model's; the "
            f"first, --input {tmp_path}/pairs.tsv line 2: the model reads the source's word "
            "'İstanbul' differently") in " ".join(result.stderr.split())


# Option errors: refused before anything is read or loaded.
@pytest.mark.parametrize("args, message", [
    (["--format", "csv"], "--format 'csv' is not a format; choose one of text, json"),
    (["--threshold", "0.3", "--extraction", "argmax"], "--threshold goes with --extraction "
     "threshold; argmax takes none"),
    (["--threshold", "0.3", "--extraction", "mutual-argmax"], "mutual-argmax takes none"),
    (["--extraction", "threshold"], "--extraction threshold needs --threshold F"),
    (["--extraction", "max"], "--extraction 'max': choose one of argmax, mutual-argmax, "
     "threshold"),
    (["--threshold", "0"], "--threshold must be in (0, 1]"),
    (["--symmetrize", "union"], "--symmetrize joins RUN's links with those of --reverse"),
    (["--reverse", "r2", "--symmetrize", "grow"], "--symmetrize 'grow': choose one of "
     "intersection, union, grow-diag, grow-diag-final, grow-diag-final-and"),
    (["--source", "s.txt"], "--source needs --target"),
    (["--input", "p.tsv", "--source", "s", "--target", "t"], "give the pairs with --input "
     "or with --source and --target, not both"),
    (["--layer", "0"], "--layer counts from 1"),
    (["--batch-size", "0"], "--batch-size must be >= 1"),
])
def test_bad_options_are_one_line(args, message):
    assert message in one_line_error(align("no-such-run", *args))


def test_align_help_imports_no_tensorflow():
    code = textwrap.dedent("""
        import runpy, sys
        sys.argv = ["attncli", "align", "--help"]
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            assert exit.code == 0, exit.code
        print("HEAVY", sorted(name for name in ("tensorflow", "keras") if name in sys.modules))
    """)
    completed = run([sys.executable, "-c", code], cwd=REPO, env=ENV)
    assert completed.returncode == 0, completed.stderr
    assert "HEAVY []" in completed.stdout and "--symmetrize" in completed.stdout
