"""Every bad input is one line on stderr and exit code 2, through the command.

A configuration (its YAML, its values), a damaged or mismatched model directory, and
the options of translate, inspect-weights and score-demo.
"""

import json

import pytest
from attncli_runs import TINY, attncli, run, succeeds, trained  # noqa: F401
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app


# 3. YAML aliases that multiply a document, and values too long to echo.


def alias_bomb(levels, leaf="lol"):
    """A YAML document whose last key, through nested aliases, stands for 9**levels leaves."""
    lines = [f"l0: &l0 [{', '.join([repr(leaf)] * 9)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return lines, f"[{', '.join([f'*l{levels - 1}'] * 9)}]"


def test_an_alias_bomb_in_a_config_is_refused_in_one_short_line(tmp_path):
    lines, bomb = alias_bomb(7)
    config = tmp_path / "bomb.yaml"
    # The aliases sit under keys the schema would reject, and the bomb in data.format.
    config.write_text("\n".join(f"# {line}" for line in lines) + "\n" + "\n".join(
        ["anchors:"] + [f"  {line}" for line in lines] + ["data:", f"  format: {bomb}"]
    ) + "\n")
    message = one_line_error(attncli("train", config, cwd=tmp_path))
    assert "aliases expand the document past 100,000 values" in message
    assert len(message) < 300


def test_an_alias_bomb_in_a_score_demo_input_is_refused(tmp_path):
    lines, bomb = alias_bomb(7, leaf=1)
    document = tmp_path / "bomb.yaml"
    document.write_text("\n".join(["parameters:"] + [f"  {line}" for line in lines]
                                  + [f"query: {bomb}", "keys: [[1]]"]) + "\n")
    message = one_line_error(attncli("score-demo", "--input", document, cwd=tmp_path))
    assert "aliases expand the document past 100,000 values" in message


def test_a_value_that_contains_itself_is_refused(tmp_path):
    config = tmp_path / "loop.yaml"
    config.write_text("data: &data\n  format: [*data]\n")
    assert "contains itself" in one_line_error(attncli("train", config, cwd=tmp_path))


@pytest.mark.parametrize("override", ["data.format=" + "x" * 5000,
                                      "data.source.level=[" + "1, " * 3000 + "1]"])
def test_a_long_value_is_echoed_shortened(tmp_path, override):
    message = one_line_error(attncli("train", TINY, "--set", override, cwd=tmp_path))
    assert len(message) < 300 and ("…" in message or "..." in message), message


# 5. Bad values of a configuration, refused before anything is written.


@pytest.mark.parametrize("override, fragment", [
    ("training.seed=-1", "Received: seed=-1"),
    ("training.seed=4294967296", "Received: seed=4294967296"),
    ("data.source_column=1", "two different columns"),
    ("data.target_column=-1", "two different columns"),
    ('name="a\\0b"', "name must be a plain folder name"),
    ("name=" + "n" * 300, "at most 255 bytes"),
])
def test_a_bad_config_value_is_one_line_and_leaves_nothing(tmp_path, override, fragment):
    message = one_line_error(attncli("train", TINY, "--set", override, cwd=tmp_path))
    assert fragment in message and len(message) < 300, message
    assert list(tmp_path.iterdir()) == []


def test_a_run_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    message = one_line_error(attncli("train", TINY, "--run-dir", "file/sub", cwd=tmp_path))
    assert "a part of it is a file" in message


# 5, 6. A damaged or mismatched model directory is named, never a traceback.


def rewrite_json(path, change):
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def truncate(path, size):
    path.write_bytes(path.read_bytes()[:size])


DAMAGES = {
    "truncated weights": (lambda m: truncate(m / "model.weights.h5", 5000),
                          "cannot read the weights"),
    "garbage weights": (lambda m: (m / "model.weights.h5").write_bytes(b"garbage" * 100),
                        "cannot read the weights"),
    "weights of another model": (
        lambda m: rewrite_json(m / "config.json", lambda c: c["model"].update(units=64)),
        "belongs to another model"),
    "extra model key": (
        lambda m: rewrite_json(m / "config.json", lambda c: c["model"].update(extra=1)),
        "model.extra: unknown key"),
    "extra key": (lambda m: rewrite_json(m / "config.json", lambda c: c.update(extra=1)),
                  "unknown key 'extra'"),
    "missing key": (lambda m: rewrite_json(m / "config.json", lambda c: c.pop("source_end")),
                    "no 'source_end'"),
    "model a list": (
        lambda m: rewrite_json(m / "config.json", lambda c: c.update(model=[1])),
        "model must be a mapping"),
    "metadata a list": (
        lambda m: rewrite_json(m / "config.json", lambda c: c.update(metadata=[])),
        "metadata a mapping"),
    "tokenizer with an extra key": (
        lambda m: rewrite_json(m / "source.tokenizer.json", lambda c: c.update(extra=1)),
        "source.tokenizer.json is damaged (unknown key 'extra')"),
    "tokenizer a list": (lambda m: (m / "target.tokenizer.json").write_text("[]"),
                         "target.tokenizer.json is damaged"),
    "target vocabulary shorter than the output layer": (
        lambda m: truncate(m / "target.vocab.txt", 200),
        "target.vocab.txt has"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_model_directory_is_one_line(run, damage):
    change, fragment = DAMAGES[damage]
    change(run / "model")
    for command in (["translate", run, "Tengo hambre."], ["inspect-weights", run, "--params"]):
        result = CliRunner().invoke(app, [str(arg) for arg in command])
        assert fragment in one_line_error(result), result.stderr


@pytest.mark.slow
def test_a_damaged_model_is_one_line_from_the_command(run, tmp_path):
    truncate(run / "model" / "model.weights.h5", 5000)
    message = one_line_error(attncli("translate", run, "hola", cwd=tmp_path))
    assert "model.weights.h5" in message and "truncated file" in message


# 6. Inputs that were accepted silently or reported wrongly.


def invoke(*args, input=None):
    return CliRunner().invoke(app, [str(arg) for arg in args], input=input)


@pytest.mark.parametrize("override, fragment", [
    ("data.limit=-5", "Received: limit=-5"),
    ("data.valid_size=0", "valid_size must be above 0 when there is no data.valid file"),
])
def test_a_bad_data_setting_is_refused_in_the_configuration(tmp_path, override, fragment):
    message = one_line_error(attncli("train", TINY, "--set", override, cwd=tmp_path))
    assert fragment in message, message


@pytest.mark.slow
def test_a_validation_split_that_rounds_to_nothing(tmp_path):
    result = attncli("train", TINY, "--set", "data.valid_size=0.0001", cwd=tmp_path)
    message = one_line_error(result)
    assert "the validation split is empty (data.valid_size=0.0001 carves no pair" in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_skipped_lines_are_reported_once(tmp_path):
    lines = ["Hola.\tHello."] * 200 + ["no tab here", "\tempty source"]
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n")
    # An alignments file one line short stops the run right after the corpus is read and
    # reported (a model too large is refused before the corpus is read).
    (tmp_path / "links.txt").write_text("0-0\n")
    result = attncli("train", TINY, "--set", "data.format=tsv", "--set", "data.train=pairs.tsv",
                     "--set", "data.alignments=links.txt",
                     "--set", "training.guided_alignment={weight: 1.0}", cwd=tmp_path)
    assert "links.txt has 1 lines" in one_line_error(result)
    reports = [line for line in result.stderr.splitlines() if "pairs.tsv: 2 bad lines" in line]
    assert len(reports) == 1 and reports[0].endswith("skipped"), result.stderr


@pytest.mark.parametrize("command", [["inspect-weights", "RUN", "--params"], ["score-demo"]])
def test_decimals_follow_one_rule(tmp_path, command):
    command = [str(tmp_path) if arg == "RUN" else arg for arg in command]
    for decimals in ("100000", "13", "-1"):
        message = one_line_error(invoke(*command, "--decimals", decimals))
        assert message == f"Error: --decimals {decimals} is out of range; use 0 to 12"
    assert invoke("score-demo", "--decimals", "12").exit_code == 0


@pytest.mark.slow
@pytest.mark.parametrize("alpha", ["nan", "inf", "-inf"])
def test_a_length_penalty_that_is_not_a_number(run, alpha):
    message = one_line_error(invoke("translate", run, "Hola.", "--alpha", alpha))
    assert "alpha must be a finite number >= 0" in message


@pytest.mark.slow
@pytest.mark.parametrize("step", ["0", "99"])
def test_a_step_out_of_range_prints_no_table(run, step):
    result = invoke("inspect-weights", run, "--text", "Hola.", "--step", step, "--params")
    message = one_line_error(result)
    assert "--step" in message and step in message, message
    assert result.stdout == ""


@pytest.mark.slow
def test_a_byte_order_mark_is_not_part_of_the_first_sentence(run, tmp_path):
    source = tmp_path / "input.txt"
    source.write_bytes("\ufeffHola.\nAdiós.\n".encode("utf-8"))
    result = invoke("translate", run, "--input", source, "--format", "json")
    assert result.exit_code == 0, result.stderr
    first = json.loads(result.stdout.splitlines()[0])
    assert first["source"] == "Hola."
    assert "\ufeff" not in "".join(first["source_tokens"])
