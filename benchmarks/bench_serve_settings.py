"""`attncli serve`: what a request costs when it asks for an alpha or a temperature the
server has not seen, against one that asks for the run's own.

    python -m benchmarks.bench_serve_settings RUN [--cpu 0] [--repeats 3]

The server (`attncli serve RUN --port 0`, pinned to `--cpu`) is started as a user starts
it; once `GET /health` says ready, this process sends one request at a time (three
sentences each): first the run's own settings (traced at start-up: the baseline),
then each of 12 alphas with the run's beam, then sampling (`random`, seed 1) at its
first temperature (a trace of its own) and at 5 more. Printed, as a Markdown table: the
median wall time of each kind of request, in ms, and as a ratio to the baseline's.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

TEXTS = ["¿Dónde está el baño?", "Hace frío hoy.", "Tengo hambre."]
ALPHAS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5]
TEMPERATURES = [0.5, 0.7, 0.9, 1.1, 1.3, 1.5]


def start_server(run, cpu):
    """`attncli serve RUN --port 0` pinned to `cpu`; its process and base address."""
    command = [sys.executable, "-m", "attncli", "serve", str(run), "--port", "0"]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        found = re.search(r"serving on (http://\S+)", line)
        if found:
            return server, found.group(1)
    raise SystemExit("the server ended before it listened:\n" + server.stderr.read())


def wait_ready(address):
    while True:
        try:
            with urllib.request.urlopen(f"{address}/health") as answer:
                if json.load(answer)["status"] == "ready":
                    return
        except OSError:
            pass
        time.sleep(0.2)


def timed(address, body):
    """Wall seconds of one POST /translate of `TEXTS` with `body`."""
    data = json.dumps({"texts": TEXTS, **body}).encode()
    request = urllib.request.Request(f"{address}/translate", data,
                                     {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as answer:
        json.load(answer)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--cpu", default=None, help="the server's core (default: any)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="requests of the run's own settings for the baseline")
    args = parser.parse_args()
    server, address = start_server(args.run, args.cpu)
    try:
        wait_ready(address)
        timed(address, {})  # a first request warms the connection path
        rows = [
            ("the run's own settings (baseline)",
             [timed(address, {}) for _ in range(args.repeats)]),
            (f"{len(ALPHAS)} alphas not asked before, the run's beam",
             [timed(address, {"alpha": alpha}) for alpha in ALPHAS]),
            ("sampling, its first temperature",
             [timed(address, {"sampling": "random", "seed": 1,
                              "temperature": TEMPERATURES[0]})]),
            (f"sampling, {len(TEMPERATURES) - 1} temperatures not asked before",
             [timed(address, {"sampling": "random", "seed": 1, "temperature": t})
              for t in TEMPERATURES[1:]]),
        ]
    finally:
        server.terminate()
        server.wait()
    baseline = statistics.median(rows[0][1])
    print(f"{len(TEXTS)} sentences a request, one request at a time; server on core "
          f"{args.cpu if args.cpu is not None else 'any'} (pid {os.getpid()} the client)\n")
    print("| request | requests | median ms | max ms | × baseline |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, seconds in rows:
        median = statistics.median(seconds)
        print(f"| {label} | {len(seconds)} | {median * 1000:.0f} | {max(seconds) * 1000:.0f} "
              f"| {median / baseline:.2f} |")


if __name__ == "__main__":
    main()
