"""The parts of a training run, as `attncli.training.builder` makes them for `Trainer`, and
the position of training that every checkpoint holds."""

import dataclasses
import math

import tensorflow as tf

from attncli.data.pipeline import PipelineStats
from attncli.data.tokenization import Tokenizer
from attncli.model.encoder_decoder import Seq2Seq
from attncli.training.distribution import Workers


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
