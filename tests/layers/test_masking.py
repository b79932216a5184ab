import warnings

import keras
import ml_dtypes
import numpy as np
import pytest
from keras import ops

from backend_gradients import gradients
from layers import masked_softmax, sequence_mask


def reference_masked_softmax(scores, mask):
    """softmax over the valid positions only; rows without one are all zero."""
    weights = np.zeros_like(scores, dtype="float64")
    for index in np.ndindex(scores.shape[:-1]):
        valid = mask[index]
        if valid.any():
            row = scores[index][valid].astype("float64")
            e = np.exp(row - row.max())
            weights[index][valid] = e / e.sum()
    return weights


def test_sequence_mask_matches_lengths():
    mask = ops.convert_to_numpy(sequence_mask(np.array([0, 2, 4]), 4))
    expected = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(mask, expected)


def test_sequence_mask_per_query_lengths():
    mask = ops.convert_to_numpy(sequence_mask(np.array([[1, 3]]), 3))
    np.testing.assert_array_equal(mask, [[[1, 0, 0], [1, 1, 1]]])


def test_masked_softmax_against_numpy():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(3, 5, 7)).astype("float32")
    lengths = np.array([7, 3, 0])
    mask = np.arange(7)[None, None, :] < lengths[:, None, None]
    mask = np.broadcast_to(mask, scores.shape)
    got = ops.convert_to_numpy(masked_softmax(scores, mask))
    np.testing.assert_allclose(got, reference_masked_softmax(scores, mask), atol=1e-6)
    assert np.all(got[~mask] == 0.0)
    assert np.all(got[2] == 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("magnitude", [1.0, 1e4, -1e4])
def test_masked_softmax_finite_in_every_float_type(dtype, magnitude):
    scores = ops.cast(np.full((2, 4), magnitude, "float32"), dtype)
    mask = np.array([[True, True, False, False], [False, False, False, False]])
    weights = ops.convert_to_numpy(ops.cast(masked_softmax(scores, mask), "float32"))
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[0], [0.5, 0.5, 0.0, 0.0], rtol=1e-2)
    np.testing.assert_array_equal(weights[1], 0.0)
    assert masked_softmax(scores, mask).dtype == scores.dtype


def test_masked_softmax_over_one_position_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = masked_softmax(np.ones((2, 1), "float32"), np.array([[True], [False]]))
    np.testing.assert_array_equal(ops.convert_to_numpy(weights), [[1.0], [0.0]])


# Masking must not depend on how large the scores are: a sweep of magnitudes up to
# each dtype's largest finite number, both signs, with the pattern of the classic
# failure (valid scores all below a fixed fill value such as -1e9).
FINITE_MAX = {
    "float64": float(np.finfo("float64").max),
    "float32": float(np.finfo("float32").max),
    "float16": float(np.finfo("float16").max),
    "bfloat16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
}
# Within the rounding of the dtype the weights are returned in.
WEIGHT_TOLERANCE = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 4e-3}
MAGNITUDES = [0.0, 0.5, 3.0, 1e2, 1e4, 6e4, 1e9, 2e9, 1e15, 1e30, 1e38, 3e38]
ROWS = np.array([
    [-2.0, -3.0, 5.0, -2.0, 1.0],   # masked: the largest, and the last
    [1.0, -1.0, 1.0, 0.0, -3.0],    # masked: one equal to the valid maximum
    [3.0, 2.0, 1.0, 0.0, -1.0],     # masked throughout
    [-1.0, -3.0, -2.0, 0.5, 2.0],   # one valid position, the smallest score
])
ROW_MASKS = np.array([
    [True, True, False, True, False],
    [True, True, False, True, True],
    [False, False, False, False, False],
    [False, True, False, False, False],
])


def scores_at(magnitude, sign, dtype):
    """`ROWS` scaled to `sign * magnitude`, clipped to the dtype's finite range, as a
    tensor of `dtype` and as the float64 values it holds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns that it truncates float64
        available = keras.backend.standardize_dtype(ops.ones(1, dtype=dtype).dtype)
    if available != dtype:
        pytest.skip(f"{dtype} is off on this backend (JAX without x64)")
    limit = FINITE_MAX[dtype]
    scores = np.clip(sign * magnitude * ROWS, -limit, limit)
    if dtype != "float64":
        scores = scores.astype("float32")  # within float32's range after the clip
    tensor = ops.cast(ops.convert_to_tensor(scores), dtype)
    return tensor, ops.convert_to_numpy(tensor).astype("float64")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("magnitude", MAGNITUDES)
def test_masked_softmax_at_every_magnitude(magnitude, sign, dtype):
    scores, held = scores_at(magnitude, sign, dtype)
    weights = masked_softmax(scores, ROW_MASKS)
    assert keras.backend.standardize_dtype(weights.dtype) == dtype
    weights = ops.convert_to_numpy(weights).astype("float64")
    assert np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[~ROW_MASKS], 0.0)
    np.testing.assert_allclose(
        weights, reference_masked_softmax(held, ROW_MASKS), atol=WEIGHT_TOLERANCE[dtype]
    )
    np.testing.assert_allclose(weights.sum(-1), [1.0, 1.0, 0.0, 1.0],
                               atol=4 * WEIGHT_TOLERANCE[dtype])


def test_scores_below_a_fixed_fill_value_keep_their_weight():
    weights = masked_softmax(np.array([[-2e9, -3e9, 0.0]], "float32"),
                             np.array([[True, True, False]]))
    np.testing.assert_array_equal(ops.convert_to_numpy(weights), [[1.0, 0.0, 0.0]])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("magnitude", [1.0, 6e4, 2e9, 3e38])
def test_masked_softmax_gradients_are_finite_at_every_magnitude(magnitude, dtype):
    scores, held = scores_at(magnitude, 1.0, dtype)
    probe = np.random.default_rng(0).normal(size=ROWS.shape).astype("float32")

    def loss(scores):
        weights = ops.cast(masked_softmax(ops.cast(scores, dtype), ROW_MASKS), "float32")
        return ops.sum(weights * ops.convert_to_tensor(probe))

    _, (gradient,) = gradients(loss, inputs=[ops.cast(held, "float32")])
    assert np.all(np.isfinite(gradient))
    np.testing.assert_array_equal(gradient[~ROW_MASKS], 0.0)
