"""A directory built once per test session and shared by every pytest-xdist worker.

A session-scoped fixture is still built once per worker: `built_once` makes the first
worker that asks build it, under a file lock, while the others wait for it and then read
the same directory. Whoever uses one reads it only (copy it to change it).
"""

import fcntl
import os
import shutil
from contextlib import contextmanager


def session_directory(tmp_path_factory):
    """The session's base temporary directory, one for all workers: under xdist each
    worker's base is `BASE/popen-gwN`."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def locked(path):
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_once(tmp_path_factory, name, build):
    """`SESSION/built-once/NAME`, made by `build(directory)` the first time any worker
    asks. A build that fails leaves no directory, and the workers that ask next fail at
    once with its error rather than build again."""
    root = session_directory(tmp_path_factory) / "built-once"
    root.mkdir(exist_ok=True)
    directory, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with locked(root / f"{name}.lock"):
        if failed.exists():
            raise RuntimeError(f"building {name} failed in another worker:\n"
                               + failed.read_text())
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            try:
                build(directory)
            except BaseException as error:
                shutil.rmtree(directory, ignore_errors=True)
                failed.write_text(f"{type(error).__name__}: {error}"[-5000:])
                raise
            done.touch()
    return directory
