"""`--help` shows what a user types (FILE, N, RUN), never a Python type (`<bool>`, `{run}`)."""

import re

import pytest
import typer
from typer.testing import CliRunner

from attncli.cli.app import app

COMMANDS = sorted(typer.main.get_command(app).commands)


@pytest.mark.parametrize("command", [[]] + [[name] for name in COMMANDS])
def test_help_shows_no_python_types(command):
    result = CliRunner().invoke(app, [*command, "--help"], prog_name="attncli",
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert re.findall(r"<[A-Za-z_\[\], |]+>", result.output) == []
    assert re.findall(r"\{[a-z_]+\}", result.output) == []


def test_help_names_the_values():
    result = CliRunner().invoke(app, ["translate", "--help"], prog_name="attncli",
                                env={"COLUMNS": "200"})
    usage = result.output.split("Usage: ")[1].splitlines()[0]
    assert usage.split() == ["attncli", "translate", "[OPTIONS]", "RUN", "[TEXT...]"]
    assert re.search(r"--input\s+FILE\s", result.output)
    assert re.search(r"--beam\s+N\s", result.output)
    # A flag takes no value, so none is shown.
    assert re.search(r"--alignments\s+Add", result.output)
