"""The training loop: compiled steps, evaluation, checkpoints and resumption.

A run never loses work. Checkpoints (model, optimizer state, and the data position:
epoch and batch) are written every `training.checkpoint_every` steps (a step is an
update of the weights: `training.accumulate_steps` batches), at the end of
each epoch and when the run is interrupted (Ctrl-C or SIGTERM); each is complete
before TensorFlow's checkpoint index points at it, so a process killed at any
moment leaves a run that `--resume` continues. The best model by the validation
metric (`training.stop_metric`) is kept in `RUN/model`, replaced atomically; the
TensorBoard events of `attncli.training.events` follow the steps and evaluations.

The parts it trains with (tokenizers, model, optimizer, checkpoints, encoded pairs)
come from `attncli.training.builder`; validation and the test scoring are
`attncli.training.validation`'s; when it stops, `attncli.training.stopping`'s.

Under a `tf.distribute` strategy (`training.distribute`), each global batch is split
across the replicas and every decision that ends or shapes the loop is agreed by all
workers (`attncli.training.distribution.Workers`): a signal or the time budget stops
everyone after the same step (the train step carries each worker's stop request and
returns the largest), the time budget is agreed again between epochs, and the
validation metric that picks the best model and counts patience is the largest any
worker computed. Only the chief writes the run's records and model. All workers
checkpoint at the same steps, the chief into the run, the others into their own
directory; on resume every worker restores the newest checkpoint that all of them hold.
"""

import math
import signal
import time

import tensorflow as tf

from attncli.data.pipeline import epoch_batches
from attncli.errors import AttncliError
from attncli.model.saving import save_model
from attncli.training.builder import build_training
from attncli.training.distributed_step import make_distributed_train_step
from attncli.training.events import RunEvents
from attncli.training.steps import make_train_step
from attncli.training.stop_metric import StopMetric
from attncli.training.stopping import SignalFlag, Stopping
from attncli.training.validation import Validator, score_test_split


class Interrupted(Exception):
    """Training stopped by a signal after its checkpoint was written."""

    def __init__(self, signal_number, epoch, step):
        name = signal.Signals(signal_number).name
        super().__init__(f"{name} at epoch {epoch}, step {step}")
        self.signal_number = signal_number


class _Throughput:
    """Target tokens per second over a window restarted every five seconds or so."""

    def __init__(self):
        self.start, self.tokens = time.monotonic(), 0

    def add(self, tokens, now):
        """Count `tokens` trained by `now` (a `time.monotonic()`); returns the rate."""
        self.tokens += tokens
        rate = self.tokens / max(now - self.start, 1e-9)
        if now - self.start > 5.0:
            self.start, self.tokens = now, 0
        return rate


class Trainer:
    """Trains the model of a run from its `TrainingParts`.

    Args:
        parts: the `TrainingParts` of `build_training`.
        progress: an object with `start_epoch(epoch, total, steps)`, `step(loss,
            tokens_per_second)` (called for every trained batch, by `_report_step`),
            `end_epoch(record)` and `message(text)`; the CLI passes
            `attncli.cli.progress.TrainingDisplay`, tests a recorder.
        draw_attention: how the TensorBoard events draw an attention picture (see
            `RunEvents`); None writes none. Defaults to None.
    """

    def __init__(self, parts, progress, draw_attention=None):
        self.parts = parts
        self.progress = progress
        self.config = parts.config
        self.run = parts.run
        self.workers = parts.workers
        self.model = parts.model
        self.optimizer = parts.optimizer
        self.position = parts.position
        self.checkpoints = parts.checkpoints
        self.stats = parts.stats
        self.validator = Validator(parts)
        self.stop_metric = StopMetric.of(self.config, held_out_links=self.validator.has_links)
        if self.workers.distributed:
            # Its signature is that of the distributed batches, known once they exist.
            self.train_step = make_distributed_train_step(
                self.model, self.optimizer, self.workers.strategy,
                self._batches(0).element_spec, self.config.training,
            )
        else:
            self.train_step = make_train_step(
                self.model, self.optimizer, self.config.training, parts.gradient_sums
            )
        self.events = RunEvents(parts, progress, draw_attention)

    @classmethod
    def from_config(cls, config, run, progress, data_dir=None, resume=False, strategy=None,
                    is_chief=True, draw_attention=None):
        """A `Trainer` of the parts `build_training` makes with these arguments."""
        parts = build_training(config, run, progress, data_dir=data_dir, resume=resume,
                               strategy=strategy, is_chief=is_chief)
        return cls(parts, progress, draw_attention)

    def _batches(self, epoch, skip=0):
        data = self.config.data
        dataset = epoch_batches(
            self.parts.encoded, epoch, batch_size=data.batch_size,
            tokens_per_batch=data.tokens_per_batch, bucketing=data.bucketing,
            shuffle=True, seed=self.config.training.seed, stats=self.stats,
        )
        dataset = dataset.skip(skip) if skip else dataset
        if not self.workers.distributed:
            return dataset
        # Every worker builds the same batches; each takes its replicas' rows of each
        # (DATA sharding: the pipeline reads no files to share out).
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return self.workers.strategy.experimental_distribute_dataset(dataset.with_options(options))

    def fit(self):
        """Train until the epochs, the time budget or the patience run out.

        Returns:
            The summary dict: epochs run, best metric, the last evaluation record.

        Raises:
            Interrupted: after writing a checkpoint, when a signal arrived.
        """
        started = time.monotonic() - float(self.position.seconds.numpy())
        last_record = None
        with SignalFlag() as flag, self.events:
            stopping = Stopping(self.config.training, self.position, self.workers,
                                self.stop_metric, flag, started)
            while stopping.reason() is None:
                last_record = self._train_epoch(stopping)
        self.progress.message(f"finished: {stopping.reason()}")
        return self._summary(last_record)

    def _train_epoch(self, stopping):
        """Train the current epoch (from the batch the position holds), evaluate it and
        checkpoint it; returns its last evaluation record."""
        position = self.position
        epoch = int(position.epoch.numpy())
        skip = int(position.batch.numpy())
        if skip == 0:
            position.epoch_loss_sum.assign(0.0)
            position.epoch_tokens.assign(0)
            if position.epoch_links is not None:
                position.epoch_alignment_sum.assign(0.0)
                position.epoch_links.assign(0)
        self.stats.reset()
        self.progress.start_epoch(epoch + 1, self.config.training.epochs, skip)
        finished_epoch, record = self._train_batches(epoch, skip, stopping)
        # The trained batches are safe before the (possibly long) evaluation.
        self.checkpoints.save()
        if record is None:
            record = self._evaluate(epoch + 1, self._train_loss(), finished_epoch)
        if finished_epoch:
            position.epoch.assign_add(1)
            position.batch.assign(0)
        position.seconds.assign(stopping.elapsed())
        self.checkpoints.save()
        received = int(self.workers.agree(stopping.signals.received or 0))
        if received:
            raise Interrupted(received, epoch + 1, int(position.batch.numpy()))
        return record

    def _train_batches(self, epoch, skip, stopping):
        """Train the batches of `epoch` from `skip` on, evaluating every
        `training.eval_every` steps and checkpointing every `training.checkpoint_every`.

        Returns:
            `(finished_epoch, record)`: whether every batch was trained, and the record
            of the evaluation that spent the patience mid-epoch (the run stops at that
            step, evaluated already), else None.
        """
        training = self.config.training
        throughput = _Throughput()
        evaluation_due = False
        # Checkpoints and evaluations count updates: a batch whose gradient is only
        # added up (`training.accumulate_steps`), or skipped by the loss scale, makes none.
        step = int(self.optimizer.iterations.numpy())
        for inputs, target_out in self._batches(epoch, skip):
            if evaluation_due:
                # The epoch's last batch is evaluated by `_train_epoch`, as the epoch's end.
                record = self._evaluate(epoch + 1, self._train_loss(), False)
                if stopping.patience_spent():
                    return False, record
            stop = self._train_step(epoch, inputs, target_out, stopping, throughput)
            if stop > 1:
                self.checkpoints.save()
                raise Interrupted(stop, epoch + 1, int(self.position.batch.numpy()))
            step, previous = int(self.optimizer.iterations.numpy()), step
            updated = step != previous
            if updated and step % training.checkpoint_every == 0:
                self.checkpoints.save()
            if stop:
                return False, None
            evaluation_due = (
                updated and bool(training.eval_every) and step % training.eval_every == 0
            )
        return True, None

    def _train_step(self, epoch, inputs, target_out, stopping, throughput):
        """One train step on a batch, counted into the epoch's loss and reported.

        Returns:
            The stop request after it (agreed by every worker when distributed): the
            number of a signal received, 1 when the time budget is spent, else 0.
        """
        position = self.position
        if self.workers.distributed:
            result = self.train_step(inputs, target_out, stopping.request())
        else:
            result = self.train_step(inputs, target_out)
        loss = float(result["loss"])
        count = int(result["tokens"])
        # Guided alignment's loss, a mean over its linked target tokens.
        alignment = float(result.get("alignment_loss", 0.0))
        if not math.isfinite(loss + alignment):
            raise AttncliError(
                f"the loss became {loss + alignment} at epoch {epoch + 1}, batch "
                f"{int(position.batch.numpy()) + 1}; the last good checkpoint is kept: "
                "lower training.learning_rate or set training.clip_norm"
            )
        position.epoch_loss_sum.assign_add(loss * count)
        position.epoch_tokens.assign_add(count)
        if position.epoch_links is not None:
            links = int(result["links"])
            position.epoch_alignment_sum.assign_add(alignment * links)
            position.epoch_links.assign_add(links)
        position.batch.assign_add(1)
        self._report_step(loss, count, stopping, throughput)
        return int(result["stop"]) if self.workers.distributed else stopping.request()

    def _report_step(self, loss, count, stopping, throughput):
        """Where every trained batch is reported: the progress display (`progress.step`,
        a bar or a plain line every `training.log_every` batches), the position's
        training time and the TensorBoard events."""
        now = time.monotonic()
        self.progress.step(loss, throughput.add(count, now))
        self.position.seconds.assign(stopping.elapsed(now))
        self.events.step(loss, count)

    def _summary(self, last_record):
        """What `fit` returns, after scoring the kept model on the test split."""
        position = self.position
        summary = {
            # Epochs trained, the last one counted when the time budget, patience or a
            # signal cut it short: the `1*` of the table is one epoch.
            "epochs": int(position.epoch.numpy()) + int(int(position.batch.numpy()) > 0),
            "best": {
                self.stop_metric.name:
                    self.stop_metric.shown(float(position.best_metric.numpy()))
            },
            "last": last_record,
            "precision": self.config.training.precision,
            "model": str(self.run.model_dir),
        }
        test = None
        if self.workers.is_chief:
            test = score_test_split(
                self.config, self.run, self.parts.splits.test, self.validator.normalise,
                self.progress,
            )
        if self.workers.distributed:
            # The others wait for the chief's test scoring, so that none leaves while
            # the chief still runs (TensorFlow's health check would report it lost).
            self.workers.agree(0)
        if test is not None:
            summary["test"] = {
                key: value for key, value in test.items() if key not in ("decoding", "split")
            }
        return summary

    def _train_loss(self):
        """The mean training loss per target token of the epoch so far."""
        position = self.position
        return float(position.epoch_loss_sum.numpy()) / max(int(position.epoch_tokens.numpy()), 1)

    def _train_alignment_loss(self):
        """`{"train_alignment_loss": guided alignment's mean loss per linked target
        token of the epoch so far}`, or {} without guided alignment."""
        position = self.position
        if position.epoch_links is None:
            return {}
        mean = float(position.epoch_alignment_sum.numpy()) / max(
            int(position.epoch_links.numpy()), 1
        )
        return {"train_alignment_loss": mean}

    def _evaluate(self, epoch, train_loss, finished_epoch):
        """Validate, keep the model if it is the best so far, and record the evaluation."""
        validator = self.validator
        # The raw weights' loss and metrics beside the average's show what averaging gains.
        averaging = self.config.training.average_decay is not None
        raw_loss = validator.loss() if averaging else None
        raw_figures = {}
        if averaging:
            raw_figures = {f"{key}_raw": value for key, value in validator.metric().items()}
        with validator.averaged_weights():
            losses = validator.loss_figures(raw_loss)
            figures = validator.metric()
            value = self.workers.agree(self.stop_metric.maximised({**losses, **figures}))
            improved = value > float(self.position.best_metric.numpy())
            guided = self.config.training.guided_alignment
            if (guided is not None and guided.freeze_translation
                    and self.stop_metric.name != "alignment"):
                # The translation does not change and the layer cannot be measured on
                # the validation pairs: every evaluation keeps the model, with its
                # alignment layer as trained so far.
                improved = True
            if improved:
                self.position.best_metric.assign(value)
                self.position.stale_evaluations.assign(0)
            else:
                self.position.stale_evaluations.assign_add(1)
            if improved and self.workers.is_chief:
                kept = {key: losses[key] for key in ("valid_loss", "valid_alignment_loss")
                        if key in losses}
                self._keep_model(epoch, {**kept, **figures})
            step = int(self.optimizer.iterations.numpy())
            self.events.evaluation(step, {**losses, **figures})
        record = {
            "epoch": epoch,
            "references": validator.references,
            "complete_epoch": finished_epoch,
            "step": step,
            "train_loss": train_loss,
            **self._train_alignment_loss(),
            **losses,
            **figures,
            **raw_figures,
            "best": improved,
            "weights": validator.weights_kind,
            "padding": self.stats.padding_fraction,
            "minutes": float(self.position.seconds.numpy()) / 60.0,
        }
        if self.workers.is_chief:
            self.run.append_metrics(record)
            self.run.log(" ".join(f"{key}={value}" for key, value in record.items()))
        self.progress.end_epoch(record)
        return record

    def _keep_model(self, epoch, figures):
        """Replace the run's best model by the model as it is now (average or raw)."""
        parts = self.parts
        save_model(
            self.run.model_dir, self.model, parts.source_tokenizer, parts.target_tokenizer,
            source_end=self.config.data.source_end,
            metadata={
                "run": self.config.name,
                "epoch": epoch,
                "task": self.config.data.task,
                "decoding": self.config.decoding.to_dict(),
                "weights": self.validator.weights_kind,
                **figures,
                **({} if parts.init_from is None else {"init_from": str(parts.init_from.run)}),
            },
        )
