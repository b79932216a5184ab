"""When training ends: the epochs trained, the time budget or the patience spent, or a
signal received (SIGINT, SIGTERM), which the loop checks between steps."""

import signal
import time


class SignalFlag:
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


class Stopping:
    """When training ends: the epochs trained, the time budget or the patience spent,
    or a signal received.

    Args:
        training: the `LoopConfig`.
        position: the `TrainingPosition`.
        workers: the `Workers`; a decision to end the run is agreed by all of them.
        stop_metric: the `StopMetric` that counts patience.
        signals: the `SignalFlag` that holds a signal received.
        started: `time.monotonic()` when training began, earlier sessions included.
    """

    def __init__(self, training, position, workers, stop_metric, signals, started):
        self.training = training
        self.position = position
        self.workers = workers
        self.stop_metric = stop_metric
        self.signals = signals
        self.started = started

    def elapsed(self, now=None):
        """Seconds of training so far (at `now`, a `time.monotonic()`, if given)."""
        return (time.monotonic() if now is None else now) - self.started

    def reason(self):
        """Why training is over (epochs, time budget or patience spent), or None."""
        training = self.training
        if int(self.position.epoch.numpy()) >= training.epochs:
            return f"{training.epochs} epochs trained"
        if self.workers.agree(self.out_of_time()):
            return f"the time budget of {training.max_minutes:g} minutes is spent"
        if self.patience_spent():
            return (
                f"stopped early: no better validation {self.stop_metric.name} for "
                f"{training.patience} evaluations"
            )
        return None

    def patience_spent(self):
        """Whether the last `training.patience` evaluations found no better model."""
        patience = self.training.patience
        return bool(patience) and int(self.position.stale_evaluations.numpy()) >= patience

    def request(self):
        """The signal received (its number), 1 when time is up, else 0."""
        return self.signals.received or int(self.out_of_time())

    def out_of_time(self):
        limit = self.training.max_minutes
        return limit is not None and self.elapsed() >= 60.0 * limit
