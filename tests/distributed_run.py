"""Train a configuration in this process and print its per-step losses as JSON.

    python tests/distributed_run.py CONFIG WORK_DIR [--cpu-devices N] [--set KEY=VALUE ...]
        [--runs none,mirrored]

A helper of tests/training/test_distribute.py, run as a subprocess: logical CPU devices must be
declared before TensorFlow starts, so a test process that has already run TensorFlow
cannot. Each run of `--runs` trains the configuration from scratch with that
`training.distribute` in `WORK_DIR/NAME`, then takes one more step on a batch of a
single sentence (fewer rows than replicas). Prints `{NAME: {"losses": [...],
"records": [...], "replicas", "padding", "single_sentence_step": {"loss",
"tokens"}}}`.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402

from attncli.training.distribution import make_strategy  # noqa: E402
from attncli.data.pipeline import epoch_batches  # noqa: E402
from attncli.config.run import load_run_config  # noqa: E402
from attncli.training.run_directory import RunDirectory  # noqa: E402
from recorder import Recorder  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("work", type=Path)
    parser.add_argument("--cpu-devices", type=int, default=1)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--runs", default="none,mirrored")
    args = parser.parse_args()
    if args.cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
        )
    from attncli.training.trainer import Trainer

    output = {}
    for name in args.runs.split(","):
        config = load_run_config(
            args.config, [*args.overrides, f"training.distribute={name}"]
        )
        strategy = make_strategy(name)
        recorder = Recorder(echo=True)
        trainer = Trainer.from_config(config, RunDirectory.create(args.work / name), recorder,
                                      strategy=strategy)
        trainer.fit()
        output[name] = {
            "losses": recorder.losses,
            "records": recorder.records,
            "replicas": strategy.num_replicas_in_sync,
            "padding": trainer.stats.padding_fraction,
            "single_sentence_step": single_sentence_step(trainer),
        }
    print(json.dumps(output))


def single_sentence_step(trainer):
    """One more step, on a batch of the first training sentence alone."""
    dataset = epoch_batches(trainer.parts.encoded, 0, batch_size=1, bucketing=False, shuffle=False)
    dataset = dataset.take(1)
    if trainer.workers.distributed:
        dataset = trainer.workers.strategy.experimental_distribute_dataset(dataset)
        inputs, target_out = next(iter(dataset))
        result = trainer.train_step(inputs, target_out, 0)
    else:
        inputs, target_out = next(iter(dataset))
        result = trainer.train_step(inputs, target_out)
    return {"loss": float(result["loss"]), "tokens": int(result["tokens"])}


if __name__ == "__main__":
    main()
