"""What `attncli train` shows on stderr while it works.

On a terminal: a spinner naming the stage the run is in until training starts, then a
bar for the epochs and one for the steps of the current epoch (loss, target tokens per
second, time left). When stderr is not a terminal (`attncli train
2>log`, a job scheduler): plain lines instead, one per stage (reading the data,
learning the vocabularies, building the model, training) and one every
`training.log_every` batches (loss, target tokens per second, time elapsed), as Joey
NMT's `logging_freq` does. Either way, after each evaluation one row of a table that
grows: train loss, validation loss and the task's metrics.
"""

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

_METRIC_COLUMNS = {
    "bleu": ("BLEU", "{:.2f}"),
    "chrf": ("chrF", "{:.2f}"),
    "per": ("PER %", "{:.2f}"),
    "wer": ("WER %", "{:.2f}"),
}


class TrainingDisplay:
    """Rich progress for the training loop (the `progress` argument of `Trainer`).

    The step bar has no total during the first epoch (its length is known once it
    has been counted), then a total and a time left.

    Args:
        console: a `rich.console.Console`. Defaults to one on stderr.
        log_every: int >= 1, batches between two plain progress lines when the
            console is not a terminal. Defaults to 100.
    """

    def __init__(self, console=None, log_every=100):
        self.console = console or Console(stderr=True)
        self.plain = not self.console.is_terminal
        self.log_every = log_every
        self.started = time.monotonic()
        self.epoch = None
        self.batch = 0
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.status = None  # the spinner of the stage before training, on a terminal
        self.steps_per_epoch = None
        self.epoch_task = None
        self.step_task = None
        self.rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._end_stage()
        if self.epoch_task is not None and not self.plain:
            self.progress.stop()

    def stage(self, text):
        """A stage of the run begins (`"reading the data"`): a line when not a terminal,
        else the text of a spinner, until the next stage or the first epoch."""
        if self.plain:
            self._line(text)
        elif self.status is None:
            self.status = self.console.status(text)
            self.status.start()
        else:
            self.status.update(text)

    def _end_stage(self):
        if self.status is not None:
            self.status.stop()
            self.status = None

    def _line(self, text):
        elapsed = round(time.monotonic() - self.started)
        minutes, seconds = divmod(elapsed, 60)
        self.message(f"[{minutes // 60}:{minutes % 60:02d}:{seconds:02d}] {text}")

    def start_epoch(self, epoch, total, done_steps):
        self.epoch, self.batch = epoch, done_steps
        if self.plain:
            start = f" from batch {done_steps + 1}" if done_steps else ""
            self._line(f"training epoch {epoch} of {total}{start}")
            return
        self._end_stage()
        if self.epoch_task is None:
            self.progress.start()
            self.epoch_task = self.progress.add_task(
                "epochs", total=total, completed=epoch - 1, status=""
            )
        if self.step_task is not None:
            self.progress.remove_task(self.step_task)
        self.step_task = self.progress.add_task(
            f"epoch {epoch}", total=self.steps_per_epoch, completed=done_steps, status=""
        )

    def step(self, loss, tokens_per_second):
        self.batch += 1
        if self.plain:
            if self.batch % self.log_every == 0:
                of = f"/{self.steps_per_epoch}" if self.steps_per_epoch else ""
                self._line(f"epoch {self.epoch} batch {self.batch}{of}: loss {loss:.3f}, "
                           f"{tokens_per_second:,.0f} target tokens/s")
            return
        self.progress.update(
            self.step_task,
            advance=1,
            status=f"loss {loss:.3f} · {tokens_per_second:,.0f} tok/s",
        )

    def end_epoch(self, record):
        if self.steps_per_epoch is None and record["complete_epoch"]:
            self.steps_per_epoch = self.batch
        if record["complete_epoch"] and not self.plain:
            self.progress.advance(self.epoch_task)
        self.rows.append(record)
        self.console.print(self.table(self.rows[-1:], header=len(self.rows) == 1))

    def message(self, text):
        self.console.print(text, highlight=False, markup=False)

    @staticmethod
    def table(records, header=True):
        """A table of evaluation records (one row each)."""
        table = Table(show_header=header, box=None, pad_edge=False)
        table.add_column("epoch", justify="right", width=5)
        table.add_column("step", justify="right", width=7)
        table.add_column("train loss", justify="right", width=10)
        table.add_column("valid loss", justify="right", width=10)
        metrics = [key for key in _METRIC_COLUMNS if records and key in records[0]]
        for key in metrics:
            table.add_column(_METRIC_COLUMNS[key][0], justify="right", width=7)
        table.add_column("minutes", justify="right", width=7)
        table.add_column("", width=4)
        for record in records:
            table.add_row(
                str(record["epoch"]) + ("" if record["complete_epoch"] else "*"),
                str(record["step"]),
                f"{record['train_loss']:.3f}",
                f"{record['valid_loss']:.3f}",
                *(_METRIC_COLUMNS[key][1].format(record[key]) for key in metrics),
                f"{record['minutes']:.1f}",
                "best" if record["best"] else "",
            )
        return table
