"""Lines of a file or of stdin as they arrive, handed out in batches.

`attncli translate` answers each line as soon as it can: a thread reads the input
line by line while the main thread translates, and `LineReader.batches` hands out
what has arrived. A batch closes when it holds `size` lines or `wait` seconds after
its first line arrived, whichever comes first, so lines typed at a terminal (or sent
slowly down a pipe) are answered one by one, and a file or a fast pipe is translated
in full batches.
"""

import queue
import threading
import time
from pathlib import Path

from attncli.cli.runs import split_lines
from attncli.errors import AttncliError

_END = object()


def decode_utf8(data, where, offset=0):
    """`data` decoded as UTF-8, or an `AttncliError` naming `where` and the bad byte's
    position (`offset` is that of `data`'s first byte in the input)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise AttncliError(
            f"{where}: not UTF-8 text (byte {offset + error.start}); convert it to UTF-8"
        ) from None


def read_lines(path, option):
    """The lines of a UTF-8 file given as `option` (`--input`, `--gold`), as
    `split_lines` cuts them; a missing or unreadable file is one line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AttncliError(f"{option} {path}: no such file") from None
    except OSError as error:
        raise AttncliError(f"{option} {path}: cannot read it ({error.strerror})") from None
    return split_lines(decode_utf8(data, f"{option} {path}"))


def decode_line(raw, where, offset):
    """One line of bytes as text: without its "\\n" and a "\\r" before it, UTF-8 checked;
    the first line also without a byte order mark.

    Args:
        raw: bytes of one line, its "\\n" included if it has one.
        where: how the message names the input (`stdin`, `--input FILE`).
        offset: the position of the line's first byte in the input.
    """
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    text = decode_utf8(line, where, offset)
    # The byte order mark some editors put first is not part of the first sentence.
    return text.removeprefix("\ufeff") if offset == 0 else text


class LineReader:
    """Reads the lines of a binary stream in a background thread, as they arrive.

    Lines are split at "\\n" only (as `str.split("\\n")`, not `str.splitlines`), so the
    output keeps one line per input line; a last line without "\\n" is a line.

    Args:
        stream: a binary stream (`sys.stdin.buffer`, a file opened with "rb").
        where: how error messages name the stream.
        capacity: lines read ahead at most; the thread waits while that many are
            waiting to be translated. Defaults to 4096.
    """

    def __init__(self, stream, where, capacity=4096):
        self._lines = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(
            target=self._read, args=(stream, where), name="attncli-line-reader", daemon=True
        )
        self._thread.start()

    def _read(self, stream, where):
        offset = 0
        try:
            for raw in iter(stream.readline, b""):
                self._lines.put(decode_line(raw, where, offset))
                offset += len(raw)
        except AttncliError as error:
            self._lines.put(error)
        except OSError as error:
            self._lines.put(AttncliError(f"{where}: cannot read it ({error.strerror})"))
        self._lines.put(_END)

    def batches(self, size, wait):
        """Lists of 1 to `size` lines, in input order, as the lines arrive.

        Waits for a batch's first line as long as it takes, then at most `wait`
        seconds (0: not at all) for more. Raises the reader's `AttncliError` (a line
        that is not UTF-8, a read error) after the batch of the lines before it.
        """
        while True:
            item = self._lines.get()
            if item is _END:
                return
            batch, deadline = [], time.monotonic() + wait
            while not isinstance(item, AttncliError):
                batch.append(item)
                if len(batch) == size:
                    break
                try:
                    item = self._lines.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
                if item is _END:
                    if batch:
                        yield batch
                    return
            if batch:
                yield batch
            if isinstance(item, AttncliError):
                raise item


def list_batches(lines, size):
    """Lists of at most `size` of `lines`, in order (the input given as arguments)."""
    for start in range(0, len(lines), size):
        yield lines[start : start + size]
