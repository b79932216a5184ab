"""What a training run is made of, built from its configuration and run directory.

    corpus splits (and the word alignments of guided alignment training)
    -> tokenizers (learned, or read back on resume) -> model and optimizer
    -> the position variables and their checkpoints (restored on resume)
    -> the encoded training pairs (with their links moved onto pieces) and validation pairs

`build_training` does it in that order, under the run's `tf.distribute` strategy, and
returns the parts as a `TrainingParts` (`attncli.training.parts`) for `Trainer`.
Resuming restores the newest checkpoint that can be read (and, distributed, that every
worker holds: `attncli.training.resumption`). A run that starts from another run's kept
model (`attncli train --init-from`, recorded in the run: `attncli.training.init_from`)
copies that model's tokenizers instead of learning its own
(`attncli.training.run_tokenizers`), and loads its weights into the new model
(`attncli.training.initial_weights`); the optimizer starts fresh.
"""

import contextlib
import dataclasses

import keras
import tensorflow as tf

from attncli.data.alignments import piece_links, read_split_links
from attncli.data.pipeline import PipelineStats, encode_pairs
from attncli.data.sources import data_paths, read_splits
from attncli.errors import AttncliError
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.footprint import check_fits_in_memory
from attncli.training.checkpoint_files import repair_index
from attncli.training.distribution import Workers, make_strategy
from attncli.training.init_from import read_record
from attncli.training.initial_weights import load_initial_weights
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.parts import TrainingParts, TrainingPosition
from attncli.training.precision import resolve as resolve_precision
from attncli.training.resumption import raise_to_kept_model, restore_checkpoint
from attncli.training.run_tokenizers import prepare_tokenizers
from attncli.training.steps import GradientSums, trained_variables
from attncli.training.stop_metric import StopMetric


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
