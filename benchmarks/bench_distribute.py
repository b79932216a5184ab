"""Training throughput of `training.distribute: mirrored` against one device, one process.

The CPU is split into `--replicas` logical devices before TensorFlow starts; two
`Trainer`s of the same configuration (the bundled default: Spanish -> English, 256
units, batches of 64 sentences, bucketed), one with `distribute: none` and one mirrored
over the logical devices, train on the same batches of epoch 0: `--warmup` untimed
steps each, then `--rounds` turns of `--steps` timed steps each, alternating, so machine
noise falls on both alike. Prints a table of target tokens/s (non-pad target tokens, end
of sentence included) and the ratio to one device; the fastest turn of each counts.
The timed loop is the trainer's: the distributed dataset, the step, reading its loss.

    python -m benchmarks.bench_distribute [--replicas 2] [--steps 20]

On a machine with GPUs, `distribute: mirrored` uses them instead of logical CPUs.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from attncli.training.distribution import make_strategy  # noqa: E402
from attncli.config.run import load_run_config  # noqa: E402
from attncli.training.run_directory import RunDirectory  # noqa: E402


class Quiet:
    """A `Trainer` progress that shows nothing."""

    def start_epoch(self, epoch, total, steps):
        pass

    def step(self, loss, tokens_per_second):
        pass

    def end_epoch(self, record):
        pass

    def message(self, text):
        pass


def timed_steps(trainer, start, count):
    """Seconds and target tokens of `count` steps from batch `start` of epoch 0."""
    batches = iter(trainer._batches(0, skip=start))
    batch = next(batches)  # the dataset's start-up is not timed
    tokens = 0
    started = time.perf_counter()
    for _ in range(count):
        inputs, target_out = batch
        if trainer.workers.distributed:
            result = trainer.train_step(inputs, target_out, 0)
        else:
            result = trainer.train_step(inputs, target_out)
        tokens += int(result["tokens"])
        batch = next(batches)
    return time.perf_counter() - started, tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2, help="logical CPU devices")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per trainer")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per turn")
    parser.add_argument("--rounds", type=int, default=3, help="timed turns per trainer")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="override the default configuration: KEY=VALUE")
    args = parser.parse_args()

    configs, strategies = {}, {}
    for name in ("mirrored", "none"):  # the CPU is split before TensorFlow starts
        overrides = [*args.overrides, f"training.distribute={name}"]
        if name == "mirrored" and not tf.config.list_physical_devices("GPU"):
            overrides.append(f"training.cpu_replicas={args.replicas}")
        configs[name] = config = load_run_config(None, overrides)
        strategies[name] = make_strategy(name, config.training.cpu_replicas)
    from attncli.training.trainer import Trainer

    trainers = {}
    with tempfile.TemporaryDirectory() as directory:
        for name in ("none", "mirrored"):
            run = RunDirectory.create(Path(directory) / name)
            trainers[name] = Trainer.from_config(configs[name], run, Quiet(),
                                                 strategy=strategies[name])
        for trainer in trainers.values():
            timed_steps(trainer, 0, args.warmup)
        best = {name: 0.0 for name in trainers}
        for turn in range(args.rounds):
            start = args.warmup + turn * args.steps
            for name, trainer in trainers.items():
                seconds, tokens = timed_steps(trainer, start, args.steps)
                best[name] = max(best[name], tokens / seconds)
    devices = trainers["mirrored"].workers.strategy.extended.worker_devices
    print(f"{args.rounds} turns of {args.steps} steps (batch "
          f"{trainers['none'].config.data.batch_size} sentences), after {args.warmup} "
          f"warmup steps; fastest turn; mirrored over {', '.join(devices)}")
    print("| training | replicas | target tokens/s | vs one device |")
    print("| --- | ---: | ---: | ---: |")
    for name, trainer in trainers.items():
        print(f"| distribute: {name} | {trainer.workers.strategy.num_replicas_in_sync} "
              f"| {best[name]:,.0f} | {best[name] / best['none']:.2f} |")


if __name__ == "__main__":
    main()
