"""Waiting for a subprocess as long as it works, instead of for a fixed number of seconds.

A fixed timeout measures the machine as much as the process: on a loaded machine a test
whose processes need 50 s of CPU took ten minutes and failed its `timeout=600`, with
nothing wrong (issue 42). Here a test waits while the process, or any process under it,
works or waits for a core, and fails it when it hangs:

- stalled: for `STALL_SECONDS` of wall time no process of the tree used CPU time, and no
  thread of theirs was runnable (waiting for a core: a busy machine) or in uninterruptible
  sleep (waiting for a disk). A deadlock, a read that never returns, a forgotten sleep:
  none of the commands the tests run sits that long without one or the other.
- spinning: the tree used more than `CPU_SECONDS` of CPU time (user + system, reaped
  children's included). CPU time is the work itself, so a busy machine reaches it no
  sooner; it grows a little with the load (TensorFlow's threads spin as they wait), and
  the heaviest tree of the suite (the g2p seeds test: two trainings and an ensemble's
  decoding) needs about 50 s of it.

Both are read from Linux's /proc each `TICK` seconds. On a hang the whole tree is killed
and `Hang`, an AssertionError, names the rule and ends with what the process wrote on
stderr. Processes that wait for each other (the workers of one training) are watched
together: one of them working is progress for all.
"""

import os
import signal
import subprocess
import time

STALL_SECONDS = 120.0
CPU_SECONDS = 600.0
TICK = 0.5  # between two samples of /proc
POLL = 0.05  # between two looks at a condition
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Hang(AssertionError):
    """A process that stalled or spun (see the module); the message says which."""


def stat_fields(path):
    """A /proc stat file's fields after the command name: state, ppid, ..."""
    with open(path) as stat:
        text = stat.read()
    return text[text.rindex(")") + 2:].split()


def children(pid, task):
    with open(f"/proc/{pid}/task/{task}/children") as listing:
        return [int(child) for child in listing.read().split()]


def sample(root):
    """`(pids, cpu_ticks, busy)` of the tree under `root` now: its processes, the clock
    ticks of CPU they and their reaped children used, and whether a thread of theirs is
    runnable (R) or in disk sleep (D)."""
    pids, cpu_ticks, busy, pending = [], 0, False, [root]
    while pending:
        pid = pending.pop()
        try:
            fields = stat_fields(f"/proc/{pid}/stat")
            tasks = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended in between
        pids.append(pid)
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), counted from the state.
        cpu_ticks += sum(int(ticks) for ticks in fields[11:15])
        for task in tasks:
            try:
                busy |= stat_fields(f"/proc/{pid}/task/{task}/stat")[0] in ("R", "D")
                pending += children(pid, task)
            except (FileNotFoundError, ProcessLookupError):
                continue
    return pids, cpu_ticks, busy


class Watch:
    """The progress of the trees of `processes` (those that wait for each other, as the
    workers of one training do, progress together), checked by `check()` each tick."""

    def __init__(self, processes, stall_seconds=STALL_SECONDS, cpu_seconds=CPU_SECONDS):
        self.processes = list(dict.fromkeys(processes))  # each once
        self.stall_seconds = stall_seconds
        self.cpu_seconds = cpu_seconds
        _, self.cpu_ticks, _ = self.sample()
        self.progressed = self.sampled = time.monotonic()

    def sample(self):
        samples = [sample(process.pid) for process in self.processes]
        return ([pid for pids, _, _ in samples for pid in pids],
                sum(cpu_ticks for _, cpu_ticks, _ in samples),
                any(busy for _, _, busy in samples))

    def check(self):
        """Kills the trees and raises `Hang` if they stalled or spun; returns otherwise
        (at once if they were sampled less than `TICK` seconds ago)."""
        now = time.monotonic()
        if now - self.sampled < TICK:
            return
        pids, cpu_ticks, busy = self.sample()
        self.sampled = now
        if busy or cpu_ticks != self.cpu_ticks:
            self.cpu_ticks, self.progressed = cpu_ticks, now
        if cpu_ticks > self.cpu_seconds * CLOCK_TICKS:
            problem = f"used more than {self.cpu_seconds:g} s of CPU (spinning?)"
        elif now - self.progressed > self.stall_seconds:
            problem = (f"used no CPU and waited for none for {self.stall_seconds:g} s "
                       "(stalled)")
        else:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise Hang(f"{' and '.join(str(process.args) for process in self.processes)} "
                   f"{problem}; killed. " + "".join(
                       f"\nThe stderr of pid {process.pid} ends:\n"
                       f"{(process.communicate()[1] or '')[-3000:]}"
                       for process in self.processes))


def communicate(process, input=None, *, together=(), **limits):
    """`process.communicate(input)`, waiting as long as the process, or any of the
    processes `together` with it, works (`limits`: `stall_seconds` and `cpu_seconds`,
    the module's by default)."""
    watch = Watch([process, *together], **limits)
    while True:
        try:
            return process.communicate(input, timeout=TICK)
        except subprocess.TimeoutExpired:
            input = None  # communicate goes on with what it has not sent yet
            watch.check()


def wait(process, **limits):
    """`process.wait()`, as long as the process works (for a process whose output a
    thread of the test reads)."""
    watch = Watch([process], **limits)
    while True:
        try:
            return process.wait(timeout=TICK)
        except subprocess.TimeoutExpired:
            watch.check()


def run(args, *, input=None, text=True, **popen):
    """`subprocess.run(args, input=input, capture_output=True, text=text, **popen)`,
    waiting as long as the process works (`stall_seconds` and `cpu_seconds` among the
    keywords go to `communicate`)."""
    limits = {name: popen.pop(name) for name in ("stall_seconds", "cpu_seconds")
              if name in popen}
    stdin = subprocess.PIPE if input is not None else None
    with subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=text, **popen) as process:
        stdout, stderr = communicate(process, input, **limits)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def wait_until(condition, *processes, **limits):
    """Polls `condition()` until it holds, while `processes` work; fails if one of them
    ends first (with its stderr) or they hang."""
    watch = Watch(processes, **limits)
    while not condition():
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(f"the process ended first:\n{process.communicate()[1]}")
        watch.check()
        time.sleep(POLL)
