"""`first_line`: what a one-line message quotes of a library's exception."""

import pytest

from attncli.errors import first_line


@pytest.mark.parametrize(("error", "expected"), [
    (OSError("Unable to open file\n  (truncated file: eof = 96)"), "Unable to open file"),
    (ValueError("\n  leading blank lines\nthen more"), "leading blank lines"),
    (RuntimeError(""), "RuntimeError"),
    (KeyError(), "KeyError"),
    (ValueError(" \n \n"), "ValueError"),
])
def test_the_first_line_or_the_type_s_name(error, expected):
    assert first_line(error) == expected
