"""Requests merged into batches, translated by one worker thread.

The event loop hands each request's texts to `Batcher.submit` and awaits a future; one
worker thread does everything else, so the loop never waits on TensorFlow (which
releases the GIL while it computes):

1. Intake: the texts of the requests that arrived are measured (`measure`, one call per
   key for all its requests: each text's cost, or a request's refusal), then queued in
   the group of requests with the same key (model and search settings: only they can
   share a batch). A request whose client left (its future cancelled) is dropped there
   or before the next batch: its texts not yet batched are never computed.
2. Waiting: the groups take turns, one batch each, in the order they joined the turns:
   a group joins when its first request arrives, and again when its batch ends (so a
   request that arrived while a batch of other settings ran goes before that group's
   next batch, and a client sending one text after another cannot keep a large
   request waiting either). A request of one text waits at most one batch of each
   other group, whatever their size. While the group's texts cost less than the
   budget, it waits for more: until `batch_wait` after its oldest request arrived; or,
   right after a batch of its own, until as many requests arrived since that batch
   began as it answered (its clients, answered, are likely to send again), for
   `RETURN_WAIT` at most. Without this, clients that each wait for their answer before
   sending again split into two halves served in turn, by batches half as large (and a
   search of a small batch costs more per sentence). A group whose turn comes after
   another's batch does not wait for that batch's clients: they are not its own (a
   request of 500 texts answered does not come back 500 times).
3. Batching, fairly: the group's requests give chunks of at most `chunk_texts` texts in
   turn (round robin: a request that gave a chunk goes to the back) until the batch's
   cost reaches `batch_tokens`. A request of 500 texts gives one chunk per turn, so
   fifty requests of one text each are in the first batch beside it.
4. Each batch is one `run(key, texts)`; its results go back to their requests, which
   complete when their last chunk is done.

`call(function)` runs any other TensorFlow work (an attention view) on the same thread,
before the next batch.

The queue holds at most `max_queue` texts (waiting or being translated); `submit`
raises `QueueFull` rather than pass it. `close` stops taking requests, finishes those
queued and ends the thread.
"""

import asyncio
import collections
import threading
import time
from typing import NamedTuple


#: Seconds the batch after another waits for the clients that batch answered to send
#: again (see the module docstring).
RETURN_WAIT = 0.02


class QueueFull(Exception):
    """The queue has no room for a request's texts."""


class _Batch(NamedTuple):
    """What the worker remembers of the last batch."""

    key: object
    submitted: int  # requests submitted before it began
    answered: int  # requests it completed
    ended: float  # time.monotonic()


class _Job:
    """One request's texts, the costs of each, and where its results go."""

    def __init__(self, key, texts, loop):
        self.key = key
        self.texts = texts
        self.costs = None
        self.next = 0  # the first text not yet batched
        self.results = [None] * len(texts)
        self.remaining = len(texts)
        self.future = loop.create_future()
        self.loop = loop
        self.arrived = time.monotonic()
        self.finished = False


class Batcher:
    """Merges requests into batches and runs them on one worker thread.

    Args:
        measure: `measure(key, requests)`, with `requests` a list of lists of texts,
            -> for each request, a list of one cost per text (source tokens times the
            beam), or an exception that refuses it (its future raises it); called on
            the worker thread.
        run: `run(key, texts)` -> one result per text, in order, on the worker thread.
        batch_tokens: a batch's budget: the sum of its texts' costs. A batch's first
            text is taken whatever its cost.
        batch_wait: seconds a batch waits for more texts after its oldest arrived.
        max_queue: texts waiting or being translated, all requests together.
        chunk_texts: texts a request gives a batch per turn. Defaults to 16.
    """

    def __init__(self, *, measure, run, batch_tokens, batch_wait, max_queue, chunk_texts=16):
        self.measure = measure
        self.run = run
        self.batch_tokens = batch_tokens
        self.batch_wait = batch_wait
        self.max_queue = max_queue
        self.chunk_texts = chunk_texts
        self._ready = threading.Condition()
        self._intake = []  # jobs submitted, not yet measured (shared with the loop)
        self._calls = []  # (function, future, loop) (shared with the loop)
        self._pending = 0  # texts and calls not yet answered (shared with the loop)
        self._submitted = 0  # requests submitted so far (shared with the loop)
        self._closing = False
        self._groups = {}  # key -> deque of measured jobs (worker thread only)
        # key -> when a group of self._groups joined the turns: when its first request
        # arrived, then when its last batch ended (worker thread only)
        self._turn = {}
        self._last = None  # the last `_Batch` (worker thread only)
        self._thread = threading.Thread(target=self._work, name="attncli-batcher", daemon=True)

    def start(self):
        self._thread.start()

    @property
    def pending(self):
        """Texts (and calls) waiting or being worked on."""
        return self._pending

    def submit(self, key, texts):
        """A future of the results of `texts` (one per text, in order), from the loop.

        Raises:
            QueueFull: when the queue has no room for them.
        """
        job = _Job(key, list(texts), asyncio.get_running_loop())
        if not job.texts:
            job.future.set_result([])
            return job.future
        with self._ready:
            self._reserve(len(job.texts))
            self._submitted += 1
            self._intake.append(job)
            self._ready.notify()
        return job.future

    def call(self, function):
        """A future of `function()`, run on the worker thread before the next batch."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._ready:
            self._reserve(1)
            self._calls.append((function, future, loop))
            self._ready.notify()
        return future

    def close(self, wait=True):
        """Finish what was submitted, then end the worker thread; with `wait` False, tell
        the thread to end without waiting for it (a daemon, it ends with the process)."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        if wait and self._thread.is_alive():
            self._thread.join()

    def _reserve(self, count):
        if self._closing:
            raise QueueFull("the server is stopping")
        if self._pending + count > self.max_queue:
            raise QueueFull(
                f"the queue is full ({self._pending} of {self.max_queue} texts waiting)"
            )
        self._pending += count

    def _release(self, count):
        with self._ready:
            self._pending -= count

    # --- the worker thread -------------------------------------------------------------

    def _work(self):
        while True:
            with self._ready:
                while not (self._intake or self._calls or self._groups or self._closing):
                    self._ready.wait()
                if self._closing and not (self._intake or self._calls or self._groups):
                    return
                intake, self._intake = self._intake, []
                calls, self._calls = self._calls, []
            self._admit(intake)
            for function, future, loop in calls:
                self._run_call(function, future, loop)
            parts = self._next_batch()
            if parts:
                key, submitted = parts[0][0].key, self._submitted
                answered = self._run_batch(parts)
                self._last = _Batch(key, submitted, answered, time.monotonic())
                self._turn[key] = self._last.ended  # to the back

    def _admit(self, intake):
        """Measures the jobs of `intake`, one call per key, and queues them by key."""
        by_key = {}
        for job in intake:
            by_key.setdefault(job.key, []).append(job)
        for key, jobs in by_key.items():
            try:
                measured = self.measure(key, [job.texts for job in jobs])
            except Exception as error:  # noqa: BLE001  a failure: each request's
                measured = [error] * len(jobs)
            for job, costs in zip(jobs, measured):
                if isinstance(costs, Exception):
                    self._fail(job, costs)
                else:
                    job.costs = costs
                    if key not in self._groups:
                        self._groups[key] = collections.deque()
                        self._turn[key] = job.arrived
                    self._groups[key].append(job)

    def _run_call(self, function, future, loop):
        try:
            outcome, error = function(), None
        except Exception as exception:  # noqa: BLE001  the caller's to report
            outcome, error = None, exception
        self._release(1)
        loop.call_soon_threadsafe(_settle, future, outcome, error)

    def _next_batch(self):
        """The parts `(job, start, end)` of the next batch, or None to wait for more."""
        for key, jobs in list(self._groups.items()):
            self._drop_finished(jobs)
            if not jobs:
                del self._groups[key]
                del self._turn[key]
        if not self._groups:
            return None
        key = min(self._groups, key=self._turn.__getitem__)  # whose turn it is
        jobs = self._groups[key]
        waiting = sum(sum(job.costs[job.next:]) for job in jobs)
        with self._ready:
            if self._intake or self._calls:
                return None  # admit them first: they may join this batch
            now = time.monotonic()
            last = self._last
            if waiting >= self.batch_tokens or self._closing:
                deadline = now
            elif last is not None and last.key == key and now < last.ended + RETURN_WAIT:
                # Right after its own batch: wait for the clients it answered, unless back.
                returned = self._submitted - last.submitted >= last.answered
                deadline = now if returned else last.ended + RETURN_WAIT
            else:
                deadline = jobs[0].arrived + self.batch_wait
            if now < deadline:
                self._ready.wait(deadline - now)
                return None
        return self._take(jobs)

    def _drop_finished(self, jobs):
        """Drops the jobs that failed or whose request was cancelled (its client left)."""
        for job in list(jobs):
            if job.finished or job.future.cancelled():
                jobs.remove(job)
                if not job.finished:
                    job.finished = True
                    self._release(len(job.texts))

    def _take(self, jobs):
        """A batch from `jobs`: one chunk per job in turn, within the budget."""
        parts, cost = [], 0
        while jobs and (not parts or cost < self.batch_tokens):
            job = jobs.popleft()
            start = end = job.next
            while end < len(job.texts) and end - start < self.chunk_texts and (
                not parts and end == start or cost + job.costs[end] <= self.batch_tokens
            ):
                cost += job.costs[end]
                end += 1
            if end == start:  # its next text does not fit: the batch is full
                jobs.appendleft(job)
                break
            job.next = end
            parts.append((job, start, end))
            if end < len(job.texts):
                jobs.append(job)
        return parts

    def _run_batch(self, parts):
        """Runs the batch of `parts`; the number of requests it answered (completed or
        failed)."""
        key = parts[0][0].key
        texts = [text for job, start, end in parts for text in job.texts[start:end]]
        try:
            results = self.run(key, texts)
        except Exception as error:  # noqa: BLE001  reported to each request of the batch
            unanswered = list(dict.fromkeys(job for job, _, _ in parts if not job.finished))
            for job in unanswered:
                self._fail(job, error)
            return len(unanswered)
        offset, answered = 0, 0
        for job, start, end in parts:
            offset, done = offset + end - start, results[offset : offset + end - start]
            if job.finished:
                continue
            job.results[start:end] = done
            job.remaining -= end - start
            if job.remaining == 0:
                job.finished = True
                answered += 1
                self._release(len(job.texts))
                job.loop.call_soon_threadsafe(_settle, job.future, job.results, None)
        return answered

    def _fail(self, job, error):
        if job.finished:
            return
        job.finished = True
        self._release(len(job.texts))
        job.loop.call_soon_threadsafe(_settle, job.future, None, error)


def _settle(future, outcome, error):
    """Completes `future` on its loop, unless its request was cancelled meanwhile."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(outcome)
