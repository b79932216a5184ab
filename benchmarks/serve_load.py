"""The load `benchmarks.bench_serve` puts on `attncli serve`, and what it reads of the server.

The server is started pinned to one core (`start_server`); the clients speak HTTP/1.1 on
raw asyncio streams (`Connection`), so that they cost the client core little next to the
server's. Each measurement is a coroutine that sends its requests and returns its times
(latency, throughput, the first `/inspect`, starvation: its target counts the batches
of a request, `batches_of`) or the server's resident set (churn); the server's CPU time
and resident set are read from /proc. What each measures, and the table made of them:
`benchmarks.bench_serve`.
"""

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def pinned(cpu, *command):
    return ["taskset", "-c", str(cpu), *map(str, command)]


def start_server(run, cpu, log, *options):
    """`attncli serve RUN --port 0 OPTIONS` pinned to `cpu`, once it printed `ready:`:
    `(process, host, port)`."""
    process = subprocess.Popen(
        pinned(cpu, sys.executable, "-m", "attncli", "serve", run, "--port", 0, *options),
        env=ENV, stdout=subprocess.DEVNULL, stderr=log,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        text = Path(log.name).read_text()
        if process.poll() is not None:
            raise SystemExit(f"the server ended:\n{text}")
        if "ready:" in text:
            host, port = re.search(r"serving on http://([\d.]+):(\d+)", text).groups()
            return process, host, int(port)
        time.sleep(0.2)
    raise SystemExit("the server was not ready in time")


def cpu_seconds(pid):
    """User and system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mb(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


class Connection:
    """One kept HTTP/1.1 connection: `await post(body)` -> (status, JSON)."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path, body):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode("utf-8")
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode("latin-1") + data
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        return status, json.loads(await self.reader.readexactly(length))

    def close(self):
        if self.writer is not None:
            self.writer.close()


async def latencies(host, port, sentences, beam, count):
    """Seconds of each of `count` one-sentence requests, one at a time."""
    connection = Connection(host, port)
    times = []
    for index in range(count):
        started = time.perf_counter()
        status, _ = await connection.post("/translate", {"texts": [sentences[index % len(
            sentences)]], "beam": beam})
        times.append(time.perf_counter() - started)
        assert status == 200, status
    connection.close()
    return times


async def throughput(host, port, sentences, clients, beam=1):
    """Sentences per second with `clients` clients sending one sentence per request."""
    queue = list(reversed(sentences))
    refused = 0

    async def client():
        nonlocal refused
        connection = Connection(host, port)
        while queue:
            sentence = queue.pop()
            status, _ = await connection.post("/translate", {"texts": [sentence], "beam": beam})
            if status == 503:
                refused += 1
                queue.append(sentence)
            else:
                assert status == 200, status
        connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    seconds = time.perf_counter() - started
    return len(sentences) / seconds, refused


def batches_of(run, sentences, beam, batch_tokens=4096):
    """How many batches the server cuts `sentences` at `beam` into, one request alone:
    each sentence costs its source tokens (with the end token if the model appends it)
    times the beam, and a batch takes sentences in order while within `batch_tokens`."""
    import tensorflow as tf

    from attncli.cli.runs import model_directory
    from attncli.data.tokenization import Tokenizer
    from attncli.model.saving import read_model_config

    directory = model_directory(run)
    tokenizer = Tokenizer.load(directory, "source")
    lengths = tokenizer.tokenize(tf.constant(sentences)).row_lengths().numpy()
    end = int(read_model_config(directory)["source_end"])
    batches, cost = 1, 0
    for length in lengths:
        text = max(int(length) + end, 1) * beam
        if cost and cost + text > batch_tokens:
            batches, cost = batches + 1, 0
        cost += text
    return batches


async def starvation(host, port, sentences, batches, beam=16, count=500):
    """Seconds of one-sentence greedy requests alone (20), of the large request alone,
    and of one-sentence requests sent one after another while it is translated."""
    large = {"texts": [sentences[i % len(sentences)] for i in range(count)], "beam": beam}
    small = Connection(host, port)
    await small.post("/translate", {"texts": sentences[:1], "beam": beam})  # traced
    alone = []
    for index in range(20):
        started = time.perf_counter()
        await small.post("/translate", {"texts": [sentences[index % len(sentences)]],
                                        "beam": 1})
        alone.append(time.perf_counter() - started)
    started = time.perf_counter()
    status, _ = await Connection(host, port).post("/translate", large)
    large_alone = time.perf_counter() - started
    assert status == 200, status
    print(f"starvation: one sentence alone {1000 * statistics.median(alone):.0f} ms, "
          f"{count} at beam {beam} alone {large_alone:.1f} s", file=sys.stderr, flush=True)
    running = asyncio.ensure_future(Connection(host, port).post("/translate", large))
    await asyncio.sleep(0.05)  # it has arrived
    waits = []
    while not running.done():
        started = time.perf_counter()
        status, _ = await small.post("/translate", {"texts": [sentences[len(waits) % len(
            sentences)]], "beam": 1})
        waits.append(time.perf_counter() - started)
        assert status == 200, status
    await running
    small.close()
    return statistics.median(alone), large_alone, large_alone / batches, waits


async def first_inspect(host, port, sentences):
    """Seconds of the first `/inspect` over a reference, of a `/translate` sent 10 ms
    after it, and of a second `/inspect` over another reference."""
    inspecting, translating = Connection(host, port), Connection(host, port)
    references = []
    for sentence in sentences[:2]:
        status, answer = await translating.post("/translate", {"texts": [sentence]})
        assert status == 200, status
        references.append(answer["translations"][0]["text"])

    async def timed(connection, path, body, delay=0.0):
        await asyncio.sleep(delay)
        started = time.perf_counter()
        status, _ = await connection.post(path, body)
        assert status == 200, status
        return time.perf_counter() - started

    first, behind = await asyncio.gather(
        timed(inspecting, "/inspect", {"text": sentences[0], "reference": references[0]}),
        timed(translating, "/translate", {"texts": [sentences[2]]}, delay=0.01))
    second = await timed(inspecting, "/inspect",
                         {"text": sentences[1], "reference": references[1]})
    inspecting.close()
    translating.close()
    return first, behind, second


async def churn(host, port, sentence, pid, rounds=5):
    """The server's resident set after each round of 24 settings asked in turn."""
    connection = Connection(host, port)
    memory = []
    for _ in range(rounds):
        for beam in range(1, 13):
            for attention in (False, True):
                status, _ = await connection.post("/translate", {
                    "texts": [sentence], "beam": beam, "attention": attention})
                assert status == 200, status
        memory.append(resident_mb(pid))
        print(f"churn, round {len(memory)}: {memory[-1]:.0f} MB", file=sys.stderr, flush=True)
    connection.close()
    return memory
