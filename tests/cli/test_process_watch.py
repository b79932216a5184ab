"""`process_watch` waits while a process works and fails one that hangs: tiny Python
subprocesses that sleep, spin or work, with limits of a second."""

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from process_watch import Hang, run, sample, stat_fields, wait_until

# A parent that starts a child sleeping for ten minutes, names it, and waits for it.
SLEEPING_CHILD = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(child.pid, flush=True)
    print(f"waiting for my child {child.pid}", file=sys.stderr, flush=True)
    child.wait()
""")


def alive(pid):
    try:
        return stat_fields(f"/proc/{pid}/stat")[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def python(code, **limits):
    return run([sys.executable, "-c", code], **limits)


def test_a_sleeping_process_tree_is_a_hang_and_is_killed_whole():
    with pytest.raises(Hang) as hang:
        python(SLEEPING_CHILD, stall_seconds=1)
    message = str(hang.value)
    assert "stalled" in message
    child = int(re.search(r"waiting for my child (\d+)\n$", message).group(1))
    # SIGKILL is delivered at once but takes effect when the child next runs: on a busy
    # machine that can be a moment after `run` returns.
    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_a_spinning_process_is_a_hang():
    with pytest.raises(Hang, match="used more than 0.2 s of CPU"):
        python("while True: pass", cpu_seconds=0.2)


def test_a_process_that_works_longer_than_the_stall_limit_is_waited_for():
    # About a second of CPU, five times the stall limit, then an answer.
    result = python(textwrap.dedent("""
        import time
        start = time.process_time()
        while time.process_time() - start < 1.0:
            pass
        print("done")
    """), stall_seconds=0.2)
    assert result.returncode == 0 and result.stdout == "done\n"


def test_input_output_and_exit_code_are_those_of_subprocess_run():
    code = "import sys; data = sys.stdin.read(); print(data.upper()); sys.exit(3)"
    words = "x" * 200_000  # more than a pipe holds: sent over several ticks
    result = python(code, input=words)
    expected = subprocess.run([sys.executable, "-c", code], input=words,
                              capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (
        expected.returncode, expected.stdout, expected.stderr)
    assert result.returncode == 3 and result.stdout == words.upper() + "\n"


def test_waiting_for_a_condition_fails_on_a_hang_and_on_an_early_end(tmp_path):
    sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with pytest.raises(Hang, match="stalled"):
            wait_until(lambda: False, sleeping, stall_seconds=1)
        assert sleeping.poll() == -9  # killed
    finally:
        sleeping.kill()
        sleeping.wait()
    ended = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('gone')"],
                             stderr=subprocess.PIPE, text=True)
    with pytest.raises(AssertionError, match="the process ended first:\ngone"):
        wait_until(lambda: False, ended)
    # A condition that comes true ends the wait while the process still works.
    marker = tmp_path / "marker"
    writer = subprocess.Popen([sys.executable, "-c",
                               f"import time; open({str(marker)!r}, 'w'); time.sleep(600)"])
    try:
        wait_until(marker.exists, writer, stall_seconds=60)
        assert writer.poll() is None
    finally:
        writer.kill()
        writer.wait()


def test_the_sample_covers_children_and_their_cpu():
    process = subprocess.Popen([sys.executable, "-c", SLEEPING_CHILD],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        child = int(process.stdout.readline())
        pids, cpu_ticks, _ = sample(process.pid)
        assert sorted(pids) == sorted([process.pid, child])
        assert cpu_ticks > 0  # two Pythons started
    finally:
        for pid in sample(process.pid)[0]:
            os.kill(pid, 9)
        process.wait()
