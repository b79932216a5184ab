"""What a training that failed on its machine, not on its configuration, tells the user.

A full disk, a folder that became read-only, or memory that ran out stop training from
deep inside TensorFlow, h5py or the filesystem; `explain` turns each into one line
that says what happened, what of the run is kept (every checkpoint is complete
before TensorFlow's index points at it, the best model is replaced whole), and the
command that continues it.
"""

import errno

from attncli.errors import AttncliError

_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
_FULL_TEXT = ("No space left on device", "Disk quota exceeded")
_NOT_WRITABLE_TEXT = ("Read-only file system", "Permission denied")


def explain(error, run, resume_command):
    """The `AttncliError` to report for `error`, or None if it is not a failure of the machine.

    Args:
        error: the exception training raised.
        run: the `RunDirectory` being trained.
        resume_command: the command line that continues the run.
    """
    text = str(error)
    number = getattr(error, "errno", None)
    kept, resumable = _kept(run)
    then = f"continue with: {resume_command}" if resumable else "start the run again"
    if number in _FULL or any(part in text for part in _FULL_TEXT):
        return AttncliError(
            f"no space left on the device of {run.path}; {kept}: free some space, then {then}"
        )
    if number in _NOT_WRITABLE or any(part in text for part in _NOT_WRITABLE_TEXT):
        where = getattr(error, "filename", None) or run.path
        return AttncliError(
            f"cannot write {where} ({_reason(error, _NOT_WRITABLE_TEXT)}); {kept}: make "
            f"it writable, then {then}"
        )
    if type(error).__name__ == "ResourceExhaustedError":
        return AttncliError(
            f"out of memory while training; {kept}: make data.batch_size (or "
            "data.tokens_per_batch), model.units or model.embedding_dim smaller and train "
            "again with --overwrite"
        )
    return None


def _reason(error, known):
    if getattr(error, "strerror", None):
        return error.strerror
    return next((part for part in known if part in str(error)), type(error).__name__)


def _kept(run):
    """What of the run survives (its newest complete checkpoint and best model), and
    whether `--resume` can go on from it."""
    newest = _newest_checkpoint(run)
    model = (run.model_dir / "config.json").is_file()
    if newest is None:
        kept = "; the best model is kept" if model else ""
        return f"no checkpoint was complete yet{kept}", False
    if model:
        return f"the last complete checkpoint, {newest}, and the best model are kept", True
    return f"the last complete checkpoint, {newest}, is kept", True


def _newest_checkpoint(run):
    """`"ckpt-7 (epoch 2, batch 0)"`: the checkpoint TensorFlow's index points at, or None."""
    import tensorflow as tf

    try:
        path = tf.train.latest_checkpoint(str(run.checkpoint_dir))
    except Exception:  # noqa: BLE001  A damaged index fails in many ways.
        return None
    if path is None:
        return None
    name = path.rsplit("/", 1)[-1]
    try:
        epoch = int(tf.train.load_variable(path, "epoch/.ATTRIBUTES/VARIABLE_VALUE"))
        batch = int(tf.train.load_variable(path, "batch/.ATTRIBUTES/VARIABLE_VALUE"))
    except Exception:  # noqa: BLE001
        return name
    return f"{name} (epoch {epoch + 1}, batch {batch})"
