"""Writing files so that a crash never leaves one half written."""

import os
from pathlib import Path


def write_text_atomically(path, text):
    """Write `text` to `path`: a reader sees the old file or the new one, never a mix.

    The text goes to a hidden temporary file beside `path`, is flushed to disk, and
    then replaces `path` in one `os.replace`.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)
