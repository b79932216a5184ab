"""A `Trainer` progress for tests: it keeps every step's loss and every epoch record."""

import sys


class Recorder:
    """Keeps `losses` (one per step), `records` (one per evaluation) and `messages`.

    Args:
        echo: print the trainer's messages on stderr. Defaults to False.
    """

    def __init__(self, echo=False):
        self.echo = echo
        self.losses, self.records, self.messages = [], [], []

    def start_epoch(self, epoch, total, steps):
        pass

    def step(self, loss, tokens_per_second):
        self.losses.append(loss)

    def end_epoch(self, record):
        self.records.append(record)

    def message(self, text):
        self.messages.append(text)
        if self.echo:
            print(text, file=sys.stderr)
