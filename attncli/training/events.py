"""TensorBoard event files of a training run: its curves and attention pictures.

    RUN/events/train/   every TRAIN_EVERY steps: loss (the mean per target token of
                        those steps), learning_rate (the schedule's rate at the step:
                        that of the next update), target_tokens_per_second
    RUN/events/valid/   at each evaluation: loss (nll, loss_raw when recorded), bleu and
                        chrf (or per and wer), and attention/1 .. attention/3, the
                        attention of the first PICTURES distinct validation sources as
                        the run's validation decodes them

`tensorboard --logdir runs` shows every run under `runs/`, `train` and `valid` as two
runs of one chart (`loss`). Every value is written at the global step, the number of
updates applied (the optimizer's `iterations`), so a resumed run goes on where its
checkpoint stands; each process writes files of its own beside the earlier ones, and
whatever step the files already hold (a process killed after its checkpoint may have
written a few steps, or an evaluation, beyond it) is not written again: the steps in
the files only go forwards.

Only the chief of a distributed run writes events. Writing them never stops training:
the first failure (a full disk, TensorBoard missing) is reported once through
`progress.message`, and this process writes no more events; a full disk still stops
the run at its next checkpoint, as every full disk does (README, Reliability).
"""

import contextlib
import dataclasses
import os
import struct
import time

import keras
import tensorflow as tf
from google.protobuf.message import DecodeError

from attncli.errors import clipped, first_line
from attncli.files import link_refused
from attncli.search.translation import Translator

TRAIN_EVERY = 10
PICTURES = 3
# The writer writes its buffered events out on the first write this long after the
# last time (and RunEvents flushes at every checkpoint and evaluation).
FLUSH_MILLIS = 30_000


class RunEvents:
    """Writes the TensorBoard events of a run (see the module's docstring).

    Use it as a context manager around training; leaving it flushes and closes the files.

    Args:
        parts: the run's `TrainingParts`.
        progress: where the one failure message goes (an object with `message(text)`).
        draw_attention: a function `(source_tokens, output_tokens, weights,
            title=...)` that draws an attention matrix and returns `(png, missing)`,
            the PNG file's bytes and what it could not draw, as
            `attncli.cli.heatmap.heatmap_png` does. None writes no pictures.
            Defaults to None.
    """

    def __init__(self, parts, progress, draw_attention=None):
        self.parts = parts
        self.progress = progress
        self.draw_attention = draw_attention
        self.active = parts.workers.is_chief
        self.directory = parts.run.events_dir
        self._files = {}  # `train` and `valid`: the `_EventFile` of each, once opened
        self._window = _Window()
        self._translator = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def step(self, loss, tokens):
        """Count one training step (its mean loss per token and its target tokens);
        every `TRAIN_EVERY` global steps, write the window's figures."""
        if not self.active:
            return
        self._window.add(loss, tokens)
        step = int(self.parts.optimizer.iterations.numpy())
        if step % TRAIN_EVERY == 0:
            loss, tokens_per_second = self._window.take()
            with self._guard():
                # A `MirroredVariable` when distributed, which `float` does not take.
                rate = keras.ops.convert_to_numpy(self.parts.optimizer.learning_rate)
                scalars = {"loss": loss, "learning_rate": float(rate)}
                if tokens_per_second is not None:
                    scalars["target_tokens_per_second"] = tokens_per_second
                self._file("train").scalars(step, scalars)
        if step % self.parts.config.training.checkpoint_every == 0:
            self.flush()

    def evaluation(self, step, figures):
        """Write an evaluation's figures (a record's `valid_loss`, `bleu`, ...) and the
        attention pictures, with the weights being validated; then flush."""
        if not self.active:
            return
        with self._guard():
            names = {"valid_loss": "loss", "valid_nll": "nll", "valid_loss_raw": "loss_raw"}
            scalars = {names.get(key, key): value for key, value in figures.items()}
            valid = self._file("valid")
            if valid.scalars(step, scalars) and self.draw_attention is not None:
                for number, picture in enumerate(self._pictures(), start=1):
                    valid.image(step, f"attention/{number}", picture)
        # The evaluation took a while: its time is not the training's tokens/s.
        self._window.restart()
        self.flush()

    def flush(self):
        with self._guard():
            for file in self._files.values():
                file.flush()

    def close(self):
        with self._guard():
            files, self._files = self._files, {}
            for file in files.values():
                file.close()

    def _file(self, name):
        if name not in self._files:
            self._files[name] = _EventFile(self.directory / name)
        return self._files[name]

    def _pictures(self):
        """PNG pictures (decoded, `(height, width, 4)` uint8) of the attention of the
        first `PICTURES` distinct validation sources."""
        config = self.parts.config
        if self._translator is None:
            self._translator = Translator(
                self.parts.model, self.parts.source_tokenizer, self.parts.target_tokenizer,
                dataclasses.replace(
                    config.decoding, beam_size=config.training.eval_beam_size, n_best=1
                ),
                source_end=config.data.source_end,
            )
        sources, _ = self.parts.splits.valid.references()
        pictures = []
        for translation in self._translator.translate(sources[:PICTURES]):
            best = translation.hypotheses[0]
            png, _ = self.draw_attention(
                translation.source_tokens, list(best.tokens), best.weights,
                title=f"{translation.source}\n→ {best.text}",
            )
            pictures.append(tf.io.decode_png(png, channels=4))
        return pictures

    @contextlib.contextmanager
    def _guard(self):
        """Within it, a failure is reported (the first one only) and the run goes on."""
        try:
            yield
        except Exception as error:  # noqa: BLE001  A write fails in many ways.
            if self.active:
                self._fail(error)

    def _fail(self, error):
        """Report the first failure, then write no more events."""
        reason = first_line(error)
        if not isinstance(error, EventsLost):
            reason = clipped(reason)
        self.active = False
        files, self._files = self._files, {}
        for file in files.values():
            with contextlib.suppress(Exception):  # it failed already: nothing more to do
                file.close()
        message = (
            f"TensorBoard events are no longer written to {self.directory} ({reason}); "
            "training goes on, and metrics.jsonl keeps every evaluation"
        )
        self.progress.message(message)
        with contextlib.suppress(OSError):
            self.parts.run.log(message)


class EventsLost(Exception):
    """Events that TensorBoard's writer took but did not get into its file."""


class _EventFile:
    """The event file this process appends to in one folder, and the steps it may write.

    TensorBoard's writer drops what it cannot write (a full disk) without a word, so
    each flush reads the file's new records back and counts them against the events
    written since the last one.

    Args:
        directory: the folder (`RUN/events/train` or `.../valid`); created if missing.
    """

    def __init__(self, directory):
        for folder in (directory.parent, directory):  # RUN/events, RUN/events/NAME
            if folder.is_symlink():
                raise link_refused(folder)  # TensorFlow's writer would write through it
        directory.mkdir(parents=True, exist_ok=True)
        before = set(directory.glob(_PATTERN))
        # The steps the folder holds already (from earlier processes) are not written again.
        self.last_step = last_written_step(directory)
        self.writer = tf.summary.create_file_writer(
            str(directory), max_queue=1000, flush_millis=FLUSH_MILLIS
        )
        self.writer.flush()
        [self.path] = set(directory.glob(_PATTERN)) - before
        self.offset, self.pending = 0, 1  # the file-version record that opens the file
        self.flush()

    def scalars(self, step, values):
        """Write `{tag: value}` at `step`; False (nothing written) if the files hold it."""
        if step <= self.last_step:
            return False
        with self.writer.as_default(step=step):
            for tag, value in values.items():
                tf.summary.scalar(tag, value)
        self.pending += len(values)
        self.last_step = step
        return True

    def image(self, step, tag, picture):
        """Write an image, uint8 `(height, width, channels)`, at `step`."""
        with self.writer.as_default(step=step):
            tf.summary.image(tag, picture[None])
        self.pending += 1

    def flush(self):
        """Flush the writer; raise `EventsLost` if the file misses any event."""
        self.writer.flush()
        found = 0
        for _, offset in _records(self.path, self.offset):
            found, self.offset = found + 1, offset
        if found < self.pending:
            raise EventsLost(
                f"{self.pending - found} of {self.pending} events did not reach "
                f"{self.path.parent.name}/{self.path.name}; the disk may be full"
            )
        self.pending = 0

    def close(self):
        self.flush()
        self.writer.close()


class _Window:
    """The training steps since the last write: their loss per token and tokens/s.

    The clock starts when the window's first step has ended, so its rate counts the
    tokens of the steps after that one (a step's start is not seen here).
    """

    def __init__(self):
        self.restart()

    def restart(self):
        self.loss_sum, self.loss_tokens = 0.0, 0
        self.timed_tokens, self.started = 0, None

    def add(self, loss, tokens):
        self.loss_sum += loss * tokens
        self.loss_tokens += tokens
        if self.started is None:
            self.started = time.monotonic()
        else:
            self.timed_tokens += tokens

    def take(self):
        """`(mean loss per token, target tokens per second or None after one step)`;
        the next window starts now."""
        now = time.monotonic()
        loss = self.loss_sum / max(self.loss_tokens, 1)
        rate = self.timed_tokens / max(now - self.started, 1e-9) if self.timed_tokens else None
        self.restart()
        self.started = now
        return loss, rate


_PATTERN = "events.out.tfevents.*"


def last_written_step(directory):
    """The largest step of the summaries in `directory`'s event files, or -1.

    A record cut short (a killed process, a full disk) ends its file.
    """
    last = -1
    for path in sorted(directory.glob(_PATTERN)):
        for record, _ in _records(path):
            try:
                event = tf.compat.v1.Event.FromString(record)
            except DecodeError:
                break
            if event.HasField("summary"):
                last = max(last, event.step)
    return last


def _records(path, offset=0):
    """`(record, offset after it)` of each complete record of a TFRecord file from
    `offset` on; a record is its length (uint64), its CRC, its data and the data's CRC."""
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        stream.seek(offset)
        while True:
            header = stream.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            # A length past the end: the record was cut short (or the header damaged).
            if offset + 16 + length > size:
                return
            data = stream.read(length)
            stream.read(4)
            offset += 16 + length
            yield data, offset
