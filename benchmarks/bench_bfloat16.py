"""Where bfloat16 products are fast: float32 against bfloat16 under oneDNN's instruction sets.

`training.precision: auto` (attncli/training/precision.py) trains in mixed_bfloat16 only
where the CPU has bfloat16 instructions and oneDNN reaches them. This prints the rate of
the training step's typical products in float32 and bfloat16 as this machine runs them,
then with oneDNN held below bfloat16 (`ONEDNN_MAX_CPU_ISA=AVX512_CORE`: AVX-512 without
BF16, as on older servers) and with oneDNN off (`TF_ENABLE_ONEDNN_OPTS=0`: TensorFlow's
Eigen kernels), each setting in a child process of its own (oneDNN reads them at start).
Held to `AVX2`, TensorFlow 2.21's bfloat16 product aborts (oneDNN finds no kernel while
TensorFlow, which checks the CPU itself, still sends it there), so that row is not run;
on a real AVX2 CPU TensorFlow emulates bfloat16 in its Eigen kernels, as with oneDNN off.

    taskset -c 0 python -m benchmarks.bench_bfloat16
"""

import argparse
import json
import os
import subprocess
import sys
import time

# (rows, inner, columns): one step's h U; the input projection or kernel gradient of 30
# steps of 64 sentences; the output layer of 1,920 target tokens over 8,000 subwords.
PRODUCTS = [(64, 256, 768), (1920, 256, 768), (1920, 256, 8000)]

SETTINGS = [
    ("as this machine runs", {}),
    ("oneDNN held to AVX512_CORE", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}),
    ("oneDNN off", {"TF_ENABLE_ONEDNN_OPTS": "0"}),
]


def measure(repeats):
    """{product: {dtype: GFLOP/s}} of this process (best of three rounds)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    rates = {}
    for rows, inner, columns in PRODUCTS:
        key = f"({rows} x {inner}) @ ({inner} x {columns})"
        rates[key] = {}
        for dtype in (tf.float32, tf.bfloat16):
            a = tf.cast(tf.random.normal((rows, inner)), dtype)
            b = tf.cast(tf.random.normal((inner, columns)), dtype)
            product = tf.function(lambda: tf.matmul(a, b))
            for _ in range(3):
                product().numpy()
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(repeats):
                    result = product()
                result.numpy()
                best = min(best, (time.perf_counter() - start) / repeats)
            rates[key][dtype.name] = 2 * rows * inner * columns / best / 1e9
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="products timed per round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.repeats)))
        return
    print("| setting | product | float32 GFLOP/s | bfloat16 GFLOP/s | bfloat16 / float32 |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, environ in SETTINGS:
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_bfloat16", "--child",
             "--repeats", str(args.repeats)],
            env={**os.environ, **environ}, capture_output=True, text=True, check=True,
        )
        rates = json.loads(child.stdout.strip().splitlines()[-1])
        for product, rate in rates.items():
            print(f"| {name} | {product} | {rate['float32']:.0f} | {rate['bfloat16']:.0f} | "
                  f"{rate['bfloat16'] / rate['float32']:.2f}× |")


if __name__ == "__main__":
    main()
