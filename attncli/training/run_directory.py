"""The directory a training run lives in, and how it is opened again.

    runs/NAME/
        run.json        format marker: {"format": 1, "attncli": "0.1.0"}
        config.yaml     the resolved configuration the run trained with
        checkpoints/    the latest training checkpoints (model, optimizer, position)
        model/          the best model so far, self-contained (see attncli.model.saving)
        metrics.jsonl   one JSON object per evaluation, appended
        events/         TensorBoard event files: train/ and valid/ (see attncli.training.events)
        train.log       what the run printed, with times
        test.json       the kept model's figures on the test split, once training ends
        test.outputs.txt    its output for each distinct test source
        init_from.json  the kept model a fine-tuning run started from (`--init-from`)
        .writer.lock    held by the one process that trains the run (see run_lock)

No TensorFlow here: opening a run to report an error must be instant.
"""

import contextlib
import errno
import json
import os
import shutil
import time
from pathlib import Path

from attncli import __version__
from attncli.errors import AttncliError
from attncli.files import first_link, link_refused, open_to_append, write_json_atomically
from attncli.training.leftovers import clear_leftovers
from attncli.training.run_lock import LOCK_FILE, lock_run, unlock_run

RUN_FORMAT = 1
MARKER = "run.json"


class RunDirectory:
    """Paths and bookkeeping of one training run.

    Args:
        path: the run's directory.
    """

    def __init__(self, path):
        self.path = Path(path)
        # The topmost folder `create` made for the run, or None.
        self.created = None
        # What `lock` restored or removed, for the user to read.
        self.notes = []

    @property
    def marker_path(self):
        return self.path / MARKER

    @property
    def config_path(self):
        return self.path / "config.yaml"

    @property
    def checkpoint_dir(self):
        return self.path / "checkpoints"

    @property
    def model_dir(self):
        return self.path / "model"

    @property
    def events_dir(self):
        return self.path / "events"

    @property
    def metrics_path(self):
        return self.path / "metrics.jsonl"

    @property
    def log_path(self):
        return self.path / "train.log"

    @property
    def init_from_path(self):
        return self.path / "init_from.json"

    @classmethod
    def create(cls, path, overwrite=False):
        """Start a new run at `path`, as its one writer (see `lock`).

        An existing run is never overwritten silently: the user must choose
        `--resume` (continue it) or `--overwrite` (start again). The folders that
        did not exist are created; `discard` removes them again if the run fails
        before it has learnt anything.
        """
        run = cls(path)
        if run.path.exists() and not run.path.is_dir():
            raise AttncliError(
                f"{run.path} is a file, not a run directory; choose another --run-dir"
            )
        if run.path.is_dir() and not run.marker_path.exists() and any(
            child.name != LOCK_FILE for child in run.path.iterdir()
        ):
            raise AttncliError(
                f"{run.path} is a folder that holds other files, not an attncli run; "
                "choose an empty or new --run-dir"
            )
        run.created = _make_directories(run.path)
        taken = run.lock()
        try:
            if run.marker_path.exists() and not overwrite and run.has_progress():
                raise AttncliError(
                    f"{run.path} already holds a run; continue it with --resume, "
                    "or start again with --overwrite"
                )
            if overwrite or not run.has_progress():
                for stale in (run.metrics_path, run.log_path, run.init_from_path):
                    stale.unlink(missing_ok=True)
                shutil.rmtree(run.checkpoint_dir, ignore_errors=True)
                shutil.rmtree(run.model_dir, ignore_errors=True)
                shutil.rmtree(run.events_dir, ignore_errors=True)
            write_json_atomically(
                run.marker_path, {"format": RUN_FORMAT, "attncli": __version__}
            )
        except BaseException:
            if taken:
                run.discard()
            raise
        return run

    def lock(self):
        """Become the one process that writes this run, until `unlock` or until this
        process ends.

        A run that holds a symbolic link anywhere inside is refused first: attncli
        writes, truncates and deletes only what is inside the run directory, and a
        link would take a write (or a delete) outside it.

        Once locked, what a writer killed mid-write left is cleared (an interrupted
        model save is completed first, see `attncli.training.leftovers`); `notes`
        then says what was done.

        Returns:
            True if the lock was taken now, False if this process already held it.

        Raises:
            AttncliError: when the run holds a symbolic link (naming it), another
                process writes the run (naming it), or the folder is not writable.
        """
        link = first_link(self.path)
        if link is not None:
            raise link_refused(link)
        taken = lock_run(self.path)
        if taken:
            try:
                self.notes = clear_leftovers(self)
            except OSError as error:
                unlock_run(self.path)
                raise AttncliError(
                    f"cannot clear what an interrupted write left in {self.path} "
                    f"({error.strerror}: {error.filename}); remove it by hand"
                ) from None
        return taken

    def unlock(self):
        """Stop being the run's writer (a no-op if this process is not), so that another
        process may train it while this one goes on: `attncli train` run from Python
        or a notebook releases its run when it returns."""
        unlock_run(self.path)

    def discard(self):
        """Give up the run; delete the folders `create` made if it holds no progress."""
        try:
            if self.created is not None and not self.has_progress():
                shutil.rmtree(self.path, ignore_errors=True)
                for folder in (self.path, *self.path.parents):
                    if folder == self.created.parent:
                        break
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only when empty: another run may live there
        finally:
            self.unlock()

    @classmethod
    def open(cls, path):
        """Open an existing run, checking that this attncli can read it."""
        run = cls(path)
        if not run.path.exists():
            raise AttncliError(
                f"{run.path}: no such run directory; train one with `attncli train`"
            )
        if not run.marker_path.exists():
            raise AttncliError(
                f"{run.path} is not an attncli run directory (no {MARKER}); "
                "give the directory `attncli train` created"
            )
        try:
            marker = json.loads(run.marker_path.read_text(encoding="utf-8"))
            found = marker["format"]
        except (OSError, ValueError, KeyError, TypeError):
            raise AttncliError(
                f"{run.marker_path} is unreadable or damaged; the run cannot be opened"
            ) from None
        if found != RUN_FORMAT:
            raise AttncliError(
                f"{run.path} was written by attncli {marker.get('attncli', '?')} in run "
                f"format {found}; this attncli {__version__} reads format {RUN_FORMAT}: "
                "use a matching attncli version or train again"
            )
        return run

    def has_progress(self):
        """Whether the run holds anything worth keeping: a checkpoint or a model."""
        return (self.checkpoint_dir / "checkpoint").exists() or self.model_dir.exists()

    def append_metrics(self, record):
        """Append one evaluation record to metrics.jsonl, durably."""
        with open_to_append(self.metrics_path) as stream:
            stream.write(json.dumps(record, sort_keys=True) + "\n")
            stream.flush()
            os.fsync(stream.fileno())

    def read_metrics(self):
        """The records of metrics.jsonl, skipping a last line cut by a crash."""
        if not self.metrics_path.exists():
            return []
        records = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records

    def log(self, message):
        """Append a timestamped line to train.log."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open_to_append(self.log_path) as stream:
            stream.write(f"{stamp} {message}\n")


def _make_directories(path):
    """Create `path` and its missing parents; the topmost one created, or None.

    Raises:
        AttncliError: when a part of the path is a file or the folder is not writable.
    """
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = "a part of it is a file" if error.errno in (errno.ENOTDIR, errno.EEXIST) else (
            error.strerror
        )
        raise AttncliError(
            f"cannot create the run directory {path} ({reason}); choose another --run-dir"
        ) from None
    return missing[-1] if missing else None
