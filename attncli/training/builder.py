"""What a training run is made of, built from its configuration and run directory.

    corpus splits (and the word alignments of guided alignment training)
    -> tokenizers (learned, or read back on resume) -> model and optimizer
    -> the position variables and their checkpoints (restored on resume)
    -> the encoded training pairs (with their links moved onto pieces) and validation pairs

`build_training` does it in that order, under the run's `tf.distribute` strategy, and
returns the parts as a `TrainingParts` for `Trainer`. Resuming restores the newest
checkpoint that can be read (and, distributed, that every worker holds). A run that
starts from another run's kept model (`attncli train --init-from`, recorded in the run:
`attncli.training.init_from`) copies that model's tokenizers instead of learning its
own, and loads its weights into the new model; the optimizer starts fresh.
"""

import contextlib
import dataclasses
import math
from pathlib import Path

import keras
import tensorflow as tf

from attncli.data.alignments import piece_links, read_split_links
from attncli.data.pipeline import PipelineStats, encode_pairs
from attncli.data.sources import data_paths, read_splits
from attncli.data.tokenization import Tokenizer, learn_tokenizer
from attncli.errors import AttncliError, first_line
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.footprint import check_fits_in_memory
from attncli.model.saving import (
    CONFIG_FILE, WEIGHTS_FILE, ModelFileError, inner_path, load_matching_weights,
    load_weights, model_files, read_model_config, saved_metadata,
)
from attncli.training.checkpoint_files import checkpoint_paths, repair_index
from attncli.training.distribution import Workers, make_strategy
from attncli.training.init_from import gains_alignment_layer, grows_into_cascade, read_record
from attncli.training.precision import resolve as resolve_precision
from attncli.training.steps import GradientSums, make_optimizer, trained_variables
from attncli.training.stop_metric import StopMetric


@dataclasses.dataclass(frozen=True)
class TrainingPosition:
    """Where training stands; every checkpoint holds it beside the model and optimizer.

    Attributes (scalar `tf.Variable`s):
        epoch: epochs finished.
        batch: batches trained of the current epoch.
        best_metric: the best `stop_metric` so far, as a value to maximise (BLEU,
            chrF; minus the loss, PER or WER: see `StopMetric.maximised`).
        stale_evaluations: evaluations since the best one (for `training.patience`).
        seconds: training time spent, evaluations included.
        epoch_loss_sum, epoch_tokens: the running loss of the current epoch, so that a
            resumed epoch reports all of it.
        epoch_alignment_sum, epoch_links: the same of guided alignment's loss and its
            linked target tokens; None (and not in the checkpoints) without it.
    """

    epoch: tf.Variable
    batch: tf.Variable
    best_metric: tf.Variable
    stale_evaluations: tf.Variable
    seconds: tf.Variable
    epoch_loss_sum: tf.Variable
    epoch_tokens: tf.Variable
    epoch_alignment_sum: tf.Variable | None = None
    epoch_links: tf.Variable | None = None

    def variables(self):
        """`{name: variable}`, the names they have in checkpoints."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if getattr(self, field.name) is not None}

    @classmethod
    def start(cls, guided=False):
        """The position before training; with `guided`, with guided alignment's sums."""
        guided_sums = {}
        if guided:
            guided_sums = dict(
                epoch_alignment_sum=tf.Variable(0.0, dtype=tf.float64, trainable=False),
                epoch_links=tf.Variable(0, dtype=tf.int64, trainable=False),
            )
        return cls(
            epoch=tf.Variable(0, dtype=tf.int64, trainable=False),
            batch=tf.Variable(0, dtype=tf.int64, trainable=False),
            best_metric=tf.Variable(-math.inf, dtype=tf.float64, trainable=False),
            stale_evaluations=tf.Variable(0, dtype=tf.int64, trainable=False),
            seconds=tf.Variable(0.0, dtype=tf.float64, trainable=False),
            epoch_loss_sum=tf.Variable(0.0, dtype=tf.float64, trainable=False),
            epoch_tokens=tf.Variable(0, dtype=tf.int64, trainable=False),
            **guided_sums,
        )


@dataclasses.dataclass(frozen=True)
class TrainingParts:
    """Everything `Trainer` trains with.

    Attributes:
        config: the `RunConfig`.
        run: the `RunDirectory`.
        workers: the `Workers` (strategy, chief, agreement).
        splits: the corpus `Splits` (train, valid, test).
        source_tokenizer, target_tokenizer: `Tokenizer`s with their vocabularies.
        model: the `Seq2Seq`.
        optimizer: its Keras optimizer.
        position: the `TrainingPosition`.
        checkpoints: the `tf.train.CheckpointManager` of model, optimizer and position.
        encoded: the encoded training pairs (see `encode_pairs`).
        valid_encoded: the encoded validation pairs, not length-filtered.
        stats: the `PipelineStats` of the training batches.
        init_from: the `InitFrom` the run started from, or None.
        gradient_sums: the `GradientSums` of `training.accumulate_steps` > 1 (in the
            checkpoints), else None.
    """

    config: object
    run: object
    workers: Workers
    splits: object
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    model: Seq2Seq
    optimizer: object
    position: TrainingPosition
    checkpoints: tf.train.CheckpointManager
    encoded: object
    valid_encoded: object
    stats: PipelineStats
    init_from: object = None
    gradient_sums: object = None


#: The fewest ids a vocabulary holds (`ModelConfig`: 4 reserved and one token).
SMALLEST_VOCABULARY = 5


def build_training(config, run, progress, data_dir=None, resume=False, strategy=None,
                   is_chief=True):
    """The parts of a training run.

    Args:
        config: the `RunConfig`.
        run: the `RunDirectory` (created, or opened to resume).
        progress: where messages go (an object with `message(text)`, and
            optionally `stage(text)`, told as each stage begins).
        data_dir: folder for the relative paths of the data section.
        resume: bool, read the run's vocabularies back and restore its newest checkpoint.
        strategy: the `tf.distribute.Strategy` to train under. Defaults to
            `make_strategy` of the configuration (the strategy must be made before
            TensorFlow's first operation: the CLI makes it before anything else).
        is_chief: bool, whether this worker writes the run's records and best model.
            Defaults to True.

    Returns:
        A `TrainingParts`.

    Raises:
        AttncliError: when the workers do not train the same run, or resuming finds
            only damaged checkpoints (or, distributed, different ones on each worker).
    """
    training = config.training
    distributed = training.distribute != "none"
    strategy = strategy or make_strategy(training.distribute, training.cpu_replicas)
    workers = Workers(strategy, distributed, is_chief)
    precision, reason = resolve_precision(
        training.precision, tf.config.list_physical_devices("GPU")
    )
    if reason is not None:
        # `auto` becomes a policy here; the parts carry it, the run's config keeps `auto`.
        progress.message(f"precision auto: {precision} ({reason})")
        training = dataclasses.replace(training, precision=precision)
        config = dataclasses.replace(config, training=training)
    keras.utils.set_random_seed(training.seed)
    # The smallest vocabularies give a lower bound: a model too large whatever the data
    # learns is refused before the data is read and the vocabularies learnt.
    check_fits_in_memory(config.model.sized(SMALLEST_VOCABULARY, SMALLEST_VOCABULARY),
                         training)
    _stage(progress, "reading the data")
    splits = read_splits(config.data, data_dir)
    # Splits carved from one file share its report: each file is reported once.
    reports = {id(corpus.report): corpus.report
               for corpus in (splits.train, splits.valid, splits.test)
               if corpus.report is not None and corpus.report.bad_lines}
    for report in reports.values():
        progress.message(f"{report.summary()}; skipped")
    word_links = valid_word_links = None
    if config.data.alignments is not None:
        word_links, valid_word_links = read_split_links(
            data_paths(config.data, data_dir)["alignments"], splits, config.data.limit
        )
        if valid_word_links is None and StopMetric.of(config).name == "alignment":
            raise AttncliError(
                "training.stop_metric alignment is measured on the validation pairs' "
                "links, and data.alignments covers the training file only: carve the "
                "validation pairs from it (data.valid: null, data.valid_size) or choose "
                "another stop_metric"
            )
    init_from = read_record(run)
    _stage(progress, "reading the vocabularies" if resume or init_from
           else "learning the vocabularies")
    source_tokenizer, target_tokenizer = prepare_tokenizers(
        config, run, splits, resume, init_from, data_dir
    )
    if distributed:
        workers.check_same_run(
            config, len(source_tokenizer.vocabulary), len(target_tokenizer.vocabulary),
            len(splits.train),
        )
    model_config = config.model.sized(
        len(source_tokenizer.vocabulary), len(target_tokenizer.vocabulary)
    )
    check_fits_in_memory(model_config, training)
    _stage(progress, "building the model")
    with strategy.scope():
        with dtype_policy(training.precision):
            model = Seq2Seq(model_config)
        # Distributed, the train step clips the summed gradient itself.
        optimizer = make_optimizer(
            dataclasses.replace(training, clip_norm=None) if distributed else training
        )
        position = TrainingPosition.start(guided=word_links is not None)
        # The optimizer's variables must exist before a checkpoint is restored: Keras's
        # optimizer does not take the values of variables it creates later.
        optimizer.build(trained_variables(model, training))
        sums = None
        if training.accumulate_steps > 1:
            sums = GradientSums(trained_variables(model, training), training.accumulate_steps)
    # The sums are checkpointed only when there are any, so that the checkpoints of
    # runs without them keep their contents (accumulate_steps cannot change on resume).
    extra = {} if sums is None else {"gradient_sums": sums}
    guided = training.guided_alignment
    if guided is not None and guided.freeze_translation:
        # The checkpoint reaches most of a model's variables through the optimizer's,
        # not through the Keras model (whose layer lists it does not follow); this
        # optimizer holds the alignment layer's alone, so the rest is listed here.
        extra["model_weights"] = list(model.weights)
    checkpoint = tf.train.Checkpoint(
        model=model, optimizer=optimizer, **position.variables(), **extra
    )
    if resume:
        repaired = repair_index(run.checkpoint_dir)  # before the manager reads it
        if repaired:
            progress.message(repaired)
    checkpoints = tf.train.CheckpointManager(checkpoint, str(run.checkpoint_dir), max_to_keep=2)
    restored = False
    if resume:
        restored = restore_checkpoint(checkpoint, workers, run, progress, position, config)
        raise_to_kept_model(position, workers, run, config,
                            held_out_links=valid_word_links is not None)
    if init_from is not None and not restored:
        load_initial_weights(model, init_from, progress)
    data = config.data
    stats = PipelineStats()
    links = valid_links = None
    if word_links is not None:
        _stage(progress, "moving the alignments onto pieces")
        links = _piece_links(splits.train, word_links, source_tokenizer, target_tokenizer,
                             progress, "trained")
    if valid_word_links is not None:
        valid_links = _piece_links(splits.valid, valid_word_links, source_tokenizer,
                                   target_tokenizer, progress, "validated")
    _stage(progress, "encoding the pairs")
    encoded = encode_pairs(
        splits.train, source_tokenizer, target_tokenizer,
        max_length=data.max_length, source_end=data.source_end, stats=stats, links=links,
    )
    valid_encoded = encode_pairs(
        splits.valid, source_tokenizer, target_tokenizer,
        max_length=None, source_end=data.source_end, links=valid_links,
    )
    return TrainingParts(
        config=config, run=run, workers=workers, splits=splits,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
        model=model, optimizer=optimizer, position=position, checkpoints=checkpoints,
        encoded=encoded, valid_encoded=valid_encoded, stats=stats, init_from=init_from,
        gradient_sums=sums,
    )


def _piece_links(corpus, word_links, source_tokenizer, target_tokenizer, progress, use):
    """`piece_links` of `corpus`, telling `progress` how many pairs lose their links."""
    links, unmatched = piece_links(corpus, word_links, source_tokenizer, target_tokenizer)
    if unmatched:
        progress.message(
            f"data.alignments: the pieces of {unmatched} pairs do not follow their "
            "words (tokenized alone, the words are not the sentence's pieces); "
            f"{use} without their links"
        )
    return links


@contextlib.contextmanager
def dtype_policy(name):
    """Keras's global dtype policy set to `name` (`"float32"`, `"mixed_bfloat16"`,
    ...) while the layers made inside take it, and restored after.

    A `Seq2Seq` makes and builds all its layers when it is made, so they keep the
    policy; the rest of the process (the kept model read back, the export) stays
    in float32.
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _stage(progress, text):
    """Tell `progress` a stage begins, if it shows stages (`TrainingDisplay.stage`)."""
    stage = getattr(progress, "stage", None)
    if stage is not None:
        stage(text)


def prepare_tokenizers(config, run, splits, resume, init_from=None, data_dir=None):
    """The run's tokenizers: read back on resume, else copied from the kept model of
    `init_from` (an `InitFrom`) if given, else learned from the training side (or read
    from the files a side names, relative to `data_dir`, else `data.directory`).

    With `data.shared_vocab` one tokenizer, its vocabulary learned from both sides'
    training text, serves both sides; it is saved under both names, so a run reads
    its two sides back as it always has.
    """
    names = ("source", "target")
    # A side at the sentencepiece level also keeps its `.model` (as `model_files` says).
    files = [run.path / name for name in model_files(run.path)
             if name not in (CONFIG_FILE, WEIGHTS_FILE)]
    if resume and (run.has_progress() or any(path.exists() for path in files)):
        # The run's model was built on these vocabularies: they are never learned again.
        missing = [path.name for path in files if not path.exists()]
        if missing and not run.has_progress():
            raise AttncliError(
                f"{run.path} stopped while its vocabularies were written, before training "
                f"({missing[0]} is missing): there is nothing to resume; start it again "
                "with --overwrite"
            )
        if missing:
            kept = all((run.model_dir / name).is_file() for name in missing)
            raise AttncliError(
                f"{run.path / missing[0]} is missing"
                + (f" (and {', '.join(missing[1:])})" if missing[1:] else "")
                + "; the run cannot go on without the vocabularies it trained with: put "
                + (f"them back (its model keeps a copy in {run.model_dir.name}/)" if kept
                   else "them back")
                + ", or start again with --overwrite"
            )
        return tuple(Tokenizer.load(run.path, name) for name in names)
    if init_from is not None:
        tokenizers = tuple(Tokenizer.load(init_from.model_dir, name) for name in names)
        for name, tokenizer in zip(names, tokenizers):
            tokenizer.save(run.path, name)
        return tokenizers
    data, train = config.data, splits.train
    base = Path(data_dir or data.directory or ".")
    if data.shared_vocab:
        # The sides are tokenized alike: `DataConfig` checked it.
        shared = learn_tokenizer(data.source, list(train.sources) + list(train.targets), base)
        tokenizers = (shared, shared)
    else:
        tokenizers = (
            learn_tokenizer(data.source, train.sources, base),
            learn_tokenizer(data.target, train.targets, base),
        )
    for name, tokenizer in zip(names, tokenizers):
        tokenizer.save(run.path, name)
    return tokenizers


def load_initial_weights(model, init_from, progress):
    """Load the weights of `init_from`'s kept model into `model` (same architecture,
    or a recurrent encoder grown into a cascade, as `check_init_from` checked), and
    say what starts fresh."""
    advice = ("the file is missing, damaged or belongs to another model; give another "
              "--init-from, or start again with --overwrite")
    init_from.check_unchanged()
    try:
        kept = read_model_config(init_from.model_dir)["model"]
    except ModelFileError as error:
        raise AttncliError(
            f"--init-from: {error}; put RUN's kept model back, or start again with "
            "--overwrite"
        ) from None
    taken = "its weights and vocabularies"
    grown = [change for change, made in (
        ("its recurrent encoder grown into a cascade", grows_into_cascade(kept, model.config)),
        ("an alignment layer added", gains_alignment_layer(kept, model.config)),
    ) if made]
    if grown:
        fresh = load_matching_weights(model, kept, init_from.weights_path, advice,
                                      error=AttncliError)
        taken = (f"its vocabularies and {len(model.weights) - len(fresh)} of the "
                 f"{len(model.weights)} weights, {' and '.join(grown)}; fresh: "
                 f"{', '.join(fresh_parts(model, fresh))}")
    else:
        load_weights(model, init_from.weights_path, advice, error=AttncliError)
    progress.message(
        f"initialised from {init_from.describe()}: {taken}; the optimizer starts fresh "
        "and the learning-rate schedule at step 0"
    )


def fresh_parts(model, fresh):
    """The names of `fresh` (variable paths below the model's name) for a person: a layer
    (`encoder/block_0`) where all its variables are fresh, else the variables."""
    layers = {}
    for variable in model.weights:
        path = inner_path(variable)
        layers.setdefault(_layer_of(path), []).append(path)
    unset = set(fresh)
    parts = []
    for path in fresh:
        whole = all(other in unset for other in layers[_layer_of(path)])
        parts.append(_layer_of(path) if whole else path)
    return list(dict.fromkeys(parts))


def _layer_of(path):
    """`encoder/block_0/W_1/kernel` -> `encoder/block_0`."""
    return "/".join(path.split("/")[:2])


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
