"""The one check of a user error: exit code 2, one `Error:` line on stderr, no traceback."""


def one_line_error(result):
    """The `Error:` line of a failed command, from `subprocess.run` or Typer's `CliRunner`."""
    code = result.returncode if hasattr(result, "returncode") else result.exit_code
    assert code == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]
