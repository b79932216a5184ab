"""What the C++ libraries under the tokenizer (RE2, SentencePiece) log on stderr, dropped.

They log besides raising or returning (RE2 a complaint about a pattern it refuses,
SentencePiece its training progress and a note on a model without a normalisation
rule); attncli's own one-line error says what the user can act on.
"""

import contextlib
import os
import sys


@contextlib.contextmanager
def quiet_stderr():
    """Within it, what the C++ libraries write on stderr (fd 2) is dropped."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
