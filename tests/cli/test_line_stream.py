"""LineReader: the lines of a stream, split at "\\n" only, handed out in batches as they arrive."""

import io
import os

import pytest

from attncli.cli.line_stream import LineReader, decode_line
from attncli.errors import AttncliError


def test_lines_split_at_newline_only_keep_empty_lines_and_drop_carriage_returns():
    data = "a\r\n\nb\u2028c\x85\r\nlast".encode("utf-8")
    batches = list(LineReader(io.BytesIO(data), "stdin").batches(size=10, wait=1.0))
    assert batches == [["a", "", "b\u2028c\x85", "last"]]
    assert batches[0] == data.decode("utf-8").replace("\r\n", "\n").split("\n")


def test_batches_hold_at_most_size_lines_in_order():
    data = "".join(f"{i}\n" for i in range(10)).encode()
    batches = list(LineReader(io.BytesIO(data), "stdin").batches(size=4, wait=1.0))
    assert batches == [["0", "1", "2", "3"], ["4", "5", "6", "7"], ["8", "9"]]


def test_a_line_is_handed_out_while_the_input_is_still_open():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stream:
        batches = LineReader(stream, "stdin").batches(size=64, wait=0.0)
        os.write(write_end, b"first\n")
        assert next(batches) == ["first"]
        os.write(write_end, b"second\nthird")
        os.close(write_end)
        assert [line for batch in batches for line in batch] == ["second", "third"]


def test_a_line_that_is_not_utf8_ends_the_input_after_the_lines_before_it():
    batches = LineReader(io.BytesIO(b"ok\ncaf\xe9\nnever\n"), "--input x.txt").batches(8, 1.0)
    assert next(batches) == ["ok"]
    with pytest.raises(AttncliError, match=r"--input x.txt: not UTF-8 text \(byte 6\)"):
        next(batches)


def test_decode_line_counts_bytes_from_the_start_of_the_input():
    assert decode_line(b"ol\xc3\xa1\r\n", "stdin", 0) == "olá"
    with pytest.raises(AttncliError, match=r"byte 12"):
        decode_line(b"ab\xff\n", "stdin", 10)
