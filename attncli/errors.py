"""The one exception type that reaches the user as a one-line message."""


class AttncliError(Exception):
    """A user error: its message says what is wrong and how to fix it.

    The command line prints the message on one line and exits with code 2;
    the traceback is shown only with `--debug`.
    """
