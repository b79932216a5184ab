"""Two trainings side by side under one clock, with their kept models taken at marks.

Each side's clock is its *training time*: wall time from the moment its log says training
has begun (after its imports, data reading and model building) until it stops, summed
over the sessions of a run that was stopped and started again. At each mark (30, 60 and
120 minutes by default) the side's kept model, the best its own validation has chosen so
far, is copied aside; at the budget a side that has no time budget of its own is sent
its interrupt signal. When a side's process ends, its final kept model stands for every
mark not yet taken.

The state (clocks, marks taken, CPU seconds and peak RSS of every process, exit codes)
is written to `WORK/state.json` every second, so the same command run again after an
interruption resumes both sides from their checkpoints and keeps the marks already
taken. An interrupted supervisor (Ctrl-C, SIGTERM) first stops both sides the way each
saves its work, then exits.

CPU seconds and peak RSS come from `wait4` on each training process (user + system time
of all its threads; `ru_maxrss`, its own peak). The supervisor alone reaps its children,
so it signals them with `os.kill` (`Popen.send_signal` would reap an ended one first,
and its usage would be lost).
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from attncli.files import write_json_atomically

POLL_SECONDS = 1.0
#: How long a side may take to save its work after being asked to stop.
STOP_GRACE_SECONDS = 300


class Side:
    """One toolkit's training as the supervisor drives it (a subclass per toolkit).

    Args:
        name: the side's name in the state and the table, e.g. `"attncli"`.
        core: the CPU the side's processes are pinned to (`taskset -c`).
        directory: the side's folder under the work directory.

    A subclass gives:
        training_begun: a compiled regex that matches the log line printed when training
            starts.
        budget_signal: the signal that ends training at the budget, or None when the
            side stops by its own time budget.
        interrupt_signal: the signal that makes it save its work and stop early.
        command(segment, resume): the argv of session `segment` (1, 2, ...), `resume`
            True when an earlier session left a checkpoint to continue from.
        take_kept_model(destination): copy the kept model into the folder
            `destination`; False if there is none yet.
    """

    training_begun = None
    budget_signal = None
    interrupt_signal = signal.SIGTERM

    def __init__(self, name, core, directory):
        self.name = name
        self.core = core
        self.directory = Path(directory)

    @property
    def log_path(self):
        return self.directory / "train.out"

    def command(self, segment, resume):
        raise NotImplementedError

    def take_kept_model(self, destination):
        raise NotImplementedError


class _Running:
    """A side's process in this session: its clock and what its log has shown."""

    def __init__(self, side, process, log_offset, seconds_before):
        self.side = side
        self.process = process
        self.log_offset = log_offset
        self.seconds_before = seconds_before
        self.begun = None  # time.monotonic() when its training began
        self.budget_sent = False
        self.log_text = ""

    def seconds(self, now):
        """Training seconds so far, earlier sessions included."""
        return self.seconds_before + (0.0 if self.begun is None else now - self.begun)

    def read_log(self, now):
        with open(self.side.log_path, "rb") as log:
            log.seek(self.log_offset)
            self.log_text = log.read().decode("utf-8", "replace")
        if self.begun is None and self.side.training_begun.search(self.log_text):
            self.begun = now


class Supervisor:
    """Runs `sides` together for `budget` minutes of training each, taking their kept
    models at `marks` (minutes, the budget among them).

    Args:
        sides: the `Side`s.
        work: the work directory (the state file and the marks' folders).
        budget: minutes of training per side.
        marks: minutes at which each side's kept model is taken.
    """

    def __init__(self, sides, work, budget, marks):
        self.sides = sides
        self.work = Path(work)
        self.budget = budget
        self.marks = sorted(set(marks) | {budget})
        self.state_path = self.work / "state.json"
        self.state = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        for side in sides:
            self.state.setdefault(side.name, {
                "seconds": 0.0, "sessions": [], "finished": False, "marks": {},
            })
        self._stop_requested = None

    def mark_folder(self, mark, side):
        return self.work / "marks" / f"{mark:g}" / side.name

    def run(self):
        """Train every unfinished side to the budget (or its own end); returns the state."""
        pending = [side for side in self.sides if not self.state[side.name]["finished"]]
        if not pending:
            return self.state
        previous = {number: signal.signal(number, self._request_stop)
                    for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            running = [self._start(side) for side in pending]
            while running:
                time.sleep(POLL_SECONDS)
                now = time.monotonic()
                if self._stop_requested:
                    self._stop_all(running)
                    raise SystemExit(128 + self._stop_requested)
                for entry in list(running):
                    if self._follow(entry, now):
                        running.remove(entry)
                        self._check_exit(entry, running)
                self._save()
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
            self._save()
        return self.state

    def _request_stop(self, number, frame):
        self._stop_requested = self._stop_requested or number

    def _start(self, side):
        record = self.state[side.name]
        side.directory.mkdir(parents=True, exist_ok=True)
        segment = len(record["sessions"]) + 1
        command = side.command(segment, resume=segment > 1)
        log_offset = side.log_path.stat().st_size if side.log_path.exists() else 0
        log = open(side.log_path, "ab")
        log.write(f"\n=== session {segment}: {' '.join(map(str, command))}\n".encode())
        log.flush()
        process = subprocess.Popen(
            ["taskset", "-c", str(side.core), *map(str, command)], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        record["sessions"].append({"command": list(map(str, command)), "started": time.time()})
        self._save()
        return _Running(side, process, log_offset, record["seconds"])

    def _follow(self, entry, now):
        """Read the side's log, take marks that are due, send the budget signal; True
        when its process has ended (its usage then recorded)."""
        side, record = entry.side, self.state[entry.side.name]
        entry.read_log(now)
        seconds = entry.seconds(now)
        for mark in self.marks:
            if mark < self.budget and seconds >= 60.0 * mark:
                self._take(side, mark, seconds)
        if side.budget_signal is not None and seconds >= 60.0 * self.budget \
                and not entry.budget_sent:
            os.kill(entry.process.pid, side.budget_signal)
            entry.budget_sent = True
        pid, status, usage = os.wait4(entry.process.pid, os.WNOHANG)
        if pid == 0:
            return False
        entry.process.returncode = os.waitstatus_to_exitcode(status)
        session = record["sessions"][-1]
        session.update(
            ended=time.time(), exit_code=entry.process.returncode,
            cpu_seconds=usage.ru_utime + usage.ru_stime, peak_rss=usage.ru_maxrss * 1024,
            training_seconds=seconds - record["seconds"],
        )
        record["seconds"] = seconds
        return True

    def _check_exit(self, entry, running):
        """Mark the side finished (its final kept model at every mark left), or stop the
        other sides and end the run when it failed."""
        side, record = entry.side, self.state[entry.side.name]
        if entry.process.returncode != 0:
            self._stop_all(running)
            raise SystemExit(f"{side.name} exited with {entry.process.returncode}; see "
                             f"{side.log_path} (the same command resumes the run)")
        record["finished"] = True
        for mark in self.marks:
            self._take(side, mark, record["seconds"])

    def _take(self, side, mark, seconds):
        """Copy the side's kept model for `mark` unless taken already."""
        marks = self.state[side.name]["marks"]
        key = f"{mark:g}"
        if key in marks:
            return
        folder = self.mark_folder(mark, side)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        kept = side.take_kept_model(folder)
        marks[key] = {"seconds": seconds, "model": str(folder) if kept else None}

    def _stop_all(self, running):
        """Ask every running side to save its work and stop; wait for them."""
        for entry in running:
            if entry.process.returncode is None:
                entry.read_log(time.monotonic())  # its clock runs until now
                os.kill(entry.process.pid, entry.side.interrupt_signal)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for entry in list(running):
            while entry.process.returncode is None:
                if time.monotonic() > deadline:
                    os.kill(entry.process.pid, signal.SIGKILL)
                time.sleep(POLL_SECONDS)
                self._follow(entry, time.monotonic())
        self._save()

    def _save(self):
        self.work.mkdir(parents=True, exist_ok=True)
        write_json_atomically(self.state_path, self.state)
