"""Masking by valid length, and the softmax that respects it.

Attention must give padding positions exactly zero weight. Both helpers here use
`keras.ops` only, so they run on every Keras backend.
"""

import keras
import numpy as np
from keras import ops

_HALF_DTYPES = ("float16", "bfloat16")


def sequence_mask(valid_lengths, maxlen, dtype="bool"):
    """Mask of the positions below each valid length.

    `mask[..., i] = i < valid_lengths[...]`, so a sequence of valid length `n` keeps
    positions `0 .. n-1` and masks the padding after them.

    Args:
        valid_lengths: integer tensor of any shape, e.g. `(batch_size,)`, or
            `(batch_size, Tq)` for a different length per query.
        maxlen: int, the length of the padded axis.
        dtype: dtype of the result. Defaults to `"bool"`.

    Returns:
        Tensor of shape `valid_lengths.shape + (maxlen,)`.

    Example:

    >>> sequence_mask([1, 3], 4)
    [[True, False, False, False], [True, True, True, False]]
    """
    valid_lengths = ops.cast(ops.convert_to_tensor(valid_lengths), "int32")
    positions = ops.arange(maxlen, dtype="int32")
    mask = ops.less(positions, ops.expand_dims(valid_lengths, -1))
    if dtype != "bool":
        mask = ops.cast(mask, dtype)
    return mask


def score_dtype(dtype):
    """The dtype attention scores are computed in for queries of `dtype`.

    float32 for float16 and bfloat16, `dtype` itself otherwise. A float16
    product `<q, k>` overflows past 65,504 (queries and keys of 8 components
    near 100 are enough), and its softmax is then NaN; bfloat16 has float32's
    range but an 8-bit significand, which rounds a score near 300 to a multiple
    of 2 and so each weight to a factor of `e^2`.
    """
    dtype = keras.backend.standardize_dtype(dtype)
    return "float32" if dtype in _HALF_DTYPES else dtype


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax over `axis` that gives masked positions a weight of exactly 0.

        weights_i = mask_i * exp(s_i) / sum_j(mask_j * exp(s_j))

    computed as the softmax of the scores with every masked position set to
    `-inf`, whose exponential is exactly 0 whatever the valid scores are. A
    finite stand-in such as `-1e9` would not do: on a row whose valid scores are
    all below it, the masked positions would take the weight (or, where the
    valid scores are very far below, every weight would underflow to 0). The
    softmax subtracts the row's largest score, which is a valid one, before it
    exponentiates, so no exponential overflows at any magnitude. A score that
    overflowed to `±inf` is held at the dtype's largest finite magnitude first
    (`inf - inf` would be NaN): the keys whose scores overflowed upwards share
    the weight, as they would in the limit. A row whose mask is False everywhere
    would be `-inf` throughout, whose softmax is NaN: its scores are replaced by
    zeros, whatever they were, and its weights are all zero, never NaN, never
    uniform. float16 and bfloat16 scores are normalised in float32 and the
    weights cast back.

    Args:
        scores: float tensor, e.g. `(batch_size, Tq, Tv)`; NaN scores on
            allowed positions give NaN weights.
        mask: boolean tensor broadcastable to `scores`, True where a position may
            be attended to. `None` means no masking.
        axis: the axis to normalise over. Defaults to `-1`.

    Returns:
        Tensor of the shape and dtype of `scores`.

    Example:

    >>> masked_softmax(np.array([[-2e9, -3e9, 0.0]]), np.array([[True, True, False]]))
    [[1.0, 0.0, 0.0]]
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    scores = ops.cast(scores, score_dtype(dtype))
    largest = float(np.finfo(score_dtype(dtype)).max)
    scores = ops.clip(scores, -largest, largest)
    if mask is not None:
        mask = ops.cast(mask, "bool")
        # -inf rather than the large finite number Keras's own layers use: it is
        # below every finite score, so the result cannot depend on the scores'
        # magnitude. Its exponential and its gradient are exact zeros. A row
        # masked throughout takes zeros instead, whose softmax is finite.
        masked_throughout = ops.logical_not(ops.any(mask, axis=axis, keepdims=True))
        fill = ops.where(masked_throughout, 0.0, float("-inf"))
        scores = ops.where(mask, scores, ops.cast(fill, scores.dtype))
    if scores.shape[axis] == 1:
        # One position (a one-word source) takes all the weight; ops.softmax would
        # warn on every such call.
        weights = ops.ones_like(scores)
    else:
        weights = ops.softmax(scores, axis=axis)
    if mask is not None:
        # Exact zeros on masked positions, and on rows that were masked throughout.
        weights = ops.where(mask, weights, ops.zeros_like(weights))
    return ops.cast(weights, dtype)
