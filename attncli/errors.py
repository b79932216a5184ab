"""Errors a user can cause and fix: the CLI prints the message as one line, exit code 2."""


class AttncliError(Exception):
    """Base of every user-facing attncli error; its message is the one line the user reads."""


class DataError(AttncliError):
    """A corpus, vocabulary or data setting cannot be used (strict mode, missing file, ...)."""


def first_line(error):
    """The first line of what `error` says, or its type's name when it says nothing: what
    a one-line message quotes of an exception raised by a library."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def shown(value, limit=80):
    """`repr(value)` as an error message echoes it: at most `limit` characters.

    A value can be huge (a long string, a list that YAML aliases repeat); its message
    must stay one readable line, and building it must stay cheap: `reprlib` stops
    at a few items of each container and level.
    """
    import reprlib

    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = limit
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = 8
    shortener.maxlevel = 3
    return clipped(shortener.repr(value), limit)


def clipped(text, limit=80):
    """`text` cut to `limit` characters, the last one an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
