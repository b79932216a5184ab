"""`attncli serve` measured: latency, throughput and memory against `attncli translate`.

    python -m benchmarks.bench_serve RUN [--server-cpu 0] [--client-cpu 1]
        [--sentences 2000] [--latency-requests 300] [--memory-requests 100000]
        [--memory-only | --fairness-only] [--starvation-rounds 5]
    python -m benchmarks.bench_serve RUN --ctranslate2 EXPORT [--server-cpu 0]
        [--client-cpu 0] [--sentences 2000] [--latency-requests 300] [--starts 3]

The server (`attncli serve RUN --port 0`, default limits) runs pinned to one core
(`taskset -c SERVER_CPU`), this process (the clients) to another; requests go over
loopback. The sentences are the first `--sentences` validation sources of the
run's corpus (read as `benchmarks.default_text` reads them). Printed, as a Markdown
table:

- latency: one sentence per request, one request at a time on a kept connection,
  greedy and beam 5: p50/p95/p99 in ms, against the wall time of `attncli translate RUN
  SENTENCE` (the whole process, pinned to the same core; the median of three) as a ratio;
- throughput: `C` clients (1, 8, 64, 256), each on its own kept connection sending one
  sentence per request, until the sentences are all translated (greedy), in sentences
  per second, against the offline rate: the same sentences translated as `attncli
  translate --input` translates them (`translate_lines` over buffers of
  `BUFFERED_BATCHES` batches of 64), after start-up (model loaded, search traced), in a
  process pinned to the server's core and timed inside it; and the CPU time each
  sentence cost the server process (all its threads, from /proc) against the CPU time
  each cost that offline process: on a machine that other work shares, the CPU ratio is
  the steadier figure (a wall-clock rate falls with the share of the core the server
  gets);
- memory: the server's resident set (VmRSS) once ready, after 1,000 requests, then
  after 10,000, 25,000, 50,000 and 100,000 up to `--memory-requests` (0 stops at 1,000),
  with the growth since 1,000 and since 10,000 requests. These requests come from 64
  clients sending one sentence each (greedy), so batches of every size and length meet
  the search. `--memory-only` measures memory alone (no offline rate, latency or
  throughput): on a machine with one free core, run it with the server and the clients
  on that core.

- the first `/inspect` over a `reference` (the model's own translation of a sentence),
  right after the server is ready, and a one-sentence `/translate` sent 10 ms after it:
  their times, and a second `/inspect` over another reference (the forced pass, once
  traced, is fast: how long the first waits is its trace, and the `/translate` waits
  for it);
- starvation: the wait of a one-sentence greedy request sent while a request of 500
  sentences at beam 16 (other settings: batched apart) is being translated, one after
  another until the large one is answered: the median and the longest, against the
  target, twice its latency alone (the median of 20) plus one batch of the large
  request (its time alone over its number of batches, counted from its sentences'
  costs as the server counts them: source tokens times the beam, packed into
  `--batch-tokens` 4096). `--starvation-rounds` rounds, each with its own target
  (a stall that comes at random shows in some rounds only): the waits of them all,
  the worst ratio to a round's target, and how many rounds passed it;
- churn: 24 settings (beam 1 to 12, with and without attention weights), one
  one-sentence request each, in turn, five rounds: the server's resident set after
  each round, and its growth since the first (target: at most +10 %). The server keeps
  8 traced searches per model beside the two it starts with, so every request of a
  round after the first traces again. `--fairness-only` measures these two alone.

With `--ctranslate2 EXPORT` (RUN's `attncli export RUN EXPORT --format ctranslate2`), the
engines are compared instead, each server alone on SERVER_CPU in turn: `attncli serve
RUN` (TensorFlow) and `attncli serve EXPORT --engine ctranslate2` with `--compute-type`
float32 and int8. Printed for each: the seconds from starting the process to its `ready:`
line (the median of `--starts` starts), its resident set then, the latency of one
sentence per request (greedy and beam 5, p50/p95/p99, as above), and the throughput of
64 clients sending one sentence per request (greedy) with the server's CPU time per
sentence; ratios against the TensorFlow server.

The server, the clients and their requests are in `benchmarks.serve_load`.
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.serve_load import (
    ENV, batches_of, churn, cpu_seconds, first_inspect, latencies, pinned, resident_mb,
    start_server, starvation, throughput)


def validation_sources(run, count, data_dir=None):
    """The first `count` validation sources of the run's corpus."""
    from attncli.data.sources import read_splits
    from attncli.config.run import load_run_config

    config = load_run_config(Path(run) / "config.yaml")
    return list(read_splits(config.data, data_dir).valid.sources[:count])


def offline_rate(run, path, beam):
    """Sentences per second of `attncli translate --input` after start-up (this process)."""
    from attncli.cli.runs import model_directory
    from attncli.cli.runs import asked_decoding, translate_lines
    from attncli.cli.translate_streams import BUFFERED_BATCHES
    from attncli.search.ensemble import load_ensemble

    loaded = load_ensemble([model_directory(run)])
    translator = loaded.translator(asked_decoding(loaded.search, beam=beam),
                                   attention_weights=False)
    lines = Path(path).read_text("utf-8").split("\n")[:-1]
    translate_lines(translator, lines[:64])  # start-up: the search is traced
    started, cpu_started = time.perf_counter(), time.process_time()
    for start in range(0, len(lines), 64 * BUFFERED_BATCHES):
        translate_lines(translator, lines[start:start + 64 * BUFFERED_BATCHES])
    print(json.dumps({"sentences": len(lines), "seconds": time.perf_counter() - started,
                      "cpu_seconds": time.process_time() - cpu_started}))


def one_sentence_translate(run, sentence, beam, cpu, repeats=3):
    """The median wall seconds of `attncli translate RUN SENTENCE --beam BEAM`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(pinned(cpu, sys.executable, "-m", "attncli", "translate", run, sentence,
                              "--beam", beam), env=ENV, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fairness_rows(run, host, port, sentences, pid, rounds=5):
    """The first `/inspect`'s rows (on a server just ready), the starvation rows (over
    `rounds` rounds) and the churn rows of the table."""
    first, behind, second = asyncio.run(first_inspect(host, port, sentences))
    rows = [
        f"| the first /inspect over a reference, once ready | {1000 * first:.0f} ms | | |",
        f"| a /translate of one sentence sent 10 ms after it | {1000 * behind:.0f} ms | | |",
        f"| a second /inspect over another reference | {1000 * second:.0f} ms | | |",
    ]
    batches = batches_of(run, [sentences[i % len(sentences)] for i in range(500)], 16)
    measured = [asyncio.run(starvation(host, port, sentences, batches))
                for _ in range(rounds)]
    alone = statistics.median(round_[0] for round_ in measured)
    large = statistics.median(round_[1] for round_ in measured)
    batch = statistics.median(round_[2] for round_ in measured)
    waits = [wait for round_ in measured for wait in round_[3]]
    # per round: its longest wait over its own target
    ratios = [max(waits_) / (2 * alone_ + batch_) for alone_, _, batch_, waits_ in measured]
    rows += [
        f"| one sentence alone, greedy (median of 20; median of {rounds} rounds) | "
        f"{1000 * alone:.0f} ms | | |",
        f"| 500 sentences at beam 16 alone ({batches} batches; median of {rounds} rounds) | "
        f"{large:.2f} s, {1000 * batch:.0f} ms a batch | | |",
        f"| one sentence during the 500, {rounds} rounds ({len(waits)} answered), median / "
        f"longest | {1000 * statistics.median(waits):.0f} / {1000 * max(waits):.0f} ms | "
        f"≤ {1000 * (2 * alone + batch):.0f} ms (2 x alone + a batch) | worst round "
        f"{max(ratios):.2f}x of its target; {sum(ratio > 1 for ratio in ratios)} of "
        f"{rounds} rounds past it |",
    ]
    memory = asyncio.run(churn(host, port, sentences[0], pid))
    rows += [f"| memory after round {index + 1} of 24 settings | {megabytes:.0f} MB | "
             + ("| |" if index == 0 else f"≤ {1.1 * memory[0]:.0f} MB (+10 %) | "
                f"{100 * (megabytes - memory[0]) / memory[0]:+.1f} % |")
             for index, megabytes in enumerate(memory)]
    return rows


def sample_memory(memory, served, pid):
    """Appends the server's resident set after `served` requests, and says it on stderr
    (a run stopped early still tells what it measured)."""
    memory.append((f"after {served:,} requests", resident_mb(pid)))
    print(f"{memory[-1][0]}: {memory[-1][1]:.0f} MB", file=sys.stderr, flush=True)


def percentiles(times):
    ordered = sorted(times)
    return [1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))]
            for p in (0.50, 0.95, 0.99)]


#: The servers `--ctranslate2` compares: a name, and RUN's (False) or EXPORT's (True)
#: `attncli serve` options.
ENGINES = [
    ("TensorFlow", False, ()),
    ("CTranslate2 float32", True, ("--engine", "ctranslate2")),
    ("CTranslate2 int8", True, ("--engine", "ctranslate2", "--compute-type", "int8")),
]


def engine_figures(path, options, cpu, sentences, latency_requests, starts, folder):
    """One server's figures (`--ctranslate2`): start-to-ready seconds (median of
    `starts`), resident MB once ready, latency percentiles (ms) greedy and at beam 5,
    and the throughput of 64 clients (sentences/s) with its CPU ms per sentence."""
    figures, ready_seconds = {}, []
    for start in range(starts):
        with (folder / "server.txt").open("w") as log:
            began = time.perf_counter()
            server, host, port = start_server(path, cpu, log, *options)
            ready_seconds.append(time.perf_counter() - began)
        if start < starts - 1:
            server.terminate()
            server.wait(timeout=120)
    try:
        figures["ready"] = statistics.median(ready_seconds)
        figures["memory"] = resident_mb(server.pid)
        for beam in (1, 5):
            asyncio.run(latencies(host, port, sentences, beam, 20))  # warm
            figures[beam] = percentiles(asyncio.run(
                latencies(host, port, sentences, beam, latency_requests)))
        cpu_started = cpu_seconds(server.pid)
        figures["rate"], _ = asyncio.run(throughput(host, port, sentences, 64))
        figures["cpu"] = 1000 * (cpu_seconds(server.pid) - cpu_started) / len(sentences)
    finally:
        server.terminate()
        server.wait(timeout=120)
    return figures


def compare_engines(args, sentences, folder):
    """The table of `--ctranslate2`: a column per server, ratios against TensorFlow's."""
    load = os.getloadavg()
    measured = {}
    for name, exported, options in ENGINES:
        path = args.ctranslate2 if exported else args.run
        print(f"{name}: attncli serve {path} {' '.join(options)}", file=sys.stderr, flush=True)
        measured[name] = engine_figures(path, options, args.server_cpu, sentences,
                                        args.latency_requests, args.starts, folder)
    print(f"\n{args.run} and {args.ctranslate2}: {len(sentences)} validation sentences; "
          f"servers on CPU {args.server_cpu}, clients on CPU {args.client_cpu}; load average "
          f"{load[0]:.2f} before, {os.getloadavg()[0]:.2f} after\n")
    print("| measured | " + " | ".join(measured) + " |")
    print("| --- |" + " ---: |" * len(measured))
    base = measured[ENGINES[0][0]]

    def row(label, shown, better):
        """`shown(figures)` of each server and, beside the others, `better(base,
        figures)`: how many times better than TensorFlow."""
        cells = [shown(figures) + ("" if figures is base else
                                   f" ({better(base, figures):.1f}x)")
                 for figures in measured.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")

    row(f"start to ready (median of {args.starts})", lambda f: f"{f['ready']:.2f} s",
        lambda b, f: b["ready"] / f["ready"])
    row("memory once ready (VmRSS)", lambda f: f"{f['memory']:.0f} MB",
        lambda b, f: b["memory"] / f["memory"])
    for beam in (1, 5):
        row(f"latency, one sentence, {'greedy' if beam == 1 else f'beam {beam}'}, "
            "p50 / p95 / p99", lambda f: " / ".join(f"{ms:.1f}" for ms in f[beam]) + " ms",
            lambda b, f: b[beam][0] / f[beam][0])  # at p50
    row("throughput, 64 clients, greedy", lambda f: f"{f['rate']:.0f} sentences/s",
        lambda b, f: f["rate"] / b["rate"])
    row("CPU per sentence, 64 clients", lambda f: f"{f['cpu']:.2f} ms",
        lambda b, f: b["cpu"] / f["cpu"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a trained run directory")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--latency-requests", type=int, default=300)
    parser.add_argument("--memory-requests", type=int, default=100_000,
                        help="requests before the last memory figure; 0 skips it")
    parser.add_argument("--memory-only", action="store_true",
                        help="measure the server's memory alone")
    parser.add_argument("--fairness-only", action="store_true",
                        help="measure starvation and the churn of settings alone")
    parser.add_argument("--starvation-rounds", type=int, default=5,
                        help="rounds of the starvation measurement")
    parser.add_argument("--data", type=Path, default=os.environ.get("ATTNCLI_SHARED_DATA"),
                        help="data folder of a run that reads files (not the bundled corpus)")
    parser.add_argument("--ctranslate2", type=Path, metavar="EXPORT",
                        help="compare the engines: RUN served by TensorFlow against its "
                        "CTranslate2 export EXPORT, float32 and int8")
    parser.add_argument("--starts", type=int, default=3,
                        help="with --ctranslate2: starts of each server timed")
    parser.add_argument("--offline-rate", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.offline_rate is not None:
        return offline_rate(args.run, args.offline_rate, args.beam)

    os.sched_setaffinity(0, {args.client_cpu})
    sentences = validation_sources(args.run, args.sentences, args.data)
    folder = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    (folder / "sentences.txt").write_text("\n".join(sentences) + "\n", "utf-8")
    load = os.getloadavg()

    if args.ctranslate2 is not None:
        return compare_engines(args, sentences, folder)

    if args.fairness_only:
        with (folder / "server.txt").open("w") as log:
            server, host, port = start_server(args.run, args.server_cpu, log)
        try:
            rows = fairness_rows(args.run, host, port, sentences, server.pid,
                                 args.starvation_rounds)
        finally:
            server.terminate()
            server.wait(timeout=120)
        ready = re.search(r"ready: .*", (folder / "server.txt").read_text()).group(0)
        print(f"\n{args.run}: server on CPU {args.server_cpu}, clients on CPU "
              f"{args.client_cpu}; load average {load[0]:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after; the server's {ready!r}\n")
        print("| measured | attncli serve | target | ratio |")
        print("| --- | ---: | ---: | ---: |")
        print("\n".join(rows))
        return None

    if not args.memory_only:
        offline = json.loads(subprocess.run(
            pinned(args.server_cpu, sys.executable, "-m", "benchmarks.bench_serve", args.run,
                   "--offline-rate", folder / "sentences.txt", "--beam", 1),
            env=ENV, check=True, capture_output=True, text=True).stdout)
        offline_per_second = offline["sentences"] / offline["seconds"]
        whole = {beam: one_sentence_translate(args.run, sentences[0], beam, args.server_cpu)
                 for beam in (1, 5)}

    with (folder / "server.txt").open("w") as log:
        server, host, port = start_server(args.run, args.server_cpu, log)
    started = time.perf_counter()
    rows = []
    try:
        memory = [("ready", resident_mb(server.pid))]
        asyncio.run(throughput(host, port, sentences[:1000], 64))
        served = 1000
        sample_memory(memory, served, server.pid)
        for beam in () if args.memory_only else (1, 5):
            asyncio.run(latencies(host, port, sentences, beam, 20))  # trace and warm
            times = asyncio.run(latencies(host, port, sentences, beam, args.latency_requests))
            served += 20 + args.latency_requests
            p50, p95, p99 = percentiles(times)
            rows.append(f"| latency, one sentence, {'greedy' if beam == 1 else f'beam {beam}'} "
                        f"| {p50:.1f} / {p95:.1f} / {p99:.1f} ms (p50 / p95 / p99) | "
                        f"{whole[beam]:.2f} s | {whole[beam] / (p50 / 1000):.0f}x faster |")
        for clients in () if args.memory_only else (1, 8, 64, 256):
            offline_cpu = 1000 * offline["cpu_seconds"] / offline["sentences"]
            cpu_started = cpu_seconds(server.pid)
            rate, refused = asyncio.run(throughput(host, port, sentences, clients))
            cpu = 1000 * (cpu_seconds(server.pid) - cpu_started) / len(sentences)
            served += len(sentences) + refused
            rows.append(f"| throughput, {clients} client{'s' if clients > 1 else ''}, greedy | "
                        f"{rate:.0f} sentences/s | {offline_per_second:.0f} sentences/s | "
                        f"{rate / offline_per_second:.2f}x"
                        + (f" ({refused} refused: queue full)" if refused else "") + " |")
            rows.append(f"| CPU per sentence, {clients} client{'s' if clients > 1 else ''} | "
                        f"{cpu:.2f} ms | {offline_cpu:.2f} ms | {offline_cpu / cpu:.2f}x |")
        for goal in sorted({10_000, 25_000, 50_000, args.memory_requests} - {0}):
            if goal > args.memory_requests:
                continue
            while served < goal:
                asyncio.run(throughput(host, port, sentences, 64))
                served += len(sentences)
            sample_memory(memory, served, server.pid)
        if not args.memory_only:
            rows += fairness_rows(args.run, host, port, sentences, server.pid,
                                  args.starvation_rounds)
    finally:
        server.terminate()
        server.wait(timeout=120)

    print(f"\n{args.run}: {len(sentences)} validation sentences; server on CPU "
          f"{args.server_cpu}, clients on CPU {args.client_cpu}; load average "
          f"{load[0]:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"{time.perf_counter() - started:.0f} s from ready to the last request\n")
    if rows:
        print("| measured | attncli serve | attncli translate | ratio |")
        print("| --- | ---: | ---: | ---: |")
        print("\n".join(rows))
    bases = memory[1:3]
    print("\n| server memory (VmRSS) | MB | "
          + " | ".join(f"growth since {label[len('after '):]}" for label, _ in bases) + " |")
    print("| --- | ---: |" + " ---: |" * len(bases))
    for index, (label, megabytes) in enumerate(memory):
        growths = [f"{100 * (megabytes - base) / base:+.1f} %" if index > 1 + column else "–"
                   for column, (_, base) in enumerate(bases)]
        print(f"| {label} | {megabytes:.0f} | " + " | ".join(growths) + " |")
    if not args.memory_only:
        print(f"\noffline: {offline['sentences']} sentences in {offline['seconds']:.2f} s "
              "after start-up, timed inside a process that translates them as attncli "
              "translate --input does")


if __name__ == "__main__":
    sys.exit(main())
