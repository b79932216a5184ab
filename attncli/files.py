"""Writing files so that a crash never leaves one half written.

Every file attncli writes goes through `write_atomically`: the content is written to a
new temporary file beside the target (a unique name from `tempfile.mkstemp`, so two
writers of one target never share a temporary file), flushed and synced to disk, moved
onto the target with `os.replace`, and the directory is synced so that the rename itself
is on disk. A reader sees the old file or the new one, never a mix; a failure on the way
leaves the old file as it was and no temporary file behind.

`replace_directory` does the same for a directory written as a whole (a model): a new
temporary directory beside it, every file in it synced, then swapped in.
`new_directory` writes one the same way but never replaces anything: its destination
must be absent or empty (an exported SavedModel goes where the user says);
`clear_abandoned` deletes what a writer killed before the rename left beside it.

Nothing here writes through a symbolic link: `write_atomically` replaces the link
itself, and `open_in_run` (the lock, `open_to_append`) refuses one (`os.O_NOFOLLOW`), and
a hard link too. A folder that is a link is
refused by its owner before anything is written (`first_link`, see
`attncli.training.run_directory`).
"""

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from attncli.errors import AttncliError, shown


def write_atomically(path, data):
    """Write `data` (bytes, or str written as UTF-8) to `path`, replacing it in one step.

    The file gets the permissions a newly created file would (0o666 less the umask).

    Raises:
        OSError: when the file cannot be written; `path` is then left as it was.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                             dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            os.fchmod(stream.fileno(), 0o666 & ~_umask())
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync(path.parent)


def open_in_run(path, flags, mode):
    """`os.open(path, flags, mode)` for a file a run writes: never through a link.

    A symbolic link is refused (`os.O_NOFOLLOW`), and so is a hard link (a file with
    another name elsewhere): writing it would write that other file too.

    Raises:
        AttncliError: when `path` is a symbolic or a hard link, naming it.
        OSError: when the file cannot be opened for another reason.
    """
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise link_refused(path) from None
        raise
    names = os.fstat(descriptor).st_nlink
    if names > 1:
        os.close(descriptor)
        raise AttncliError(
            f"{path} is a hard link ({names} names); attncli never writes a file of a run "
            "directory that has a name elsewhere: put a copy of it there, or remove it"
        )
    return descriptor


def open_to_append(path):
    """`open(path, "a", encoding="utf-8")` through `open_in_run`."""
    descriptor = open_in_run(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    return os.fdopen(descriptor, "a", encoding="utf-8")


def first_link(directory):
    """The first symbolic link found inside `directory` (walked without following
    links), or None. `directory` itself may be a link: the user named it."""
    for folder, folders, files in os.walk(directory):
        for name in sorted(folders + files):
            path = Path(folder) / name
            if path.is_symlink():
                return path
    return None


def link_refused(path):
    """The error that refuses to write through the symbolic link `path`."""
    try:
        target = f" (to {shown(os.readlink(path))})"
    except OSError:
        target = ""
    return AttncliError(
        f"{path} is a symbolic link{target}; attncli never writes through a link in a run "
        "directory: put the file or folder itself there, or remove the link"
    )


def write_text_atomically(path, text):
    """`write_atomically` of a string, as UTF-8."""
    write_atomically(path, text.encode("utf-8"))


def write_json_atomically(path, value):
    """`write_atomically` of `value` as indented JSON with sorted keys."""
    write_atomically(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def replace_directory(destination):
    """Context manager: a new directory beside `destination`, put in its place on success.

    Yields the new directory's path. On leaving without an error, every file in it is
    synced, it is renamed `.NAME.ready.*` (whole from then on), an existing `destination`
    is moved aside, the new directory takes its name
    with `os.replace`, and the old one is deleted; on an error the new directory is
    removed and `destination` is untouched.
    """
    destination = Path(destination)
    with _staged(destination) as staging:
        yield staging
        _sync_tree(staging)
        ready = _ready(staging, destination)
        retired = None
        if destination.exists():
            retired = tempfile.mkdtemp(prefix=f".{destination.name}.old.",
                                       dir=destination.parent)
            os.replace(destination, retired)
        os.replace(ready, destination)
        _sync(destination.parent)
    if retired is not None:
        shutil.rmtree(retired)


@contextlib.contextmanager
def new_directory(destination):
    """Context manager: a new directory beside `destination`, renamed to it on success;
    what is at `destination` is never replaced.

    Like `replace_directory`, but `destination` must be absent or an empty directory,
    and the finished directory takes its name with one `os.rename`, which fails (and
    the finished directory is removed) if by then something else is there: a file, or
    a directory that is no longer empty.

    Raises:
        FileExistsError: when `destination` is not absent or an empty directory, on
            entering or at the rename.
    """
    destination = Path(destination)
    if not vacant(destination):
        raise FileExistsError(errno.EEXIST, "exists and is not an empty directory",
                              str(destination))
    with _staged(destination) as staging:
        yield staging
        _sync_tree(staging)
        ready = _ready(staging, destination)
        try:
            os.rename(ready, destination)
        except OSError as error:
            shutil.rmtree(ready, ignore_errors=True)
            raise FileExistsError(
                errno.EEXIST, f"{destination} was filled while it was being written",
                str(destination)
            ) from error
        _sync(destination.parent)


def clear_abandoned(destination):
    """Delete the directories that writers killed while writing `destination` left
    beside it (`.NAME.XXXXXXXX`, `.NAME.ready.XXXXXXXX`); a live writer's is kept.

    A writer holds an `flock` on its directory until it has taken its name (see
    `_staged`): the kernel releases it when the writer dies, so a directory no one
    holds is abandoned.

    Returns:
        The paths deleted.
    """
    destination = Path(destination)
    name = re.compile(rf"\.{re.escape(destination.name)}\.(?:ready\.)?[a-z0-9_]{{8}}")
    if not destination.parent.is_dir():
        return []
    removed = []
    for path in sorted(destination.parent.iterdir()):
        if not name.fullmatch(path.name) or path.is_symlink() or not path.is_dir():
            continue
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # not ours to read, or gone since
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a writer at work
        else:
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
        finally:
            os.close(descriptor)
    return removed


def vacant(path):
    """Whether `path` is absent or an empty directory (a dangling link is not absent)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        return not any(path.iterdir())
    return not (path.exists() or path.is_symlink())


@contextlib.contextmanager
def _staged(destination):
    """A new temporary directory beside `destination`, yielded; removed if the block
    fails. This process holds an `flock` on it for the whole block, renames included
    (the lock follows the directory), so that `clear_abandoned` never takes it."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    descriptor = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        staging.chmod(0o777 & ~_umask())  # mkdtemp's 0o700 would make the directory private
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(descriptor)


def _sync_tree(directory):
    """Sync every file and folder under `directory` to disk."""
    for folder, _, names in os.walk(directory):
        for name in names:
            _sync(Path(folder) / name)
        _sync(folder)


def _ready(staging, destination):
    """Renames a finished `staging` directory `.NAME.ready.*` and returns its new path.

    Renamed once whole, so that what a killed writer left tells a complete new
    directory (`.NAME.ready.*`) from a half-written one (`.NAME.*`).
    """
    ready = staging.with_name(staging.name.replace(f".{destination.name}.",
                                                  f".{destination.name}.ready.", 1))
    os.replace(staging, ready)
    _sync(destination.parent)
    return ready


def _sync(path):
    """Flush what the system holds of a file or directory (its entries) to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
