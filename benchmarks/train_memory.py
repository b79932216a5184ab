"""What holds the memory of `attncli train`: resident memory after each stage, in one process.

The stages of a run of the bundled default config (or CONFIG), in the order `attncli train`
goes through them: importing TensorFlow, Keras and tensorflow-text; reading and splitting
the corpus; `build_training` (tokenizers, vocabularies, model, optimizer, encoded pairs);
training steps on the bucketed batches; the validation loss and search. Prints a table of
the resident set (`VmRSS`) and its peak so far (`VmHWM`) after each stage.

    python -m benchmarks.train_memory [CONFIG] [--steps 230] [--set KEY=VALUE ...]

Set `TF_ENABLE_ONEDNN_OPTS=0` in the environment to see the run without oneDNN, or
`MALLOC_MMAP_THRESHOLD_=1048576` to see it with glibc's mmap threshold fixed. The CPU
seconds of the training steps after the 30th are printed too, so two processes started
side by side, one with the setting and one without, show what it costs.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def memory():
    """`(resident, peak)` of this process in bytes."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return tuple(int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM"))


class _Quiet:
    def start_epoch(self, *args):
        pass

    def step(self, *args):
        pass

    def end_epoch(self, record):
        pass

    def message(self, text):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", type=Path, help="default: the bundled default.yaml")
    parser.add_argument("--steps", type=int, default=230, help="training steps to take")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    if args.steps <= 30:
        parser.error(
            f"--steps must be over 30 (the first 30 are not timed). Received: {args.steps}"
        )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rows = [("python", *memory())]

    import keras  # noqa: F401
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401

    rows.append(("import tensorflow, keras, tensorflow_text", *memory()))
    from attncli.cli.train_command import resolve_run
    from attncli.data.sources import read_splits
    from attncli.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as scratch:
        config, run, _ = resolve_run(args.config, args.overrides, Path(scratch) / "run",
                                     args.data_dir, resume=False, overwrite=True)
        read_splits(config.data, args.data_dir)
        rows.append(("corpus read and split", *memory()))
        trainer = Trainer.from_config(config, run, _Quiet(), data_dir=args.data_dir)
        rows.append(("build_training: tokenizers, model, optimizer, encoded pairs", *memory()))
        batches = iter(trainer._batches(0))
        for index in range(args.steps):
            if index == 30:
                cpu_started = time.process_time()
            trainer.train_step(*next(batches))
            if index + 1 in (30, args.steps):
                rows.append((f"{index + 1} training steps", *memory()))
        train_cpu = time.process_time() - cpu_started
        trainer.validator.losses()
        rows.append(("validation loss", *memory()))
        trainer.validator.metric()
        rows.append(("validation search and BLEU", *memory()))
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")
    threshold = os.environ.get("MALLOC_MMAP_THRESHOLD_", "dynamic")
    print(f"TF_ENABLE_ONEDNN_OPTS={onednn}, MALLOC_MMAP_THRESHOLD_={threshold}: training "
          f"steps 31-{args.steps} took {train_cpu:.1f} CPU seconds", file=sys.stderr)
    print("| stage | resident | peak so far |")
    print("| --- | ---: | ---: |")
    for stage, resident, peak in rows:
        print(f"| {stage} | {resident / 1e9:.2f} GB | {peak / 1e9:.2f} GB |")


if __name__ == "__main__":
    main()
