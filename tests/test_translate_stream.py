"""`attncli translate` answers lines as they arrive, and writes each batch when it is done.

Real processes (`python -m attncli translate`) on a tiny run (`configs/tiny-test.yaml`,
one epoch): a line sent down a pipe, or typed at a terminal, is answered while the input
is still open; a file's first batches are in the output while the rest is translated,
and Ctrl-C keeps them.
"""

import os
import pty
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny-test.yaml"
SENTENCES = ["Tengo un gato.", "", "¿Dónde está?", "Hace frío hoy."]
TIMEOUT = 300  # seconds: TensorFlow starts slowly on a loaded machine

pytestmark = pytest.mark.slow
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


def translate(*args, cwd, **popen):
    return subprocess.Popen([sys.executable, "-m", "attncli", "translate", *map(str, args)],
                            cwd=cwd, env=ENV, **popen)


class Lines:
    """The lines of a process's stdout, read in a thread, each waited for with a timeout."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in iter(stream.readline, b""):
            self.lines.put(line.decode("utf-8"))
        self.lines.put(None)

    def next(self, timeout=TIMEOUT):
        return self.lines.get(timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny run trained one epoch, and the translations of `SENTENCES` as arguments."""
    work = tmp_path_factory.mktemp("work")
    subprocess.run([sys.executable, "-m", "attncli", "train", str(TINY), "--run-dir", "tiny",
                    "--set", "training.epochs=1"], cwd=work, env=ENV, check=True,
                   capture_output=True, timeout=900)
    process = translate("tiny", *SENTENCES, cwd=work, stdout=subprocess.PIPE)
    stdout, _ = process.communicate(timeout=TIMEOUT)
    expected = stdout.decode("utf-8").split("\n")[:-1]
    assert len(expected) == len(SENTENCES) and expected[1] == ""
    return work, dict(zip(SENTENCES, expected))


def test_a_line_down_a_pipe_is_answered_before_the_pipe_closes(run):
    work, expected = run
    process = translate("tiny", cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
    try:
        output = Lines(process.stdout)
        for sentence in SENTENCES:
            process.stdin.write(sentence.encode("utf-8") + b"\n")
            process.stdin.flush()
            assert output.next() == expected[sentence] + "\n"
        assert process.poll() is None  # still reading: stdin is open
        process.stdin.close()
        assert output.next() is None
        assert process.wait(timeout=TIMEOUT) == 0
    finally:
        process.kill()


def test_a_line_typed_at_a_terminal_is_answered_at_once(run):
    work, expected = run
    terminal, terminal_side = pty.openpty()
    process = translate("tiny", cwd=work, stdin=terminal_side, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    os.close(terminal_side)
    try:
        output = Lines(process.stdout)
        os.write(terminal, "¿Dónde está?\n".encode("utf-8"))
        assert output.next() == expected["¿Dónde está?"] + "\n"
        os.write(terminal, b"Hace fr\xc3\xado hoy.\n")
        assert output.next() == expected["Hace frío hoy."] + "\n"
        os.write(terminal, b"\x04")  # Ctrl-D at the start of a line: the end of the input
        assert output.next() is None
        assert process.wait(timeout=TIMEOUT) == 0
        assert "Ctrl-D" in process.stderr.read().decode("utf-8")
    finally:
        process.kill()
        os.close(terminal)


def test_a_file_is_written_batch_by_batch_and_ctrl_c_keeps_what_was_written(run, tmp_path):
    work, expected = run
    count = 20000
    source = tmp_path / "input.txt"
    source.write_text("".join(SENTENCES[i % 4] + "\n" for i in range(count)), "utf-8")
    result = tmp_path / "output.txt"
    with result.open("wb") as stdout:
        # Ctrl-C as a terminal sends it: a test runner started in the background (`cmd &`
        # in a script) passes SIGINT on ignored, and Python then raises no
        # KeyboardInterrupt, so the child gets the default disposition back.
        process = translate("tiny", "--input", source, "--batch-size", "2", cwd=work,
                            stdout=stdout, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + TIMEOUT
            while not result.stat().st_size and time.monotonic() < deadline:
                assert process.poll() is None, "the process ended before any output appeared"
                time.sleep(0.05)
            assert process.poll() is None, "the whole file was translated before any output"
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            process.kill()
    assert process.returncode == 130
    assert "interrupted" in stderr.decode("utf-8")
    lines = result.read_text("utf-8").split("\n")
    assert lines[-1] == "" and 0 < len(lines) - 1 < count
    assert (len(lines) - 1) % 8 == 0  # whole buffers of 4 batches of 2 lines
    assert lines[:-1] == [expected[SENTENCES[i % 4]] for i in range(len(lines) - 1)]
