"""`attncli translate` timed as a user runs it: whole processes, against the tutorial's loop.

Setting: `spa-eng/spa.txt` permuted by `numpy.random.default_rng(0)` (BENCHMARKS.md), the
last 2,000 pairs for validation, the 2,000 before them held out (as `benchmarks.spa_eng`);
the held-out Spanish sentences are translated. Two models of the tutorial's size (256
units, bidirectional GRU encoder, GRU decoder; `benchmarks.bench_decoding`), each trained
`--train-steps` steps from the same seed on the remaining pairs and cached in `--cache`:
speed is the measure here, not quality, but trained models end their sentences.

Each row is one process, timed from its start to its exit (TensorFlow's import, loading,
tracing, tokenizing, searching, writing):

- `python -m attncli translate MODEL --input FILE --beam 1` (greedy) and `--beam 5`;
- `python -m benchmarks.tutorial_translate`: the tutorial's eager loop, one model call per
  target token, batches of 64 in file order;
- one sentence given as an argument, to each of them: the latency of a single call.

Both decode at most 50 target tokens. The commands run in turn, `--rounds` times, and each
row reports its fastest round, so that the ratios, taken on one machine in one sitting,
hold even while other work loads it. CPU seconds (user + system, every thread of the
process) move less with the machine's load than wall seconds.

    python -m benchmarks.bench_translate_cli [--train-steps 300] [--rounds 2]
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SENTENCE = "Hace frío hoy."


def prepare(args):
    """The held-out sentences file and the attncli model directory, trained if not cached
    (with the tutorial's weights beside them)."""
    cache = args.cache
    model_dir = cache / f"attncli-{args.train_steps}"
    held_out_path = cache / "held_out.es"
    tutorial_weights = cache / f"tutorial-{args.train_steps}.weights.h5"
    if model_dir.is_dir() and tutorial_weights.is_file() and held_out_path.is_file():
        return held_out_path, model_dir
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    from attncli.config.model import ModelConfig
    from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer
    from attncli.model.encoder_decoder import Seq2Seq
    from attncli.model.saving import save_model
    from benchmarks.bench_decoding import VOCABULARY_SIZE, read_split, train, training_data
    from benchmarks.tutorial_model import MAX_LENGTH, UNITS, TutorialTranslator

    keras.utils.set_random_seed(0)
    print("reading and tokenizing spa-eng ...", file=sys.stderr)
    train_pairs, _ = read_split(args.data / "spa-eng" / "spa.txt")
    train_pairs, held_out = train_pairs[:-2000], train_pairs[-2000:]
    tokenizers = []
    for side, name in enumerate(("source", "target")):
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        vocabulary = tokenizer.build_vocabulary(
            [pair[side] for pair in train_pairs], max_size=VOCABULARY_SIZE
        )
        tokenizers.append(tokenizer.with_vocabulary(vocabulary))
        tokenizers[-1].save(cache, name)
    source_tokenizer, target_tokenizer = tokenizers
    dataset = training_data(
        source_tokenizer.encode(tf.constant([pair[0] for pair in train_pairs])),
        target_tokenizer.encode(tf.constant([pair[1] for pair in train_pairs])),
    )
    ours = Seq2Seq(ModelConfig(
        source_vocab_size=VOCABULARY_SIZE, target_vocab_size=VOCABULARY_SIZE,
        embedding_dim=UNITS, units=UNITS, decoder="luong", score="dot",
    ))
    tutorial = TutorialTranslator(VOCABULARY_SIZE, VOCABULARY_SIZE)
    probe = tf.constant([[1]], tf.int32)
    tutorial((probe, probe))
    for name, model, path in (("attncli", ours, cache / f"attncli-{args.train_steps}.weights.h5"),
                              ("tutorial", tutorial, tutorial_weights)):
        print(f"training the {name} model ...", file=sys.stderr)
        train(model, dataset, args.train_steps, path)
    decoding = {"beam_size": 1, "n_best": 1, "max_length_ratio": 0.0,
                "max_length_offset": MAX_LENGTH}
    save_model(model_dir, ours, source_tokenizer, target_tokenizer,
               metadata={"decoding": decoding})
    held_out_path.write_text("".join(pair[0] + "\n" for pair in held_out), "utf-8")
    return held_out_path, model_dir


def child_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command, output):
    """Wall and CPU seconds of `command` as a process, its stdout written to `output`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    with open(output, "wb") as stdout:
        start, cpu = time.perf_counter(), child_cpu_seconds()
        subprocess.run(command, stdout=stdout, stderr=subprocess.DEVNULL, env=env, cwd=REPO,
                       check=True)
        return time.perf_counter() - start, child_cpu_seconds() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--data", type=Path,
        default=Path(os.environ.get("ATTNCLI_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/attncli-bench-translate-cli"),
                        help="where the trained models and the held-out file are kept")
    parser.add_argument("--prepare-only", action="store_true",
                        help="train and cache the models, time nothing")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    held_out, model_dir = prepare(args)
    if args.prepare_only:
        return
    count = len(held_out.read_text("utf-8").split("\n")) - 1
    python = sys.executable
    attncli = [python, "-m", "attncli", "translate", str(model_dir)]
    tutorial = [python, "-m", "benchmarks.tutorial_translate", str(args.cache),
                "--steps", str(args.train_steps)]
    sentence = args.cache / "one.es"
    sentence.write_text(SENTENCE + "\n", "utf-8")
    commands = {
        "tutorial loop, eager": (tutorial + ["--input", str(held_out)], count),
        "attncli translate --beam 1": (attncli + ["--input", str(held_out), "--beam", "1"], count),
        "attncli translate --beam 5": (attncli + ["--input", str(held_out), "--beam", "5"], count),
        "tutorial loop, one sentence": (tutorial + ["--input", str(sentence)], 1),
        "attncli translate, one sentence": (attncli + [SENTENCE], 1),
    }
    seconds = {label: (float("inf"), float("inf")) for label in commands}
    for round_ in range(args.rounds):
        for label, (command, _) in commands.items():
            print(f"round {round_ + 1}: {label} ...", file=sys.stderr)
            output = args.cache / f"output-{label.replace(' ', '_').replace(',', '')}.txt"
            wall, cpu = run(command, output)
            seconds[label] = (min(seconds[label][0], wall), min(seconds[label][1], cpu))
            lines = len(output.read_text("utf-8").split("\n")) - 1
            if lines != commands[label][1]:
                raise SystemExit(f"{label}: {lines} output lines for {commands[label][1]} inputs")

    print(f"\n{count} held-out spa-eng sentences, models of 256 units trained "
          f"{args.train_steps} steps, whole processes, fastest of {args.rounds} round(s)\n")
    print("| command | wall s | sentences/s | × tutorial eager | CPU s | × tutorial, CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, (_, lines) in commands.items():
        wall, cpu = seconds[label]
        base_wall, base_cpu = seconds[
            "tutorial loop, eager" if lines > 1 else "tutorial loop, one sentence"
        ]
        print(f"| {label} | {wall:.2f} | {lines / wall:,.1f} | {base_wall / wall:.2f} | "
              f"{cpu:.2f} | {base_cpu / cpu:.2f} |")


if __name__ == "__main__":
    main()
