"""Time each attncli attention layer against the closest Keras built-in.

Every pair computes the same function on the same tensors (where Keras has no
layer for a step of the paper's formula, a `keras.layers.Dense` supplies it), so
the ratio ours / Keras measures implementation cost alone. Both sides of a pair
are called alternately in one process, call after call, and the median time of
a call is reported for each side: on a shared machine the load that other
processes add then falls on both sides alike, and the median ignores the calls
that a burst of it hit.

Shapes: batch 64, dimension 256, value masks from random valid lengths in
[15, 30]; "30x30" is 30 queries over 30 keys (training, teacher forcing), "1x30"
one query over 30 keys (a decoder step). Modes: eager, `tf.function`, and
`tf.function(jit_compile=True)` (XLA); passes: forward, and forward+backward
(gradients of the sum of the output with respect to the inputs and the weights).

Usage:
    python -m benchmarks.bench_layers [--seconds 1.0]
        [--modes eager,function,xla] [--only dot,luong-general,...]
"""

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from layers import (  # noqa: E402
    BahdanauAttention,
    DotProductAttention,
    LuongAttention,
    ScaledDotSelfAttention,
)

BATCH, KEYS, DIM = 64, 30, 256
SHAPES = {"30x30": 30, "1x30": 1}
MODES = ("eager", "function", "xla")
PASSES = ("forward", "forward+backward")


@dataclass
class Contender:
    """A callable on a case's inputs, and the layers whose weights it trains."""

    call: Callable
    layers: list

    def weights(self):
        return [w for layer in self.layers for w in layer.trainable_weights]


def cross_attention(layer):
    return Contender(lambda query, values, mask: layer([query, values], mask=[None, mask]),
                     [layer])


def keras_dot(use_scale):
    attention = keras.layers.Attention(use_scale=use_scale)
    contender = cross_attention(attention)
    if use_scale:
        # Keras learns a scalar scale starting at 1; start it at 1/sqrt(d) so
        # that both sides compute softmax(q k^T / sqrt(d)) v.
        attention.build([(None, None, DIM)] * 2)
        attention.scale.assign(DIM**-0.5)
    return contender


def keras_general():
    # Luong's general score h_t^T W_a h_s is the dot score on W_a-projected keys.
    w_a = keras.layers.Dense(DIM, use_bias=False)
    attention = keras.layers.Attention()
    return Contender(
        lambda query, values, mask: attention([query, values, w_a(values)], mask=[None, mask]),
        [w_a, attention],
    )


def keras_additive(units):
    # Bahdanau's v^T tanh(W_q q + W_k k): AdditiveAttention's learned scale is v.
    w_q = keras.layers.Dense(units, use_bias=False)
    w_k = keras.layers.Dense(units, use_bias=False)
    attention = keras.layers.AdditiveAttention()
    return Contender(
        lambda query, values, mask: attention(
            [w_q(query), values, w_k(values)], mask=[None, mask]
        ),
        [w_q, w_k, attention],
    )


def ours_self_attention():
    # MultiHeadAttention ends with an output projection W_o (with bias) and has
    # biases on its projections: the same Dense after our layer gives the same math.
    attention = ScaledDotSelfAttention(key_dim=DIM, use_bias=True)
    output = keras.layers.Dense(DIM)
    return Contender(lambda inputs, mask: output(attention(inputs, mask=mask)),
                     [attention, output])


def keras_self_attention():
    attention = keras.layers.MultiHeadAttention(num_heads=1, key_dim=DIM)
    return Contender(
        lambda inputs, mask: attention(inputs, inputs, query_mask=mask, value_mask=mask),
        [attention],
    )


# name: (ours, reference, reference's label, is self-attention)
PAIRS = {
    # Keras against itself: how far from 1 the noise alone moves a ratio.
    "keras-vs-keras": (lambda: keras_dot(True), lambda: keras_dot(True),
                       "Attention(use_scale)", False),
    "dot": (lambda: cross_attention(DotProductAttention()), lambda: keras_dot(True),
            "Attention(use_scale)", False),
    "luong-dot": (lambda: cross_attention(LuongAttention(score="dot")),
                  lambda: keras_dot(False), "Attention()", False),
    "luong-general": (lambda: cross_attention(LuongAttention(score="general")),
                      keras_general, "Dense + Attention()", False),
    "bahdanau": (lambda: cross_attention(BahdanauAttention(units=DIM)),
                 lambda: keras_additive(DIM), "2 Dense + AdditiveAttention", False),
    "self-attention": (ours_self_attention, keras_self_attention,
                       "MultiHeadAttention(1 head)", True),
    "luong-local-m": (
        lambda: cross_attention(LuongAttention(score="general", alignment="local-m")),
        lambda: cross_attention(LuongAttention(score="general")),
        "LuongAttention global", False),
    "luong-local-p": (
        lambda: cross_attention(LuongAttention(score="general", alignment="local-p")),
        lambda: cross_attention(LuongAttention(score="general")),
        "LuongAttention global", False),
}


def case_inputs(num_queries, self_attention, rng):
    mask = tf.constant(np.arange(KEYS)[None] < rng.integers(15, KEYS + 1, size=(BATCH, 1)))
    values = tf.constant(rng.normal(size=(BATCH, KEYS, DIM)).astype("float32"))
    if self_attention:
        return (values, mask)
    query = tf.constant(rng.normal(size=(BATCH, num_queries, DIM)).astype("float32"))
    return (query, values, mask)


def step_function(contender, pass_name):
    if pass_name == "forward":
        return contender.call

    def forward_backward(*args):
        with tf.GradientTape() as tape:
            watched = [x for x in args if x.dtype.is_floating]
            tape.watch(watched)
            loss = tf.reduce_sum(contender.call(*args))
        return tape.gradient(loss, watched + contender.weights())

    return forward_backward


def compiled(step, mode):
    if mode == "eager":
        return step
    return tf.function(step, jit_compile=(mode == "xla"))


def seconds_per_call(step, inputs, calls):
    start = time.perf_counter()
    for _ in range(calls):
        step(*inputs)
    return (time.perf_counter() - start) / calls


def measure(pair, num_queries, mode, pass_name, seconds, rng):
    make_ours, make_reference, _, self_attention = PAIRS[pair]
    inputs = case_inputs(num_queries, self_attention, rng)
    steps = []
    for make in (make_ours, make_reference):
        contender = make()
        contender.call(*inputs)  # builds the weights before any tracing
        step = compiled(step_function(contender, pass_name), mode)
        seconds_per_call(step, inputs, 3)  # traces, compiles, warms up
        steps.append(step)
    slowest = max(seconds_per_call(step, inputs, 3) for step in steps)
    calls = max(20, round(seconds / slowest))
    times = ([], [])
    for call_index in range(calls):
        # Call by call, alternating which side goes first.
        for side in (0, 1) if call_index % 2 == 0 else (1, 0):
            start = time.perf_counter()
            steps[side](*inputs)
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="time spent calling each side of each case")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {','.join(MODES)}")
    parser.add_argument("--only", default=",".join(PAIRS),
                        help=f"comma-separated subset of {','.join(PAIRS)}")
    args = parser.parse_args()
    modes = args.modes.split(",")
    pairs = args.only.split(",")
    unknown = sorted(set(modes) - set(MODES)) + sorted(set(pairs) - set(PAIRS))
    if unknown:
        parser.error(f"unknown mode or pair: {', '.join(unknown)}")

    rng = np.random.default_rng(0)
    print(f"batch {BATCH}, {KEYS} keys, dim {DIM}; median of alternating calls, "
          f"~{args.seconds} s per side; TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}, {os.cpu_count()} CPUs, "
          f"GPUs: {len(tf.config.list_physical_devices('GPU'))}")
    print()
    print("| ours | reference | shape | mode | pass | ours ms | reference ms | ratio |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: |")
    for pair in pairs:
        label = PAIRS[pair][2]
        for shape, num_queries in SHAPES.items():
            if PAIRS[pair][3] and num_queries == 1:
                continue  # self-attention over one sequence has no 1-query form
            for mode in modes:
                for pass_name in PASSES:
                    ours, reference = measure(pair, num_queries, mode, pass_name,
                                              args.seconds, rng)
                    print(f"| {pair} | {label} | {shape} | {mode} | {pass_name} | "
                          f"{ours * 1e3:.2f} | {reference * 1e3:.2f} | "
                          f"{ours / reference:.2f} |", flush=True)


if __name__ == "__main__":
    main()
