"""The error a user can fix: the command line turns it into one line and exit code 2."""


class AttncliError(Exception):
    """A mistake in what the user asked for (bad input, a missing file, an unknown name).

    The message says what is wrong and how to fix it, on one line. `attncli` prints it
    to stderr without a traceback and exits with code 2; `attncli --debug` re-raises it.
    """
