"""The checkpoints a run holds on disk, read from the files themselves.

TensorFlow's index (`checkpoints/checkpoint`, a text proto naming the newest
checkpoint and those kept) is one small file; when it is damaged or names
checkpoints that are gone, `tf.train.CheckpointManager` either fails to start or sees
no checkpoint at all, and a resumed run would silently start over beside intact
checkpoints. The checkpoints themselves are the `ckpt-N.index` / `ckpt-N.data-*`
files: `checkpoint_paths` finds them, and `repair_index` rewrites an index that
disagrees with them (keeping the damaged one as `checkpoint.damaged`).

The index is a plain text file anyone can write, and the CheckpointManager deletes the
older checkpoints it lists: an index that names anything but a `ckpt-N` in its own
directory (`/else/where/precious`, `../ckpt-3`) is damaged as well, so that no path
from it ever reaches TensorFlow.
"""

import os
import re

from attncli.errors import first_line, shown
from attncli.files import write_text_atomically

_INDEX_FILE = re.compile(r"ckpt-(\d+)\.index")
_CHECKPOINT = re.compile(r"ckpt-\d+")


def checkpoint_paths(directory):
    """The checkpoints in `directory` that have an index file, newest first.

    Returns:
        A list of path prefixes as `tf.train.Checkpoint.restore` takes them
        (`".../ckpt-15"`), sorted by their save number, largest first.
    """
    if not os.path.isdir(directory):
        return []
    numbers = []
    for name in os.listdir(directory):
        match = _INDEX_FILE.fullmatch(name)
        if match:
            numbers.append(int(match.group(1)))
    return [os.path.join(str(directory), f"ckpt-{number}") for number in sorted(numbers)[::-1]]


def repair_index(directory):
    """Make TensorFlow's index of `directory` name the checkpoints that are there.

    An index that cannot be read, names a path outside `directory` (or not a
    `ckpt-N`), or names a checkpoint without its index file, is renamed
    `checkpoint.damaged` (`.damaged.2`, ... after earlier repairs) and written again
    from `checkpoint_paths`, the newest as the latest.

    Returns:
        A line saying what was repaired, or None when the index was sound (or there
        is neither an index nor a checkpoint).
    """
    import tensorflow as tf

    index = os.path.join(str(directory), "checkpoint")
    found = checkpoint_paths(directory)
    if not os.path.exists(index):
        problem = "is missing" if found else None
    else:
        problem = _index_problem(tf, directory)
    if problem is None:
        return None
    kept = ""
    if os.path.exists(index):
        damaged, number = index + ".damaged", 1
        while os.path.exists(damaged):  # an earlier repair's evidence stays too
            number += 1
            damaged = f"{index}.damaged.{number}"
        os.replace(index, damaged)
        kept = f" (kept as {os.path.basename(damaged)})"
    names = [os.path.basename(path) for path in found]
    if names:
        # TensorFlow's CheckpointState text proto, paths relative to the directory.
        write_text_atomically(index, f'model_checkpoint_path: "{names[0]}"\n' + "".join(
            f'all_model_checkpoint_paths: "{name}"\n' for name in names[::-1]
        ))
    return (
        f"the checkpoint index {index} {problem}{kept}; rebuilt it from the checkpoints "
        f"found: {', '.join(names) if names else 'none'}"
    )


def _index_problem(tf, directory):
    """Why the index of `directory` cannot be trusted, or None."""
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except Exception as error:  # noqa: BLE001  A damaged text proto fails in many ways.
        return f"cannot be read ({first_line(error)})"
    if state is None or not state.model_checkpoint_path:
        return "names no checkpoint" if checkpoint_paths(directory) else None
    listed = [state.model_checkpoint_path, *state.all_model_checkpoint_paths]
    # TensorFlow has joined a relative path to `directory` and kept an absolute one.
    inside = os.path.abspath(str(directory))
    for path in listed:
        full = os.path.abspath(path)
        if os.path.dirname(full) != inside or not _CHECKPOINT.fullmatch(os.path.basename(full)):
            prefix = os.path.join(str(directory), "")
            written = path[len(prefix):] if path.startswith(prefix) else path  # as in the file
            return f"names {shown(written)}, which is not a checkpoint of {directory}"
    missing = [path for path in listed if not os.path.exists(f"{path}.index")]
    if missing:
        return f"names {os.path.basename(missing[0])}, which is not there"
    return None
