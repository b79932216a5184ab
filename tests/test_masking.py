import numpy as np
import pytest
from keras import ops

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
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = masked_softmax(np.ones((2, 1), "float32"), np.array([[True], [False]]))
    np.testing.assert_array_equal(ops.convert_to_numpy(weights), [[1.0], [0.0]])
