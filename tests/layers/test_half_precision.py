"""Half precision: no score overflows and no weight is NaN, however large the scores.

Every layer of `layers/`, with every score and alignment, in float16 and bfloat16 and
under the mixed_float16 and mixed_bfloat16 policies, on queries and keys near 300: the
dot product of two such 8-component vectors is about 300² · 8 = 720,000, far past
float16's largest number, 65,504. Some keys are masked (one of them the key that would
win), two keys are equal (their weights must be equal), a query is padding, and one
sentence is masked throughout. The layers compute the scores and the softmax in float32
there; the checks:

- outputs and weights are finite and in the layer's compute dtype;
- the weights are those of a NumPy float64 reference written from the formulas (the
  score, then the softmax over the allowed keys) within the half type's precision; the
  reference reads the inputs as the layer received them, rounded to the half type;
- each query's weights sum to 1 over its allowed keys (Luong's local-p: to its
  Gaussian-weighted share, at most 1), masked keys get exactly 0, and a sentence
  masked throughout gets all-zero weights and a zero context, as in float32;
- in float16, the gradients reach every weight, finite.

And `masked_softmax` itself: scores that overflowed to `±inf` give no NaN either.

`keras.ops` only, so the module runs on every Keras backend.
"""

import math
from dataclasses import dataclass

import keras
import ml_dtypes
import numpy as np
import pytest
from keras import ops

from backend_gradients import gradients
from layers import (
    BahdanauAttention,
    DotProductAttention,
    LuongAttention,
    MultiHeadAttention,
    ScaledDotSelfAttention,
    masked_softmax,
)
from numpy_attention import reference_softmax
from numpy_luong import luong_attention

BATCH, TQ, TV = 3, 4, 6
DIM, VALUE_DIM, UNITS = 8, 5, 6
MAGNITUDE = 300.0
POLICIES = ["float16", "bfloat16", "mixed_float16", "mixed_bfloat16"]
NUMPY_HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}

# Key 2 of sentence 0 (the key that would win) and the padding after each sentence are
# masked; sentence 2 is masked throughout. Query 3 of sentence 1 is padding.
VALUE_MASK = np.array([
    [True, True, False, True, True, False],
    [True, True, True, True, False, False],
    [False] * TV,
])
QUERY_MASK = np.array([[True] * TQ, [True, True, True, False], [True] * TQ])

# A weight of a half type is within half a unit in the last place of the exact one,
# 2^-12 (float16) and 2^-9 (bfloat16) near 1. The rest is the projections, which run
# in the compute dtype (`X W_q`, `W_k k`, `W_a k`, ...): at inputs near 300 they are
# near 600, off by up to 0.25 (float16) or 2 (bfloat16), which moves a tanh-bounded
# score (concat, additive) whose argument is near 0 by up to `|v|`. On these inputs
# the weights of those scores are off by up to 0.007 (float16) and 0.05 (bfloat16),
# those of the dot scores by less than 0.001.
WEIGHT_TOLERANCE = {"float16": 0.02, "bfloat16": 0.1}


def numpy_of(tensor):
    return ops.convert_to_numpy(ops.cast(tensor, "float32")).astype("float64")


def as_received(array, compute_dtype):
    """`array` rounded to `compute_dtype`, as the layer receives it, in float64."""
    return np.asarray(array).astype(NUMPY_HALF[compute_dtype]).astype("float64")


def large_inputs(seed=0):
    """query `(B, Tq, DIM)`, keys `(B, Tv, DIM)` and values `(B, Tv, VALUE_DIM)` near
    `MAGNITUDE`. Key 3 equals key 1, which equals query 1; masked key 2 of sentence 0
    is twice query 0, so that query 0 would attend to it alone if it were allowed."""
    rng = np.random.default_rng(seed)
    query = MAGNITUDE * rng.normal(size=(BATCH, TQ, DIM))
    keys = MAGNITUDE * rng.normal(size=(BATCH, TV, DIM))
    keys[:, 1] = query[:, 1]
    keys[:, 3] = keys[:, 1]
    keys[0, 2] = 2.0 * query[0, 0]
    values = MAGNITUDE * rng.normal(size=(BATCH, TV, VALUE_DIM))
    return query, keys, values


def set_weights(layer, seed=1):
    """Seeded weights, the same on every backend; normal with standard deviation 0.5
    (a gain `g` of 1.5, so the normalised score is not a tiny one)."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        shape = tuple(weight.shape)
        value = np.full(shape, 1.5) if shape == () else rng.normal(scale=0.5, size=shape)
        weight.assign(value.astype("float32"))


def parameters(layer):
    """The layer's weights by their path below the layer, as float64 arrays."""
    prefix = layer.name + "/"
    return {weight.path.removeprefix(prefix): numpy_of(weight) for weight in layer.weights}


# The scores from the papers' formulas, for queries q (B, Tq, d) and keys k (B, Tv, d).
# Keras stores a matrix in the (input, output) layout, the papers' transposed.
def reference_scores(score, q, k, p):
    if score == "dot":  # Luong et al. 2015, eq. 8
        return np.einsum("bqd,bkd->bqk", q, k)
    if score == "scaled_dot":  # Vaswani et al. 2017, eq. 1
        return np.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    if score == "general":  # h_tᵀ W h̄_s, W = W_aᵀ
        return np.einsum("bqd,de,bke->bqk", q, p["W_a"].T, k)
    pairs_q = np.broadcast_to(q[:, :, None], q.shape[:2] + (k.shape[1], q.shape[2]))
    pairs_k = np.broadcast_to(k[:, None], (k.shape[0], q.shape[1]) + k.shape[1:])
    if score == "concat":  # v_aᵀ tanh(W [h_t; h̄_s])
        stacked = np.concatenate([pairs_q, pairs_k], axis=-1)
        return np.tanh(stacked @ p["W_a"]) @ p["v_a"]
    # additive (Bahdanau et al. 2015, A.1.2): vᵀ tanh(W_q q + W_k k), or its
    # weight-normalised form (g v / ‖v‖)ᵀ tanh(W_q q + W_k k + b)
    v, b = p["v"], p.get("b", 0.0)
    if "g" in p:
        v = p["g"] * v / np.sqrt(np.sum(v**2))
    return np.tanh(pairs_q @ p["W_q"] + pairs_k @ p["W_k"] + b) @ v


def allowed_keys(batch_shape=(BATCH, TQ, TV)):
    return np.broadcast_to(VALUE_MASK[:, None, :], batch_shape)


@dataclass(frozen=True)
class Case:
    """One layer configuration: how to make it, call it and compute its reference."""

    name: str
    make: object               # dtype -> an unbuilt layer
    self_attention: bool = False

    def call(self, layer, query, keys, values):
        if self.self_attention:
            return layer(keys, mask=VALUE_MASK, return_attention_scores=True)
        return layer([query, values, keys], mask=[QUERY_MASK, VALUE_MASK],
                     return_attention_scores=True)

    def reference_weights(self, layer, query, keys, values):
        """The weights from the formulas, float64, with the layer's weights."""
        p = parameters(layer)
        if isinstance(layer, ScaledDotSelfAttention):
            x = keys
            scores = reference_scores("dot", x @ p["W_q"], x @ p["W_k"], p)
            if layer.use_scale:
                scores = scores / math.sqrt(layer.key_dim)
            # A padding position attends as any other (its output is zeroed after).
            return reference_softmax(scores, allowed_keys((BATCH, TV, TV)))
        if isinstance(layer, MultiHeadAttention):
            return reference_multi_head_weights(layer, query, keys, p)
        if isinstance(layer, LuongAttention):
            matrices = {name: (m.T if name in ("W_a", "W_p") else m) for name, m in p.items()}
            _, weights, _ = luong_attention(
                query, keys, values, score=layer.score_name, alignment=layer.alignment,
                window=layer.window, matrices=matrices, value_mask=VALUE_MASK,
            )
            return weights
        if isinstance(layer, BahdanauAttention):
            return reference_softmax(reference_scores("additive", query, keys, p),
                                     allowed_keys())
        name = "scaled_dot" if layer.use_scale else "dot"
        return reference_softmax(reference_scores(name, query, keys, p), allowed_keys())


def reference_multi_head_weights(layer, query, keys, p):
    """Each head's weights, `(B, h, Tq, Tv)`: head i scores `q W_q^i + b_q^i`
    against `k W_k^i + b_k^i` (Vaswani et al. 2017, 3.2.2) with the layer's score,
    whose own weights (`score/...`) all heads share."""
    score_weights = {name.removeprefix("score/"): m for name, m in p.items()}
    heads = []
    for i in range(layer.num_heads):
        columns = slice(i * layer.key_dim, (i + 1) * layer.key_dim)
        q_i = query @ p["W_q"][:, columns] + p["b_q"][columns]
        k_i = keys @ p["W_k"][:, columns] + p["b_k"][columns]
        scores = reference_scores(layer.score_name, q_i, k_i, score_weights)
        heads.append(reference_softmax(scores, allowed_keys()))
    return np.stack(heads, axis=1)


CASES = [
    Case("dot_product/scaled", lambda dtype: DotProductAttention(dtype=dtype)),
    Case("dot_product/unscaled",
         lambda dtype: DotProductAttention(use_scale=False, dtype=dtype)),
    *[
        Case(f"luong/{score}/{alignment}",
             lambda dtype, s=score, a=alignment: LuongAttention(
                 score=s, alignment=a, window=2, dtype=dtype))
        for score in ("dot", "general", "concat")
        for alignment in ("global", "local-m", "local-p")
    ],
    *[
        Case(f"bahdanau/normalize={normalize}",
             lambda dtype, n=normalize: BahdanauAttention(UNITS, normalize=n, dtype=dtype))
        for normalize in (False, True)
    ],
    *[
        Case(f"self_attention/use_scale={use_scale}",
             lambda dtype, u=use_scale: ScaledDotSelfAttention(
                 DIM, value_dim=VALUE_DIM, use_scale=u, dtype=dtype),
             self_attention=True)
        for use_scale in (True, False)
    ],
    *[
        Case(f"multi_head/{score}",
             lambda dtype, s=score: MultiHeadAttention(
                 2, DIM, VALUE_DIM, score=s,
                 units=UNITS if s in ("concat", "additive") else None, dtype=dtype))
        for score in ("scaled_dot", "dot", "general", "concat", "additive")
    ],
]


def run_case(case, policy):
    """`(layer, outputs, weights, reference weights)` on the large inputs."""
    layer = case.make(policy)
    dtype = layer.compute_dtype
    query, keys, values = (as_received(a, dtype) for a in large_inputs())
    case.call(layer, query, keys, values)  # builds the layer
    set_weights(layer)
    outputs, weights = case.call(layer, query, keys, values)
    return layer, outputs, weights, case.reference_weights(layer, query, keys, values)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_large_inputs_give_the_reference_weights_without_nan(case, policy):
    layer, outputs, weights, expected = run_case(case, policy)
    dtype = layer.compute_dtype
    for tensor in (outputs, weights):
        assert keras.backend.standardize_dtype(tensor.dtype) == dtype
    outputs, weights = numpy_of(outputs), numpy_of(weights)
    assert np.all(np.isfinite(outputs)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights, expected, atol=WEIGHT_TOLERANCE[dtype])
    # weights: batch x (heads x) Tq x Tv; every head alike below.
    weights = weights.reshape((BATCH, -1, TV))
    expected = expected.reshape((BATCH, -1, TV))
    allowed = np.broadcast_to(VALUE_MASK[:, None, :], weights.shape)
    assert np.all(weights[~allowed] == 0.0)
    np.testing.assert_array_equal(weights[2], 0.0)
    # A zero context: multi-head attention's output projection adds its bias b_o.
    zero_context = 0.0
    if isinstance(layer, MultiHeadAttention):
        zero_context = as_received(parameters(layer)["b_o"], dtype)
    np.testing.assert_array_equal(outputs[2], np.broadcast_to(zero_context, outputs[2].shape))
    sums = weights.sum(axis=-1)
    # Half a unit in the last place per allowed key, at most.
    np.testing.assert_allclose(sums, expected.sum(axis=-1), atol=TV * 2.0**-8)
    if getattr(layer, "alignment", "global") != "local-p":
        np.testing.assert_allclose(sums[:2], 1.0, atol=TV * 2.0**-8)


@pytest.mark.parametrize("policy", POLICIES)
def test_equal_keys_share_the_weight_equally(policy):
    """Keys 1 and 3 are equal, and equal to query 1: under the dot score they tie
    for its whole weight, 1/2 each, at scores near 720,000."""
    layer, _, weights, _ = run_case(CASES[1], policy)
    weights = numpy_of(weights)
    np.testing.assert_array_equal(weights[:2, 1, 1], weights[:2, 1, 3])
    np.testing.assert_allclose(weights[:2, 1, 1], 0.5, atol=2.0**-9)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_global_policy_reaches_the_score(policy):
    """Under `keras.config.set_dtype_policy` (how a model is built in mixed
    precision), the audited layers: Luong's dot score and multi-head dot and
    general, whose inner score layer takes the policy from its parent."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        for case in CASES:
            if case.name not in ("luong/dot/global", "multi_head/dot", "multi_head/general"):
                continue
            layer, outputs, weights, expected = run_case(case, None)
            assert layer.dtype_policy.name == policy
            assert keras.backend.standardize_dtype(weights.dtype) == layer.compute_dtype
            assert np.all(np.isfinite(numpy_of(outputs)))
            np.testing.assert_allclose(numpy_of(weights), expected,
                                       atol=WEIGHT_TOLERANCE[layer.compute_dtype])
    finally:
        keras.config.set_dtype_policy(previous)


@pytest.mark.parametrize("policy", ["float16", "mixed_float16"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_gradients_on_large_inputs_are_finite(case, policy):
    """Training reads the gradients too: they reach every weight, finite, through
    the float32 scores and the casts around them."""
    layer = case.make(policy)
    query, keys, values = (as_received(a, layer.compute_dtype) for a in large_inputs())
    case.call(layer, query, keys, values)
    set_weights(layer)

    def loss():
        outputs, _ = case.call(layer, query, keys, values)
        # Outputs near 300 summed: scaled to a loss of order 1, as a real one is.
        return ops.sum(ops.cast(outputs, "float32")) * 1e-3

    by_weight, _ = gradients(loss, layer.trainable_weights)
    for weight, gradient in zip(layer.trainable_weights, by_weight):
        assert gradient is not None, weight.path
        assert np.all(np.isfinite(gradient)), weight.path


INF = float("inf")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_masked_softmax_of_scores_that_overflowed(dtype):
    """`+inf` scores (an overflow upwards) share the weight, `-inf` ones get none,
    a row whose allowed scores all overflowed downwards shares it equally, and a
    row masked throughout is zero whatever its scores, NaN included."""
    scores = np.array([
        [INF, 3.0, INF, -INF],
        [-INF, -INF, 1.0, INF],     # the +inf is masked
        [-INF, -INF, -INF, 2.0],    # the 2 is masked
        [np.nan, INF, -INF, 0.0],   # masked throughout
    ])
    mask = np.array([
        [True, True, True, True],
        [True, True, True, False],
        [True, True, True, False],
        [False, False, False, False],
    ])
    weights = masked_softmax(ops.cast(scores, dtype), mask)
    assert keras.backend.standardize_dtype(weights.dtype) == dtype
    expected = np.array([
        [0.5, 0.0, 0.5, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [1 / 3, 1 / 3, 1 / 3, 0.0],
        [0.0, 0.0, 0.0, 0.0],
    ])
    np.testing.assert_allclose(numpy_of(weights), expected, atol=2.0**-8)
