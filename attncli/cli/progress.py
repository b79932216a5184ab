"""What `attncli train` shows on stderr while it works.

A bar for the epochs and one for the steps of the current epoch (loss, target
tokens per second, time left), and after each evaluation one row of a table that
grows: train loss, validation loss and the task's metrics.
"""

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
    """

    def __init__(self, console=None):
        self.console = console or Console(stderr=True)
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
        self.steps_per_epoch = None
        self.epoch_task = None
        self.step_task = None
        self.rows = []

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc_info):
        self.progress.stop()

    def start_epoch(self, epoch, total, done_steps):
        if self.epoch_task is None:
            self.epoch_task = self.progress.add_task(
                "epochs", total=total, completed=epoch - 1, status=""
            )
        if self.step_task is not None:
            self.progress.remove_task(self.step_task)
        self.step_task = self.progress.add_task(
            f"epoch {epoch}", total=self.steps_per_epoch, completed=done_steps, status=""
        )

    def step(self, loss, tokens_per_second):
        self.progress.update(
            self.step_task,
            advance=1,
            status=f"loss {loss:.3f} · {tokens_per_second:,.0f} tok/s",
        )

    def end_epoch(self, record):
        if self.step_task is not None and self.steps_per_epoch is None and record["complete_epoch"]:
            self.steps_per_epoch = int(self.progress.tasks[self.step_task].completed)
        if record["complete_epoch"]:
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
