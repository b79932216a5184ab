"""`attncli translate` answers lines as they arrive, and writes each batch when it is done.

Real processes (`python -m attncli translate`) on the session's tiny run
(`attncli_runs.trained`: `configs/tiny-test.yaml`, one epoch): a line sent down a pipe,
or typed at a terminal, is answered while the input is still open; a file's first
batches are in the output while the rest is translated, and Ctrl-C keeps them. What each
line must be answered with is `attncli translate`'s output for the lines as arguments,
run in this process (that is no test of a process).
"""

import os
import pty
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from attncli_runs import trained  # noqa: F401 (a fixture)
from process_watch import TICK, Watch, communicate, wait, wait_until
from typer.testing import CliRunner

from attncli.cli.app import app

REPO = Path(__file__).resolve().parents[2]
SENTENCES = ["Tengo un gato.", "", "¿Dónde está?", "Hace frío hoy."]

pytestmark = pytest.mark.slow
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


def translate(*args, cwd, **popen):
    return subprocess.Popen([sys.executable, "-m", "attncli", "translate", *map(str, args)],
                            cwd=cwd, env=ENV, **popen)


class Lines:
    """The lines of a process's stdout, read in a thread, each waited for as long as the
    process works (`process_watch`)."""

    def __init__(self, process):
        self.process = process
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream):
        for line in iter(stream.readline, b""):
            self.lines.put(line.decode("utf-8"))
        self.lines.put(None)

    def next(self):
        """The next line, None at the end."""
        watch = Watch([self.process])
        while True:
            try:
                return self.lines.get(timeout=TICK)
            except queue.Empty:
                watch.check()


@pytest.fixture(scope="module")
def run(trained):  # noqa: F811 (the fixture)
    """The session's tiny run (read only: the processes translate with it), and the
    translations of `SENTENCES` given as arguments."""
    result = CliRunner().invoke(app, ["translate", str(trained), *SENTENCES])
    assert result.exit_code == 0, result.output
    expected = result.stdout.split("\n")[:-1]
    assert len(expected) == len(SENTENCES) and expected[1] == ""
    return trained, dict(zip(SENTENCES, expected))


def test_a_line_down_a_pipe_is_answered_before_the_pipe_closes(run, tmp_path):
    tiny, expected = run
    process = translate(tiny, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
    try:
        output = Lines(process)
        for sentence in SENTENCES:
            process.stdin.write(sentence.encode("utf-8") + b"\n")
            process.stdin.flush()
            assert output.next() == expected[sentence] + "\n"
        assert process.poll() is None  # still reading: stdin is open
        process.stdin.close()
        assert output.next() is None
        assert wait(process) == 0
    finally:
        process.kill()


def test_a_line_typed_at_a_terminal_is_answered_at_once(run, tmp_path):
    tiny, expected = run
    terminal, terminal_side = pty.openpty()
    process = translate(tiny, cwd=tmp_path, stdin=terminal_side, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    os.close(terminal_side)
    try:
        output = Lines(process)
        os.write(terminal, "¿Dónde está?\n".encode("utf-8"))
        assert output.next() == expected["¿Dónde está?"] + "\n"
        os.write(terminal, b"Hace fr\xc3\xado hoy.\n")
        assert output.next() == expected["Hace frío hoy."] + "\n"
        os.write(terminal, b"\x04")  # Ctrl-D at the start of a line: the end of the input
        assert output.next() is None
        assert wait(process) == 0
        assert "Ctrl-D" in process.stderr.read().decode("utf-8")
    finally:
        process.kill()
        os.close(terminal)


def test_a_file_is_written_batch_by_batch_and_ctrl_c_keeps_what_was_written(run, tmp_path):
    tiny, expected = run
    count = 20000
    source = tmp_path / "input.txt"
    source.write_text("".join(SENTENCES[i % 4] + "\n" for i in range(count)), "utf-8")
    result = tmp_path / "output.txt"
    with result.open("wb") as stdout:
        # Ctrl-C as a terminal sends it: a test runner started in the background (`cmd &`
        # in a script) passes SIGINT on ignored, and Python then raises no
        # KeyboardInterrupt, so the child gets the default disposition back.
        process = translate(tiny, "--input", source, "--batch-size", "2", cwd=tmp_path,
                            stdout=stdout, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            wait_until(lambda: result.stat().st_size, process)
            assert process.poll() is None, "the whole file was translated before any output"
            process.send_signal(signal.SIGINT)
            _, stderr = communicate(process)
        finally:
            process.kill()
    assert process.returncode == 130
    assert "interrupted" in stderr.decode("utf-8")
    lines = result.read_text("utf-8").split("\n")
    assert lines[-1] == "" and 0 < len(lines) - 1 < count
    assert (len(lines) - 1) % 8 == 0  # whole buffers of 4 batches of 2 lines
    assert lines[:-1] == [expected[SENTENCES[i % 4]] for i in range(len(lines) - 1)]
