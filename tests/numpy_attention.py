"""Independent NumPy references for the attention tests, written from the formulas."""

import numpy as np


def reference_softmax(scores, allowed):
    """Softmax over the last axis where `allowed`; rows with nothing allowed are 0."""
    scores = np.where(allowed, scores.astype("float64"), -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.where(allowed, np.exp(scores - row_max), 0.0)
    totals = exps.sum(axis=-1, keepdims=True)
    return exps / np.where(totals > 0, totals, 1.0)


def reference_attention(query, keys, values, value_mask=None, query_mask=None,
                        causal=False, scale=None):
    """`softmax(scale * Q K^T) V` over valid keys; padded queries give zeros.

    Shapes: query `(B, Tq, d)`, keys `(B, Tv, d)`, values `(B, Tv, dv)`, masks
    `(B, Tv)` and `(B, Tq)`. Returns `(context, weights)` in float64.
    """
    batch, num_queries, _ = query.shape
    num_keys = keys.shape[1]
    scores = np.einsum("bqd,bkd->bqk", query.astype("float64"), keys.astype("float64"))
    if scale is not None:
        scores = scores * scale
    allowed = np.ones((batch, num_queries, num_keys), dtype=bool)
    if value_mask is not None:
        allowed &= np.asarray(value_mask, bool)[:, None, :]
    if causal:
        allowed &= np.tril(np.ones((num_queries, num_keys), dtype=bool))[None]
    weights = reference_softmax(scores, allowed)
    context = np.einsum("bqk,bkd->bqd", weights, values.astype("float64"))
    if query_mask is not None:
        context = context * np.asarray(query_mask, bool)[:, :, None]
    return context, weights


def lengths_to_mask(valid_lengths, maxlen):
    return np.arange(maxlen)[None, :] < np.asarray(valid_lengths)[:, None]


def layer_outputs(layer, query, values, keys, query_mask=None, value_mask=None, **kwargs):
    """`(context, weights)` of an attention layer called the Keras way, as NumPy arrays."""
    from keras import ops

    context, weights = layer(
        [query, values, keys],
        mask=[query_mask, value_mask],
        return_attention_scores=True,
        **kwargs,
    )
    return ops.convert_to_numpy(context), ops.convert_to_numpy(weights)
