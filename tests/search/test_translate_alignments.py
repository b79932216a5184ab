"""`attncli translate --alignments` and `--replace-unk` as a user runs them, on a copy of
the small trained run of `tests/fixtures/run-0.1.0` (word level on both sides; its model
emits `[UNK]` often, which `--replace-unk` needs): `python -m attncli` subprocesses for
lines down a pipe, the test's own process (`translate`) for what is printed of lines given
as arguments or in a file, and for the refusal (a one-line error whichever process prints it).
"""

import json
import re

import numpy as np
import pytest
from attncli_process import attncli, fixture_run
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app

SENTENCES = ["Tengo hambre.", "", "¿Dónde está el baño?", "Tom no vino a la escuela hoy."]
PHARAOH = re.compile(r"^(\d+-\d+( \d+-\d+)*)?$")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return fixture_run(tmp_path_factory.mktemp("alignments"))


def translate(run, *args):
    """`attncli translate RUN ARGS` in this process: its stdout."""
    result = CliRunner().invoke(app, ["translate", str(run), *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stdout


def links(pharaoh):
    assert PHARAOH.match(pharaoh), pharaoh
    return [tuple(map(int, link.split("-"))) for link in pharaoh.split()]


def pieces_of(words, tokens):
    """The token positions of each word that vote for its link: the tokens, read in
    order, spell the words (word-level tokens); those with a letter or digit vote, or
    all of a word's if none has one."""
    groups, position = [], 0
    for word in words:
        group, spelled = [], ""
        while spelled != word:
            spelled += tokens[position]
            group.append(position)
            position += 1
        voting = [t for t in group if any(map(str.isalnum, tokens[t]))]
        groups.append(voting or group)
    return groups


def test_alignments_in_every_format_from_a_stream_with_beam_search(run, tmp_path):
    stdin = "\n".join(SENTENCES) + "\n"
    search = ["--beam", "3", "--n-best", "2", "--alignments"]
    lines = [json.loads(line) for line in attncli(
        "translate", run, *search, "--format", "json", cwd=tmp_path, stdin=stdin
    ).stdout.splitlines()]
    text = attncli("translate", run, *search, cwd=tmp_path, stdin=stdin).stdout.split("\n")
    assert len(lines) == len(SENTENCES) and text[-1] == "" and len(text) == len(SENTENCES) + 1
    assert lines[1]["hypotheses"] == [] and lines[1]["source_words"] == [] and text[1] == ""
    joined = 0
    for line, text_line in zip(lines, text):
        if not line["source"]:
            continue
        # Word level: the words are the tokens, [END] left out.
        assert line["source_words"] == line["source_tokens"]
        fields = text_line.split(" ||| ")
        assert len(fields) == 2 * len(line["hypotheses"]) == 4
        for k, hypothesis in enumerate(line["hypotheses"]):
            # Target words: the translation's own words, as printed ("hungry." is one).
            words = hypothesis["text"].split()
            assert hypothesis["words"] == words
            found = links(hypothesis["alignment"])
            # One link per target word, in target order, each to a source word.
            assert [j for _, j in found] == list(range(len(words)))
            assert all(0 <= i < len(line["source_words"]) for i, _ in found)
            # Each target word's source word is the most attended one, its tokens'
            # weights averaged.
            weights = np.array(hypothesis["weights"])
            groups = pieces_of(words, hypothesis["tokens"])
            joined += len(words) < len([t for t in hypothesis["tokens"] if t != "[END]"])
            for i, j in found:
                mean = weights[groups[j]].mean(axis=0)
                assert mean[i] == mean[:len(line["source_words"])].max()
            # The text is printed as it is without --alignments.
            assert fields[2 * k] == hypothesis["text"]
            assert fields[2 * k + 1] == hypothesis["alignment"]
    assert joined, "some printed word should hold several tokens (a word and its full stop)"


def test_tsv_has_the_alignment_as_a_fifth_column(run, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(SENTENCES) + "\n", "utf-8")
    rows = translate(run, "--input", source, "--format", "tsv", "--alignments",
                     "--beam", "1").splitlines()
    assert len(rows) == len(SENTENCES)
    for number, row in enumerate(rows, start=1):
        columns = row.split("\t")
        assert len(columns) == 5 and columns[:2] == [str(number), "1"]
        if number == 2:
            assert columns[2:] == ["", "", ""]
        else:
            assert len(links(columns[4])) == len(columns[3].split())
            assert " ." not in columns[3]  # detokenized, as without --alignments


def test_replace_unk_copies_the_most_attended_source_word(run):
    sentences = [sentence for sentence in SENTENCES if sentence]
    plain = [json.loads(line) for line in translate(
        run, *sentences, "--format", "json", "--beam", "1"
    ).splitlines()]
    replaced = [json.loads(line) for line in translate(
        run, *sentences, "--format", "json", "--beam", "1", "--replace-unk"
    ).splitlines()]
    unknowns = 0
    for before, after in zip(plain, replaced):
        [hypothesis], [result] = before["hypotheses"], after["hypotheses"]
        weights = np.array(hypothesis["weights"])
        expected = []
        for t, token in enumerate(hypothesis["tokens"]):
            if token == "[UNK]":
                unknowns += 1
                token = before["source_tokens"][int(np.argmax(weights[t]))]
            expected.append(token)
        assert result["tokens"] == expected
        assert "[UNK]" not in result["text"]
    assert unknowns >= 2, "the fixture's model should emit [UNK]"
    text = translate(run, sentences[0], "--beam", "1", "--replace-unk")
    assert text == replaced[0]["hypotheses"][0]["text"] + "\n"


def test_replace_unk_on_a_subword_target_is_one_line_error(tmp_path):
    run = fixture_run(tmp_path)
    # The refusal reads the target tokenizer's level: make it a subword one.
    settings = run / "model" / "target.tokenizer.json"
    settings.write_text(settings.read_text("utf-8").replace('"word"', '"subword"'), "utf-8")
    result = CliRunner().invoke(app, ["translate", str(run), "Hola.", "--replace-unk"])
    message = one_line_error(result)
    assert "--replace-unk" in message and "subword" in message
    assert result.stdout == ""
