"""What a writer killed mid-write leaves in a run directory, and how it is cleared.

Every file of a run is written beside its destination and then moved onto it, so a
process killed at any moment leaves the run readable, plus the unfinished copy:

    checkpoints/ckpt-N_temp/       TensorFlow's checkpoint being written
    checkpoints/checkpoint.tmp...  TensorFlow's index being rewritten
    .model.XXXXXXXX/               the best model being written (attncli.files)
    .model.ready.XXXXXXXX/         the new best model, written whole, to be moved in
    .model.old.XXXXXXXX/           the previous best model, moved aside to be deleted
    .NAME.tmp                      a file of the run being replaced (attncli.files)

A model save killed after its copy was renamed `.model.ready.XXXXXXXX` holds the newer
best model there: beside the previous `model/` (killed before the old one was moved
aside) or alone with `.model.old.XXXXXXXX` (killed between the two moves).
`clear_leftovers` moves the ready copy in as `model/` (else puts the old one back)
before deleting anything, so the best model is never lost nor set back; a
`.model.XXXXXXXX` is never put back, even with every file present, since it may have
been killed halfway through a file. It runs under the run's lock (see `run_lock`): no
other process is writing these files.
"""

import os
import shutil
import tempfile
from pathlib import Path

from attncli.model.saving import missing_model_file


def clear_leftovers(run):
    """Restore an interrupted model save and delete the unfinished copies of `run`.

    Args:
        run: a `RunDirectory` whose lock this process holds.

    Returns:
        The lines to tell the user: what was restored, then what was removed.
    """
    notes = []
    model_copies = sorted(
        (path for path in run.path.glob(f".{run.model_dir.name}.*")
         if path.is_dir() and not path.is_symlink()),
        key=lambda path: (_rank(run, path), path.stat().st_mtime),
    )
    complete = [path for path in model_copies
                if _rank(run, path) and _is_complete_model(path)]
    if run.model_dir.exists():
        # Only a newer model (ready, not an old one) may take the place of `model/`.
        complete = [path for path in complete if _rank(run, path) == 2]
    if complete:
        newest = complete[-1]  # a new model ready to be moved in, else the old one
        if run.model_dir.exists():
            # Retired as attncli.files.replace_directory retires: a fresh `.model.old.*`.
            replaced = Path(tempfile.mkdtemp(prefix=f".{run.model_dir.name}.old.", dir=run.path))
            os.replace(run.model_dir, replaced)
            model_copies.append(replaced)
        os.replace(newest, run.model_dir)
        model_copies.remove(newest)
        notes.append(
            f"restored the best model from {newest.name} (its save was interrupted)"
        )
    removed = list(model_copies)
    if run.checkpoint_dir.is_dir():
        removed += sorted(run.checkpoint_dir.glob("ckpt-*_temp*"))
        removed += sorted(run.checkpoint_dir.glob("checkpoint.tmp*"))
    removed += sorted(path for path in run.path.glob(".*.tmp") if path.is_file())
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    if removed:
        notes.append(
            "removed what an interrupted write left: "
            + ", ".join(str(path.relative_to(run.path)) for path in removed)
        )
    return notes


def _rank(run, path):
    """2 for a new model written whole, 1 for the previous one, 0 for a partial copy."""
    name = run.model_dir.name
    return (2 if path.name.startswith(f".{name}.ready.")
            else 1 if path.name.startswith(f".{name}.old.") else 0)


def _is_complete_model(path):
    return missing_model_file(path) is None
