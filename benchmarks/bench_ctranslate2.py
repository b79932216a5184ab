"""A Transformer decoded by attncli's search and by CTranslate2 on the same weights.

On the run's validation sentences (spa-eng: the 2,000 of the bundled split), in one
process: sentences per second of attncli's `Translator` (today's path: the search in one
`tf.while_loop` per batch of 64) and of the CTranslate2 export of the same model, float32
and int8 (`ExportedTranslator`, which also tokenises and detokenises, as attncli's graph
does), greedy and beam 5; how many translations equal attncli's (tokens), and the BLEU of
each against the references (written as the target side writes text, as validation
scores them). Each system translates the whole set in turn, `--rounds` times, and its
fastest round counts, so the ratios hold on a loaded machine.

Then whole processes: `attncli translate EXPORT SENTENCE --engine ctranslate2` and
`attncli translate RUN SENTENCE`, wall and CPU seconds (median of `--processes` runs).

    taskset -c 0 python -m benchmarks.bench_ctranslate2 RUN [--export DIR]

RUN is a trained Transformer run (configs/transformer.yaml); DIR its export, made with
`attncli export RUN DIR --format ctranslate2` if it does not exist.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SENTENCE = "¿Dónde está la estación de tren?"


def validation_pairs(run):
    from attncli.data.sources import read_splits
    from attncli.config.run import load_run_config

    valid = read_splits(load_run_config(Path(run) / "config.yaml").data).valid
    return [(source, target) for source, target in zip(valid.sources, valid.targets)
            if source.strip()]


def fastest_call(translate, sentences, rounds):
    """(the fastest of `rounds` calls `translate(sentences)`, in seconds; what the last
    returned)."""
    seconds = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        results = translate(sentences)
        seconds = min(seconds, time.perf_counter() - started)
    return seconds, results


def timed(translate, sentences, rounds):
    """(the fastest of `rounds` calls, in seconds; the best texts and tokens of the last)."""
    seconds, results = fastest_call(translate, sentences, rounds)
    return seconds, [(result.hypotheses[0].text, list(result.hypotheses[0].tokens))
                     for result in results]


def process_seconds(command, count):
    """Median wall and CPU seconds of running `command` `count` times."""
    walls, cpus = [], []
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--export", help="the run's CTranslate2 export (made if missing)")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=5)
    args = parser.parse_args()
    run = Path(args.run)
    export = Path(args.export or f"{run}-ctranslate2")
    attncli = [sys.executable, "-m", "attncli"]
    if not export.exists():
        subprocess.run([*attncli, "export", run, export, "--format", "ctranslate2"],
                       check=True)

    import sacrebleu

    from attncli.export.ctranslate2_engine import ExportedTranslator
    from attncli.search.evaluation import reference_normaliser
    from attncli.search.loading import load_model

    pairs = validation_pairs(run)[: args.sentences]
    sentences = [source for source, _ in pairs]
    loaded = load_model(run / "model")
    normalise = reference_normaliser(loaded.target_tokenizer)
    references = [target for _, target in pairs]
    references = normalise(references) if normalise else references
    print(f"{len(sentences)} validation sentences of {run}, {os.cpu_count()} CPUs seen, "
          f"running on {sorted(os.sched_getaffinity(0))}", file=sys.stderr)
    rows = []
    for beam in (1, 5):
        search = loaded.search.adjusted(beam_size=beam, n_best=1)
        systems = {"attncli": loaded.translator(search, attention_weights=False)}
        for compute_type in ("float32", "int8"):
            systems[f"CTranslate2 {compute_type}"] = ExportedTranslator(
                export, compute_type, search=search)
        for translator in systems.values():  # traced / warmed up once
            translator.translate(sentences[:64])
        found = {name: timed(lambda texts, t=translator: t.translate(texts, batch_size=64),
                             sentences, args.rounds)
                 for name, translator in systems.items()}
        base_seconds, base = found["attncli"]
        for name, (seconds, outputs) in found.items():
            same = sum(a[1] == b[1] for a, b in zip(outputs, base))
            bleu = sacrebleu.corpus_bleu([text for text, _ in outputs], [references]).score
            rows.append((f"beam {beam}", name, len(sentences) / seconds, base_seconds / seconds,
                         same, bleu))
    print(f"{'search':8} {'system':20} {'sentences/s':>12} {'x attncli':>10} "
          f"{'= attncli':>10} {'BLEU':>6}")
    for search, name, speed, ratio, same, bleu in rows:
        print(f"{search:8} {name:20} {speed:12.1f} {ratio:10.2f} "
              f"{same:>5}/{len(sentences):<4} {bleu:6.2f}")

    print(f"\nwhole process, one sentence ({SENTENCE}), median of {args.processes}:")
    for label, command in (
        ("translate --engine ctranslate2",
         [*attncli, "translate", export, SENTENCE, "--engine", "ctranslate2"]),
        ("translate (TensorFlow)", [*attncli, "translate", run, SENTENCE]),
    ):
        wall, cpu = process_seconds([str(part) for part in command], args.processes)
        print(f"  attncli {label:32} {wall:6.2f} s wall, {cpu:6.2f} s CPU")


if __name__ == "__main__":
    main()
