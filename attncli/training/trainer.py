"""The training loop: compiled steps, evaluation, checkpoints and resumption.

A run never loses work. Checkpoints (model, optimizer state, and the data position:
epoch and batch) are written every `training.checkpoint_every` steps, at the end of
each epoch and when the run is interrupted (Ctrl-C or SIGTERM); each is complete
before TensorFlow's checkpoint index points at it, so a process killed at any
moment leaves a run that `--resume` continues. The best model by the validation
metric is kept in `RUN/model`, replaced atomically.

Under a `tf.distribute` strategy (`training.distribute`), each global batch is split
across the replicas and every decision that ends or shapes the loop is agreed by all
workers, since a worker that stopped alone would leave the others waiting in their
next collective: a signal or the time budget stops everyone after the same step (the
train step carries each worker's stop request and returns the largest), the time
budget is agreed again between epochs, and the validation metric that picks the best
model and counts patience is the largest any worker computed. Every worker validates
(same weights, same sentences); only the chief writes the run's records and model.
All workers checkpoint at the same steps, the chief into the run, the others into
their own directory (see `attncli.training.distribution`); on resume every worker restores
the newest checkpoint that all of them hold.
"""

import contextlib
import dataclasses
import hashlib
import json
import math
import signal
import time

import keras
import tensorflow as tf

from attncli.config.schema import to_mapping
from attncli.config.data import read_splits
from attncli.training.checkpoint_files import checkpoint_paths, repair_index
from attncli.training.distribution import make_agreement, make_strategy
from attncli.errors import AttncliError
from attncli.search.evaluation import evaluate_corpus
from attncli.files import write_text_atomically
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.footprint import check_fits_in_memory
from attncli.data.pipeline import PipelineStats, encode_pairs, epoch_batches
from attncli.training.run_directory import write_json_atomically
from attncli.model.saving import load_model, save_model, saved_metadata
from attncli.data.tokenization import Tokenizer
from attncli.training.steps import (
    make_distributed_train_step,
    make_eval_step,
    make_optimizer,
    make_train_step,
)
from attncli.search.translation import Translator


class Interrupted(Exception):
    """Training stopped by a signal after its checkpoint was written."""

    def __init__(self, signal_number, epoch, step):
        name = signal.Signals(signal_number).name
        super().__init__(f"{name} at epoch {epoch}, step {step}")
        self.signal_number = signal_number


class _SignalFlag:
    """Turns SIGINT and SIGTERM into a flag the loop checks between steps.

    A second Ctrl-C while the checkpoint is being written is ignored rather than
    allowed to leave it half done.
    """

    def __init__(self):
        self.received = None
        self._previous = {}

    def __enter__(self):
        for number in (signal.SIGINT, signal.SIGTERM):
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def _handle(self, number, frame):
        self.received = self.received or number

    def __exit__(self, *exc_info):
        for number, handler in self._previous.items():
            signal.signal(number, handler)


def prepare_tokenizers(config, run, splits, resume):
    """The run's tokenizers: read back on resume, else learned from the training side."""
    names = ("source", "target")
    if resume and all((run.path / f"{name}.vocab.txt").exists() for name in names):
        return tuple(Tokenizer.load(run.path, name) for name in names)
    tokenizers = []
    for name, side, texts in (
        ("source", config.data.source, splits.train.sources),
        ("target", config.data.target, splits.train.targets),
    ):
        tokenizer = side.tokenizer()
        vocabulary = tokenizer.build_vocabulary(
            texts, max_size=side.vocab_size, min_count=side.min_count
        )
        tokenizer = tokenizer.with_vocabulary(vocabulary)
        tokenizer.save(run.path, name)
        tokenizers.append(tokenizer)
    return tuple(tokenizers)


class Trainer:
    """Trains the model of a `RunConfig` in a `RunDirectory`.

    Args:
        config: the `RunConfig`.
        run: the `RunDirectory` (created, or opened to resume).
        progress: an object with `start_epoch(epoch, total, steps)`, `step(loss,
            tokens_per_second)`, `end_epoch(record)` and `message(text)`; the CLI
            passes a Rich display, tests a recorder.
        data_dir: folder for the relative paths of the data section.
        resume: bool, restore the run's newest checkpoint.
        strategy: the `tf.distribute.Strategy` to train under. Defaults to
            `make_strategy` of the configuration (the strategy must be made before
            TensorFlow's first operation: the CLI makes it before anything else).
        is_chief: bool, whether this worker writes the run's records and best model.
            Defaults to True.
    """

    def __init__(self, config, run, progress, data_dir=None, resume=False, strategy=None,
                 is_chief=True):
        self.config = config
        self.run = run
        self.progress = progress
        training = config.training
        self.distributed = training.distribute != "none"
        self.strategy = strategy or make_strategy(training.distribute, training.cpu_replicas)
        self.is_chief = is_chief
        self._agree = make_agreement(self.strategy)
        keras.utils.set_random_seed(config.training.seed)
        self.splits = read_splits(config.data, data_dir)
        # Splits carved from one file share its report: each file is reported once.
        reports = {id(corpus.report): corpus.report
                   for corpus in (self.splits.train, self.splits.valid, self.splits.test)
                   if corpus.report is not None and corpus.report.bad_lines}
        for report in reports.values():
            progress.message(f"{report.summary()}; skipped")
        self.source_tokenizer, self.target_tokenizer = prepare_tokenizers(
            config, run, self.splits, resume
        )
        if self.distributed:
            self._check_same_run()
        self.model_config = config.model_config(
            len(self.source_tokenizer.vocabulary), len(self.target_tokenizer.vocabulary)
        )
        check_fits_in_memory(self.model_config, training.average_decay is not None)
        with self.strategy.scope():
            self.model = Seq2Seq(self.model_config)
            # Distributed, the train step clips the summed gradient itself.
            self.optimizer = make_optimizer(
                dataclasses.replace(training, clip_norm=None) if self.distributed else training
            )
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.batch = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.best_metric = tf.Variable(-math.inf, dtype=tf.float64, trainable=False)
            self.stale_evaluations = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False)
            # The running loss of the current epoch, so a resumed epoch reports all of it.
            self.epoch_loss_sum = tf.Variable(0.0, dtype=tf.float64, trainable=False)
            self.epoch_tokens = tf.Variable(0, dtype=tf.int64, trainable=False)
            if self.distributed:
                # The optimizer's variables exist before a checkpoint is restored.
                self.optimizer.build(self.model.trainable_variables)
        if not self.distributed:
            self.train_step = make_train_step(self.model, self.optimizer, training)
        self.eval_step = make_eval_step(self.model, training)
        self.checkpoint = tf.train.Checkpoint(
            model=self.model,
            optimizer=self.optimizer,
            epoch=self.epoch,
            batch=self.batch,
            best_metric=self.best_metric,
            stale_evaluations=self.stale_evaluations,
            seconds=self.seconds,
            epoch_loss_sum=self.epoch_loss_sum,
            epoch_tokens=self.epoch_tokens,
        )
        if resume:
            repaired = repair_index(run.checkpoint_dir)  # before the manager reads it
            if repaired:
                progress.message(repaired)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(run.checkpoint_dir), max_to_keep=2
        )
        if resume:
            self._restore()

        data = config.data
        self.stats = PipelineStats()
        self.encoded = encode_pairs(
            self.splits.train, self.source_tokenizer, self.target_tokenizer,
            max_length=data.max_length, source_end=data.source_end, stats=self.stats,
        )
        if self.distributed:
            # Its signature is that of the distributed batches, known once they exist.
            self.train_step = make_distributed_train_step(
                self.model, self.optimizer, self.strategy, self._batches(0).element_spec,
                training,
            )
        self.validation_translator = Translator(
            self.model, self.source_tokenizer, self.target_tokenizer,
            dataclasses.replace(
                config.decoding, beam_size=config.training.eval_beam_size, n_best=1
            ),
            source_end=data.source_end,
        )
        self.valid_encoded = encode_pairs(
            self.splits.valid, self.source_tokenizer, self.target_tokenizer,
            max_length=None, source_end=data.source_end,
        )

    def _restore(self):
        """Restore the newest checkpoint that can be read, falling back to older ones.

        The checkpoints are those on disk (`checkpoint_paths`), whatever the index
        says. A run with a best model but no checkpoint is refused rather than
        started over, and the kept model's figure is a floor for the restored best
        metric, so an older checkpoint never lets a worse model replace it.

        Workers restore their own copies: the newest that every worker holds (one
        killed while the others saved lacks their last), and check they restored the
        same one. Every worker takes part in the same agreements whatever it finds, so
        that a worker with nothing to restore stops with the others instead of leaving
        them waiting.
        """
        candidates = checkpoint_paths(self.run.checkpoint_dir)
        newest = max(map(_checkpoint_number, candidates), default=0)
        if self.distributed:
            fewest, most = self._agree(newest, "min"), self._agree(newest, "max")
            if fewest == 0 and most > 0:
                raise AttncliError(
                    "some workers hold checkpoints of this run and others none; resume "
                    "every worker with the run it trained, or start all with --overwrite"
                )
            newest = fewest
            candidates = [path for path in candidates if _checkpoint_number(path) <= newest]
        restored, problems = None, []
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
            except Exception as error:  # noqa: BLE001  A damaged file fails in many ways.
                lines = str(error).strip().splitlines()
                problems.append(f"{path}: {lines[0] if lines else type(error).__name__}")
                continue
            restored = path
            break
        number = _checkpoint_number(restored) if restored else (-1 if problems else 0)
        if self.distributed and self._agree(number, "min") != self._agree(number, "max"):
            raise AttncliError(
                f"the workers restored different checkpoints (this one: {restored or 'none'}); "
                "start the run again with --overwrite on every worker"
            )
        if restored is None and problems:
            raise AttncliError(
                f"no checkpoint of {self.run.path} can be restored ({problems[0]}); "
                "start the run again with --overwrite"
            )
        if restored is None:
            if self._agree(self.run.model_dir.is_dir()):
                raise AttncliError(
                    f"{self.run.path} has a best model but no checkpoint to continue from "
                    f"(none in {self.run.checkpoint_dir}); keep the model as it is, or start "
                    "the run again with --overwrite, which replaces it"
                )
            self.progress.message("no checkpoint yet: starting this run from the beginning")
            return
        if problems:
            self.progress.message(f"skipped damaged checkpoint(s): {'; '.join(problems)}")
        kept = self._agree(self._kept_model_metric())
        if kept > float(self.best_metric.numpy()):
            self.best_metric.assign(kept)
        self.progress.message(
            f"resuming from {restored}: epoch {int(self.epoch.numpy()) + 1}, "
            f"batch {int(self.batch.numpy())}"
        )

    def _kept_model_metric(self):
        """The validation metric (maximised) of the run's best model, -inf if none."""
        value = saved_metadata(self.run.model_dir).get(self.metric_name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return -math.inf
        return -value if self.metric_name == "wer" else float(value)

    def _check_same_run(self):
        """Stop every worker if they do not train the same configuration on the same data.

        Workers given different settings (a `--set` on one machine only) or different
        files would compute different batches: at best a silent mix, at worst a hang.
        """
        mapping = to_mapping(self.config)
        mapping["data"].pop("directory", None)  # where the files are may differ
        described = json.dumps(
            [mapping, len(self.source_tokenizer.vocabulary),
             len(self.target_tokenizer.vocabulary), len(self.splits.train)],
            sort_keys=True,
        )
        # 52 bits: exact in the float64 the agreement carries.
        fingerprint = int(hashlib.sha256(described.encode()).hexdigest()[:13], 16)
        if self._agree(fingerprint, "min") != self._agree(fingerprint, "max"):
            raise AttncliError(
                "the workers do not train the same run (their configurations, --set "
                "overrides or data files differ); give every worker the same ones"
            )

    def _batches(self, epoch, skip=0):
        data = self.config.data
        dataset = epoch_batches(
            self.encoded, epoch, batch_size=data.batch_size,
            tokens_per_batch=data.tokens_per_batch, bucketing=data.bucketing,
            shuffle=True, seed=self.config.training.seed, stats=self.stats,
        )
        dataset = dataset.skip(skip) if skip else dataset
        if not self.distributed:
            return dataset
        # Every worker builds the same batches; each takes its replicas' rows of each
        # (DATA sharding: the pipeline reads no files to share out).
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return self.strategy.experimental_distribute_dataset(dataset.with_options(options))

    def fit(self):
        """Train until the epochs, the time budget or the patience run out.

        Returns:
            The summary dict: epochs run, best metric, the last evaluation record.

        Raises:
            Interrupted: after writing a checkpoint, when a signal arrived.
        """
        training = self.config.training
        started = time.monotonic() - float(self.seconds.numpy())
        last_record = None
        with _SignalFlag() as flag:
            while self._reason_to_stop(started) is None:
                epoch = int(self.epoch.numpy())
                skip = int(self.batch.numpy())
                if skip == 0:
                    self.epoch_loss_sum.assign(0.0)
                    self.epoch_tokens.assign(0)
                self.stats.reset()
                self.progress.start_epoch(epoch + 1, training.epochs, skip)
                window_start, window_tokens = time.monotonic(), 0
                finished_epoch = True
                for inputs, target_out in self._batches(epoch, skip):
                    if self.distributed:
                        request = self._stop_request(flag, started)
                        result = self.train_step(inputs, target_out, request)
                    else:
                        result = self.train_step(inputs, target_out)
                    loss = float(result["loss"])
                    count = int(result["tokens"])
                    if not math.isfinite(loss):
                        raise AttncliError(
                            f"the loss became {loss} at epoch {epoch + 1}, batch "
                            f"{int(self.batch.numpy()) + 1}; the last good checkpoint is kept: "
                            "lower training.learning_rate or set training.clip_norm"
                        )
                    self.epoch_loss_sum.assign_add(loss * count)
                    self.epoch_tokens.assign_add(count)
                    window_tokens += count
                    self.batch.assign_add(1)
                    now = time.monotonic()
                    self.progress.step(loss, window_tokens / max(now - window_start, 1e-9))
                    if now - window_start > 5.0:
                        window_start, window_tokens = now, 0
                    self.seconds.assign(now - started)
                    if self.distributed:
                        stop = int(result["stop"])
                    else:
                        stop = self._stop_request(flag, started)
                    if stop > 1:
                        self.manager.save()
                        raise Interrupted(stop, epoch + 1, int(self.batch.numpy()))
                    if int(self.optimizer.iterations.numpy()) % training.checkpoint_every == 0:
                        self.manager.save()
                    if stop:
                        finished_epoch = False
                        break
                # The trained batches are safe before the (possibly long) evaluation.
                self.manager.save()
                train_loss = float(self.epoch_loss_sum.numpy()) / max(
                    int(self.epoch_tokens.numpy()), 1
                )
                last_record = self._evaluate(epoch + 1, train_loss, finished_epoch)
                if finished_epoch:
                    self.epoch.assign_add(1)
                    self.batch.assign(0)
                self.seconds.assign(time.monotonic() - started)
                self.manager.save()
                received = int(self._agree(flag.received or 0))
                if received:
                    raise Interrupted(received, epoch + 1, int(self.batch.numpy()))
        self.progress.message(f"finished: {self._reason_to_stop(started)}")
        summary = {
            "epochs": int(self.epoch.numpy()),
            "best": {self.metric_name: self._metric_value(float(self.best_metric.numpy()))},
            "last": last_record,
            "model": str(self.run.model_dir),
        }
        test = self.evaluate_test() if self.is_chief else None
        if self.distributed:
            # The others wait for the chief's test scoring, so that none leaves while
            # the chief still runs (TensorFlow's health check would report it lost).
            self._agree(0)
        if test is not None:
            summary["test"] = {
                key: value for key, value in test.items() if key not in ("decoding", "split")
            }
        return summary

    def _reason_to_stop(self, started):
        """Why training is over (epochs, time budget or patience spent), or None."""
        training = self.config.training
        if int(self.epoch.numpy()) >= training.epochs:
            return f"{training.epochs} epochs trained"
        if self._agree(self._out_of_time(started)):
            return f"the time budget of {training.max_minutes:g} minutes is spent"
        if training.patience and int(self.stale_evaluations.numpy()) >= training.patience:
            return (
                f"stopped early: no better validation {self.metric_name} for "
                f"{training.patience} evaluations"
            )
        return None

    @property
    def metric_name(self):
        return "wer" if self.config.data.task == "pronunciation" else "bleu"

    def _metric_value(self, maximised):
        """The metric as users read it (the loop maximises minus WER)."""
        if not math.isfinite(maximised):
            return None
        return -maximised if self.metric_name == "wer" else maximised

    def _stop_request(self, flag, started):
        """The signal received (its number), 1 when time is up, else 0."""
        return flag.received or int(self._out_of_time(started))

    def _out_of_time(self, started):
        limit = self.config.training.max_minutes
        return limit is not None and time.monotonic() - started >= 60.0 * limit

    def validation_loss(self):
        """Mean loss per target token over the whole validation split."""
        return self.validation_losses()["loss"]

    def validation_losses(self):
        """Mean losses per target token over the whole validation split.

        Returns:
            `{"loss", "nll"}`: the training objective (label-smoothed when training
            smooths) and the plain cross-entropy `-log p(y)`.
        """
        data = self.config.data
        dataset = epoch_batches(
            self.valid_encoded, 0, batch_size=data.batch_size, bucketing=data.bucketing,
            shuffle=False, seed=0,
        )
        totals, tokens = {"loss": 0.0, "nll": 0.0}, 0
        for inputs, target_out in dataset:
            result = self.eval_step(inputs, target_out)
            count = int(result["tokens"])
            for key in totals:
                totals[key] += float(result[key]) * count
            tokens += count
        return {key: total / max(tokens, 1) for key, total in totals.items()}

    def validation_metric(self):
        """The task's metrics on (the first `eval_sentences` of) the validation split.

        Outputs are compared with references written the way the target side is
        tokenized: when it folds case, strips accents or drops characters, the
        references are passed through the same normalisation (tokenized and
        detokenized), since no output could ever match what was removed.

        Returns:
            `(value, record)`: the value to maximise (BLEU, or minus WER) and a dict
            of the figures (BLEU and chrF, or PER and WER).
        """
        figures, _ = evaluate_corpus(
            self.validation_translator, self.splits.valid, self.config.data.task,
            count=self.config.training.eval_sentences,
            normalise=self._reference_normaliser, lowercase_bleu=False,
        )
        if self.config.data.task == "pronunciation":
            return -figures["wer"], {"per": figures["per"], "wer": figures["wer"]}
        return figures["bleu"], {"bleu": figures["bleu"], "chrf": figures["chrf"]}

    def evaluate_test(self):
        """Score the best model on the test split with the run's decoding settings.

        Writes `RUN/test.json` (the figures, the decoding settings and how long
        decoding took) and `RUN/test.outputs.txt` (one output per distinct test
        source, in order of first appearance). References are taken as they are
        written in the test file, unless the target side normalises (as for
        validation). The test split never influences training or model selection.

        Returns:
            The dict written to `test.json`, or None when the run has no test split
            or no best model.
        """
        if not len(self.splits.test) or not self.run.model_dir.is_dir():
            return None
        loaded = load_model(self.run.model_dir)
        translator = loaded.translator(self.config.decoding)
        self.progress.message(
            f"scoring the best model (epoch {loaded.metadata.get('epoch')}) on the test split"
        )
        figures, outputs = evaluate_corpus(
            translator, self.splits.test, self.config.data.task,
            normalise=self._reference_normaliser,
        )
        result = {
            "split": "test",
            "references": self._reference_form,
            "model_epoch": loaded.metadata.get("epoch"),
            "weights": loaded.metadata.get("weights", "raw"),
            "decoding": self.config.decoding.to_dict(),
            **figures,
        }
        write_text_atomically(
            self.run.path / "test.outputs.txt", "".join(f"{line}\n" for line in outputs)
        )
        write_json_atomically(self.run.path / "test.json", result)
        self.run.log("test " + " ".join(f"{key}={value}" for key, value in result.items()))
        return result

    @property
    def normalise_references(self):
        side = self.config.data.target
        return side.lowercase or side.strip_accents or side.drop_pattern is not None

    @property
    def _reference_normaliser(self):
        """What references pass through before scoring (see `validation_metric`), or None."""
        return self._normalised if self.normalise_references else None

    @property
    def _reference_form(self):
        return "normalised" if self.normalise_references else "raw"

    def _normalised(self, texts):
        tokens = self.target_tokenizer.tokenize(tf.constant(texts))
        return [text.decode("utf-8") for text in self.target_tokenizer.detokenize(tokens).numpy()]

    @property
    def _weights_kind(self):
        """Which weights validation and the kept model use: "average" or "raw"."""
        return "raw" if self.config.training.average_decay is None else "average"

    @contextlib.contextmanager
    def _averaged_weights(self):
        """Within it, the model holds the moving average of its weights, if one is kept.

        The raw weights, which training goes on with, are put back on leaving, also
        when the evaluation fails. The optimizer pairs its averages with the variables
        it was built with, `model.trainable_variables` (see `make_train_step`).
        """
        if self.config.training.average_decay is None:
            yield
            return
        variables = self.model.trainable_variables
        raw = [keras.ops.convert_to_numpy(variable) for variable in variables]
        try:
            self.optimizer.finalize_variable_values(variables)
            yield
        finally:
            for variable, value in zip(variables, raw):
                variable.assign(value)

    def _evaluate(self, epoch, train_loss, finished_epoch):
        losses = {}
        if self.config.training.average_decay is not None:
            # The raw weights' loss beside the average's shows what averaging gains.
            losses["valid_loss_raw"] = self.validation_loss()
        with self._averaged_weights():
            return self._evaluate_model(epoch, train_loss, finished_epoch, losses)

    def _evaluate_model(self, epoch, train_loss, finished_epoch, losses):
        valid = self.validation_losses()
        losses = {"valid_loss": valid["loss"], **losses}
        if self.config.training.label_smoothing:
            losses["valid_nll"] = valid["nll"]
        value, figures = self.validation_metric()
        value = self._agree(value)
        improved = value > float(self.best_metric.numpy())
        if improved:
            self.best_metric.assign(value)
            self.stale_evaluations.assign(0)
        else:
            self.stale_evaluations.assign_add(1)
        if improved and self.is_chief:
            save_model(
                self.run.model_dir, self.model, self.source_tokenizer, self.target_tokenizer,
                source_end=self.config.data.source_end,
                metadata={
                    "run": self.config.name,
                    "epoch": epoch,
                    "task": self.config.data.task,
                    "decoding": self.config.decoding.to_dict(),
                    "weights": self._weights_kind,
                    **figures,
                },
            )
        record = {
            "epoch": epoch,
            "references": self._reference_form,
            "complete_epoch": finished_epoch,
            "step": int(self.optimizer.iterations.numpy()),
            "train_loss": train_loss,
            **losses,
            **figures,
            "best": improved,
            "weights": self._weights_kind,
            "padding": self.stats.padding_fraction,
            "minutes": float(self.seconds.numpy()) / 60.0,
        }
        if self.is_chief:
            self.run.append_metrics(record)
            self.run.log(" ".join(f"{key}={value}" for key, value in record.items()))
        self.progress.end_epoch(record)
        return record


def _checkpoint_number(path):
    """The save count that ends a checkpoint's name (`.../ckpt-12` -> 12)."""
    return int(str(path).rsplit("-", 1)[1])
