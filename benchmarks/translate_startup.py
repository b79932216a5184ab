"""Where the time of a one-sentence `attncli translate` goes, stage by stage, in one process.

The stages of `attncli translate MODEL "sentence"` in the order the command runs them:
importing TensorFlow, tensorflow-text and Keras; reading the model and its tokenizers;
building the translator; the first call (tracing and optimising the search graph, then
running it); a second call of the same sentence (the search alone).

    python -m benchmarks.translate_startup MODEL [--beam 1] [--sentence "Hace frío hoy."]

CPU seconds are the figure to compare on a shared machine (wall seconds grow with its
load). What it showed (spa-eng model of 256 units, beam 5): tracing took 3.9 s of CPU
with AutoGraph converting the model's code, 0.45 s without (`compile_search` and
`Translator` now trace with `autograph=False`); importing TensorFlow takes 3.5-4 s and
is the floor. Loading `export_saved_model`'s SavedModel and calling it once took as long
as building and tracing the translator (1.6 against 1.5-1.9 s), so it is not used.
Turning Grappler off saved nothing on the first call and slowed the search.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    started, cpu_started = time.perf_counter(), time.process_time()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--sentence", default="Hace frío hoy.")
    args = parser.parse_args()
    stages = []

    def stage(label):
        nonlocal started, cpu_started
        now, cpu_now = time.perf_counter(), time.process_time()
        stages.append((label, now - started, cpu_now - cpu_started))
        started, cpu_started = now, cpu_now

    import tensorflow  # noqa: F401

    stage("import tensorflow")
    import tensorflow_text  # noqa: F401

    stage("import tensorflow_text")
    import keras  # noqa: F401

    stage("import keras")
    from attncli.config.search import SearchConfig
    from attncli.search.loading import load_model

    loaded = load_model(args.model)
    stage("load the model and tokenizers")
    search = SearchConfig(beam_size=args.beam, n_best=1)
    translator = loaded.translator(search)
    stage("build the translator")
    translator.translate_graph.get_concrete_function()
    stage("trace the graph")
    translator.translate([args.sentence])
    stage("first sentence (optimise the graph + run)")
    translator.translate([args.sentence])
    stage("second sentence (run)")
    total = [sum(row[column] for row in stages[:-1]) for column in (1, 2)]
    print("| stage | wall s | CPU s |")
    print("| --- | ---: | ---: |")
    for label, seconds, cpu in stages:
        print(f"| {label} | {seconds:.2f} | {cpu:.2f} |")
    print(f"| one-sentence call, interpreter start excluded | {total[0]:.2f} | {total[1]:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
