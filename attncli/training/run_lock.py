"""One writer per run directory: a lock the operating system releases with its holder.

`attncli train` (new, `--resume` or `--overwrite`) locks `RUN/.writer.lock` with
`fcntl.flock` before it writes or deletes anything in RUN, and holds it until the
training returns (called from Python, the process may go on) or the process ends. The
kernel drops the lock with the process however it ends (`kill -9` included), so a lock
is never stale; the pid, host and start time written into the
file are only there to tell a second writer who holds it. Readers (`translate`,
`inspect-weights`) take no lock: every file they read is replaced atomically.

Each worker of a multi-worker run locks its own directory (`RUN.worker-N`); the chief
locks RUN. On NFS, Linux maps `flock` onto the server's byte-range locks, so two
machines are kept apart as well.
"""

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from attncli.errors import AttncliError
from attncli.files import open_in_run

LOCK_FILE = ".writer.lock"

# The runs this process writes: resolved directory -> the open lock file's descriptor.
# flock locks belong to an open file, so a second open by this same process would be
# refused; one process may open its run as often as it likes.
_HELD = {}


class RunInUse(AttncliError):
    """Another process writes the run directory."""


def lock_run(directory):
    """Make this process the one writer of `directory` (an existing folder).

    Returns:
        True if the lock was taken now, False if this process already held it.

    Raises:
        RunInUse: naming the process (pid, host, start time) that holds the lock.
        AttncliError: when the lock file cannot be created (read-only folder, ...).
    """
    directory = Path(directory).resolve()
    if directory in _HELD:
        return False
    path = directory / LOCK_FILE
    try:
        # Never through a link: it would truncate and overwrite the file it points at.
        descriptor = open_in_run(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise AttncliError(
            f"cannot write in {directory} ({error.strerror}); choose a writable --run-dir"
        ) from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise RunInUse(
            f"{directory} is being written by another attncli train ({holder(path)}); "
            "wait for it to finish or stop it, or choose another --run-dir"
        ) from None
    stamp = {"pid": os.getpid(), "host": socket.gethostname(),
             "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    os.ftruncate(descriptor, 0)
    os.write(descriptor, (json.dumps(stamp) + "\n").encode())
    _HELD[directory] = descriptor
    return True


def unlock_run(directory):
    """Give up the lock of `directory` if this process holds it."""
    descriptor = _HELD.pop(Path(directory).resolve(), None)
    if descriptor is not None:
        os.close(descriptor)  # closing the last descriptor of the file releases the lock


def holder(path):
    """Who holds the lock file `path`, as its holder wrote it: "pid 12 on host, since ..."."""
    try:
        stamp = json.loads(Path(path).read_text(encoding="utf-8"))
        return f"pid {stamp['pid']} on {stamp['host']}, since {stamp['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        # Taken an instant ago: its holder has not written its name yet.
        return "a process that is just starting"
