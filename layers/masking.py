"""Masking by valid length, and the softmax that respects it.

Attention must give padding positions exactly zero weight. Both helpers here use
`keras.ops` only, so they run on every Keras backend.
"""

import keras
from keras import ops

# Scores are filled with this before the softmax where the mask is False. `-inf`
# is never used (a row masked throughout would become NaN), and the fill is
# dtype-aware in the only way that cannot overflow: float16 and bfloat16 scores
# are upcast to float32 before they meet it, and float16 could not hold it.
_FILL_VALUE = -1e9

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


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax over `axis` that gives masked positions a weight of exactly 0.

    `weights_i = mask_i * exp(s_i) / sum_j(mask_j * exp(s_j))`. A row whose mask is
    False everywhere gets all-zero weights: never NaN, never uniform. float16 and
    bfloat16 scores are normalised in float32 and the weights cast back.

    Args:
        scores: float tensor, e.g. `(batch_size, Tq, Tv)`.
        mask: boolean tensor broadcastable to `scores`, True where a position may
            be attended to. `None` means no masking.
        axis: the axis to normalise over. Defaults to `-1`.

    Returns:
        Tensor of the shape and dtype of `scores`.
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    if dtype in _HALF_DTYPES:
        scores = ops.cast(scores, "float32")
    if mask is not None:
        mask = ops.cast(mask, "bool")
        scores = ops.where(mask, scores, ops.cast(_FILL_VALUE, scores.dtype))
    if scores.shape[axis] == 1:
        # One position (a one-word source) takes all the weight; ops.softmax would
        # warn on every such call.
        weights = ops.ones_like(scores)
    else:
        weights = ops.softmax(scores, axis=axis)
    if mask is not None:
        # Exact zeros on masked positions, and on rows that were masked throughout
        # (their softmax over the fill value alone is uniform).
        weights = ops.where(mask, weights, ops.zeros_like(weights))
    return ops.cast(weights, dtype)
