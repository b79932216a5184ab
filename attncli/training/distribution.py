"""TensorFlow's distribution strategies for `training.distribute`, and who owns the run.

    none          tf.distribute's default strategy: one device, the plain training step
    mirrored      MirroredStrategy over this machine's GPUs (or its logical CPU devices)
    multi-worker  MultiWorkerMirroredStrategy over the machines of `TF_CONFIG`

The cluster of a multi-worker run is TensorFlow's `TF_CONFIG` (an environment variable
holding JSON: `{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker",
"index": 0}}`). The chief is the task of type `chief`, or worker 0 when there is none;
it owns the run directory. Every other worker keeps its own copy of the run (its
configuration, vocabularies and checkpoints) in `RUN.TYPE-INDEX` beside it, so that a
shared filesystem never sees two processes write one file, and `--resume` on each
machine restores that machine's own checkpoints (see `Trainer`).

A strategy must be made before TensorFlow runs its first operation: MultiWorkerMirrored
configures the runtime for the cluster, and logical CPU devices can only be declared
before it starts.

`Workers` is the one place that says who writes (the chief) and what the workers agree
on: that they train the same run, which checkpoint they resume from, and every figure or
clock reading that ends or shapes the training loop.
"""

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from attncli.config.schema import to_mapping
from attncli.errors import AttncliError


@dataclasses.dataclass(frozen=True)
class ClusterRole:
    """This process's place in a multi-worker cluster.

    Args:
        task_type: `"chief"` or `"worker"`.
        index: int, the task's index among those of its type.
        workers: int, the number of tasks that train (chief included).
        is_chief: bool, whether this task owns the run directory.
    """

    task_type: str
    index: int
    workers: int
    is_chief: bool

    def directory(self, run_dir):
        """Where this task keeps its run: the run itself for the chief, else beside it."""
        run_dir = Path(run_dir)
        if self.is_chief:
            return run_dir
        return run_dir.with_name(f"{run_dir.name}.{self.task_type}-{self.index}")


def cluster_role(environ=None):
    """The `ClusterRole` that `TF_CONFIG` gives this process.

    Raises:
        AttncliError: when `TF_CONFIG` is missing, is not JSON, or does not name a
            task of the cluster.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    if not text:
        raise AttncliError(
            "training.distribute=multi-worker needs TF_CONFIG, e.g. TF_CONFIG='{\"cluster\": "
            "{\"worker\": [\"host1:12345\", \"host2:12345\"]}, \"task\": {\"type\": \"worker\", "
            "\"index\": 0}}' on each machine (see README)"
        )
    try:
        spec = json.loads(text)
        cluster, task = spec["cluster"], spec["task"]
        task_type, index = task["type"], task["index"]
        tasks = cluster.get(task_type)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AttncliError(
            "TF_CONFIG is not a cluster spec: expected JSON with \"cluster\" (task type -> "
            f"list of host:port) and \"task\" (\"type\", \"index\"). Received: TF_CONFIG={text}"
        ) from None
    if task_type not in ("chief", "worker"):
        raise AttncliError(
            f"TF_CONFIG: task type {task_type!r} cannot train; attncli runs chief and worker "
            "tasks only"
        )
    if not isinstance(tasks, list) or not isinstance(index, int) or not 0 <= index < len(tasks):
        raise AttncliError(
            f"TF_CONFIG: task {task_type} {index} is not in the cluster's {task_type} list"
        )
    others = sorted(set(cluster) - {"chief", "worker"})
    if others:
        raise AttncliError(
            f"TF_CONFIG: the cluster has {others[0]!r} tasks; attncli trains with chief and "
            "worker tasks only (MultiWorkerMirroredStrategy): remove the others"
        )
    workers = sum(len(cluster.get(name) or []) for name in ("chief", "worker"))
    is_chief = task_type == "chief" or (index == 0 and not cluster.get("chief"))
    return ClusterRole(task_type, index, workers, is_chief)


def make_strategy(name, cpu_replicas=None):
    """The `tf.distribute.Strategy` of `training.distribute`.

    Args:
        name: `"none"`, `"mirrored"` or `"multi-worker"`.
        cpu_replicas: int or None; with `"mirrored"` on a machine without GPUs, split
            the CPU into this many logical devices, one replica each. None uses the
            logical CPU devices already declared (one, unless a program declared more).

    Returns:
        The strategy: the default one for `"none"`.

    Raises:
        AttncliError: for `"multi-worker"` without a usable `TF_CONFIG`, or when the
            CPU cannot be split any more because TensorFlow has started.
    """
    import tensorflow as tf

    if name == "none":
        return tf.distribute.get_strategy()
    if name == "multi-worker":
        cluster_role()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    if cpu_replicas is not None:
        _split_cpu(tf, cpu_replicas)
    # Without GPUs, MirroredStrategy's default is CPU:0 alone.
    devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)


def _split_cpu(tf, count):
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError:
        # Already started: fine if the CPU is split as asked.
        found = len(tf.config.list_logical_devices("CPU"))
        if found != count:
            raise AttncliError(
                f"training.cpu_replicas={count}: TensorFlow has started with {found} logical "
                "CPU device(s) and cannot be split again in this process"
            ) from None


def make_agreement(strategy):
    """`agree(value, op="max") -> float`: one value every replica of `strategy` agrees on.

    Decisions each worker takes from its own clock or signals (stop now?) or from a
    figure it computed itself (is this the best model?) must come out the same on every
    worker, or some would wait forever for the others' next collective.

    Args:
        strategy: a `tf.distribute.Strategy`; with one replica, values pass through.

    Returns:
        A function of a Python number and `"max"` or `"min"`, returning a float.
    """
    import tensorflow as tf

    if strategy.num_replicas_in_sync == 1:
        return lambda value, op="max": float(value)
    # tf.distribute reduces by SUM or MEAN only: the extremes come from all the values.
    reductions = {"max": tf.reduce_max, "min": tf.reduce_min}
    functions = {}

    def reduced(op):
        def replica_fn(value):
            context = tf.distribute.get_replica_context()
            return reductions[op](context.all_gather(tf.reshape(value, [1]), axis=0))

        @tf.function(input_signature=[tf.TensorSpec((), tf.float64)])
        def function(value):
            per_replica = strategy.run(replica_fn, args=(value,))
            return strategy.experimental_local_results(per_replica)[0]

        return function

    def agree(value, op="max"):
        if op not in functions:
            functions[op] = reduced(op)
        return float(functions[op](tf.constant(float(value), tf.float64)))

    return agree


class Workers:
    """The processes that train one run together: which of them writes, what they agree on.

    Under a `tf.distribute` strategy every decision that ends or shapes the training
    loop must come out the same on every worker, since a worker that stopped alone
    would leave the others waiting in their next collective. Every worker validates
    (same weights, same sentences); only the chief writes the run's records and model.

    Args:
        strategy: the `tf.distribute.Strategy` the run trains under.
        distributed: bool, whether `training.distribute` is not `"none"` (the batches
            are distributed and the train step is the strategy's).
        is_chief: bool, whether this worker writes the run's records and best model.
            Defaults to True.
    """

    def __init__(self, strategy, distributed, is_chief=True):
        self.strategy = strategy
        self.distributed = distributed
        self.is_chief = is_chief
        self.agree = make_agreement(strategy)

    def check_same_run(self, config, source_vocabulary_size, target_vocabulary_size,
                       training_pairs):
        """Stop every worker if they do not train the same configuration on the same data.

        Workers given different settings (a `--set` on one machine only) or different
        files would compute different batches: at best a silent mix, at worst a hang.
        """
        mapping = to_mapping(config)
        mapping["data"].pop("directory", None)  # where the files are may differ
        described = json.dumps(
            [mapping, source_vocabulary_size, target_vocabulary_size, training_pairs],
            sort_keys=True,
        )
        # 52 bits: exact in the float64 the agreement carries.
        fingerprint = int(hashlib.sha256(described.encode()).hexdigest()[:13], 16)
        if self.agree(fingerprint, "min") != self.agree(fingerprint, "max"):
            raise AttncliError(
                "the workers do not train the same run (their configurations, --set "
                "overrides or data files differ); give every worker the same ones"
            )

    def common_checkpoint(self, newest):
        """The newest checkpoint number every worker holds, given this worker's `newest`.

        One killed while the others saved lacks their last checkpoint. Alone, `newest`
        itself.
        """
        if not self.distributed:
            return newest
        fewest, most = self.agree(newest, "min"), self.agree(newest, "max")
        if fewest == 0 and most > 0:
            raise AttncliError(
                "some workers hold checkpoints of this run and others none; resume "
                "every worker with the run it trained, or start all with --overwrite"
            )
        return fewest

    def check_same_checkpoint(self, number, restored):
        """Stop every worker unless all restored checkpoint `number` (`restored`: its path)."""
        if self.distributed and self.agree(number, "min") != self.agree(number, "max"):
            raise AttncliError(
                f"the workers restored different checkpoints (this one: {restored or 'none'}); "
                "start the run again with --overwrite on every worker"
            )
