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
