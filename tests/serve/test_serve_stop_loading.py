"""`attncli serve` stopped while its models load ends then, without waiting for them.

Loading imports TensorFlow and traces the search, which nothing interrupts: before, a
SIGTERM in those seconds (minutes on a busy machine) was answered only once the models
were ready. Loading writes nothing, so the command ends at once, exit code 0.
"""

import re
import signal
import subprocess
import sys

import httpx
import pytest
import process_watch
from attncli_runs import ENV


@pytest.mark.slow
def test_sigterm_while_the_models_load_ends_the_server_without_them(tmp_path):
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "attncli", "serve", "demo", "--port", "0"],
            cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )
    try:
        # /health answers 503 from the server's start until the models are loaded
        # (TensorFlow's import alone takes seconds), and "ready" is printed then.
        process_watch.wait_until(lambda: "serving on" in log.read_text(), process)
        url = re.search(r"serving on (http://\S+)", log.read_text())[1]
        process_watch.wait_until(lambda: _health(url) == 503, process)
        process.send_signal(signal.SIGTERM)
        assert process_watch.wait(process) == 0
    finally:
        process.kill()
    printed = log.read_text()
    assert "stopped while loading" in printed and "ready:" not in printed, printed


def _health(url):
    """The status of GET /health, or None while the server does not answer yet."""
    try:
        return httpx.get(url + "/health", timeout=5).status_code
    except httpx.TransportError:
        return None
