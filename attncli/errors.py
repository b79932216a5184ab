"""Errors a user can cause and fix: the CLI prints the message as one line, exit code 2."""


class AttncliError(Exception):
    """Base of every user-facing attncli error; its message is the one line the user reads."""


class DataError(AttncliError):
    """A corpus, vocabulary or data setting cannot be used (strict mode, missing file, ...)."""
