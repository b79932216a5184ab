"""What projecting the keys once per source saves a step-by-step decoder.

For each attention layer, times one decoder step (one query per sentence) through
`attend`, with the keys projected once beforehand (`projected_keys=`) and with them
projected again at every step, both compiled with `tf.function`, and prints a
table. Timings on a shared machine are noisy: read the ratio, measured in one
process, rather than the milliseconds.

    python -m benchmarks.attention_decode_step [--batch 64] [--source-length 30]
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from layers import BahdanauAttention, LuongAttention  # noqa: E402


def median_ms(step, repeats):
    step()  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--source-length", type=int, default=30)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    query = tf.constant(rng.normal(size=(args.batch, 1, args.dim)).astype("float32"))
    memory = tf.constant(
        rng.normal(size=(args.batch, args.source_length, args.dim)).astype("float32")
    )
    lengths = rng.integers(args.source_length // 2, args.source_length + 1, size=args.batch)
    value_mask = tf.constant(np.arange(args.source_length)[None, :] < lengths[:, None])
    positions = tf.fill((args.batch, 1), args.source_length // 2)

    layers = {
        "Bahdanau": BahdanauAttention(args.dim),
        "Bahdanau, normalize": BahdanauAttention(args.dim, normalize=True),
        "Luong dot": LuongAttention("dot"),
        "Luong general": LuongAttention("general"),
        "Luong concat": LuongAttention("concat"),
        "Luong general, local-m": LuongAttention("general", alignment="local-m"),
        "Luong general, local-p": LuongAttention("general", alignment="local-p"),
    }
    rows = []
    for name, layer in layers.items():
        layer.build([query.shape, memory.shape])
        projected_keys = layer.project_keys(memory)

        def attend(projected):
            return layer.attend(
                query, memory, memory, value_mask=value_mask,
                query_positions=positions, projected_keys=projected,
            )

        once = tf.function(lambda: attend(projected_keys))
        every_step = tf.function(lambda: attend(None))
        ms_once = median_ms(once, args.repeats)
        ms_every = median_ms(every_step, args.repeats)
        rows.append((name, ms_once, ms_every, ms_every / ms_once))

    print(
        f"one decoder step: batch {args.batch}, source length {args.source_length}, "
        f"dim = units = {args.dim}, median of {args.repeats}"
    )
    print("| layer | keys projected once (ms) | keys projected every step (ms) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, ms_once, ms_every, ratio in rows:
        print(f"| {name} | {ms_once:.3f} | {ms_every:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
