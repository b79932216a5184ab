"""Resuming a run: the newest checkpoint that can be read (and, distributed, that every
worker holds) restored, and the best metric raised to the kept model's."""

import math

from attncli.errors import AttncliError, first_line
from attncli.model.saving import saved_metadata
from attncli.training.checkpoint_files import checkpoint_paths
from attncli.training.stop_metric import StopMetric


def restore_checkpoint(checkpoint, workers, run, progress, position, config):
    """Restore the newest checkpoint that can be read, falling back to older ones.

    The checkpoints are those on disk (`checkpoint_paths`), whatever TensorFlow's
    index says; a run with a best model but no checkpoint is refused rather than
    started over. Workers restore their own copies: the newest that every worker holds, and check
    they restored the same one. Every worker takes part in the same agreements whatever
    it finds, so that a worker with nothing to restore stops with the others instead of
    leaving them waiting.

    Returns:
        Whether a checkpoint was restored (False: the run starts from the beginning).
    """
    candidates = checkpoint_paths(run.checkpoint_dir)
    newest = max(map(checkpoint_number, candidates), default=0)
    newest = workers.common_checkpoint(newest)
    candidates = [path for path in candidates if checkpoint_number(path) <= newest]
    restored, problems = None, []
    for path in candidates:
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
        except Exception as error:  # noqa: BLE001  A damaged file fails in many ways.
            problems.append(f"{path}: {first_line(error)}")
            continue
        restored = path
        break
    number = checkpoint_number(restored) if restored else (-1 if problems else 0)
    workers.check_same_checkpoint(number, restored)
    if restored is None and problems:
        raise AttncliError(
            f"no checkpoint of {run.path} can be restored ({problems[0]}); "
            "start the run again with --overwrite"
        )
    if restored is None:
        if workers.agree(run.model_dir.is_dir()):
            raise AttncliError(
                f"{run.path} has a best model but no checkpoint to continue from (none in "
                f"{run.checkpoint_dir}); keep the model as it is, or start the run again "
                "with --overwrite, which replaces it"
            )
        progress.message("no checkpoint yet: starting this run from the beginning")
        return False
    if problems:
        progress.message(f"skipped damaged checkpoint(s): {'; '.join(problems)}")
    epoch, epochs = int(position.epoch.numpy()), config.training.epochs
    if epoch >= epochs:
        progress.message(
            f"resuming from {restored}: the run is finished ({epoch} of {epochs} epochs "
            "trained), nothing to train (give more with --set training.epochs=N)"
        )
        return True
    minutes, trained = config.training.max_minutes, float(position.seconds.numpy()) / 60
    if minutes is not None and trained >= minutes:
        progress.message(
            f"resuming from {restored}: the time budget of {minutes:g} minutes is spent "
            f"(a total across resumes), nothing to train (give more with --set "
            f"training.max_minutes=M, M above {minutes:g})"
        )
        return True
    progress.message(f"resuming from {restored}: epoch {epoch + 1}, "
                     f"batch {int(position.batch.numpy())}")
    return True


def raise_to_kept_model(position, workers, run, config, held_out_links=False):
    """Make the best metric at least the kept model's, so that no worse model replaces it.

    A run resumed from an older checkpoint (the newest damaged) restores the best
    metric of that time, which may be below the model kept since. The kept model's
    figure is read from its metadata (`valid_loss` for `stop_metric: loss`);
    `held_out_links` as for `StopMetric.of`.
    """
    metric = StopMetric.of(config, held_out_links)
    value = saved_metadata(run.model_dir).get(metric.figure)
    kept = -math.inf
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        kept = metric.maximised({metric.figure: float(value)})
    kept = workers.agree(kept)  # only the chief holds the model
    if kept > float(position.best_metric.numpy()):
        position.best_metric.assign(kept)


def checkpoint_number(path):
    """The save count that ends a checkpoint's name (`.../ckpt-12` -> 12)."""
    return int(str(path).rsplit("-", 1)[1])
