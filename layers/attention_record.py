"""What an attention layer computed, part by part, when asked (`return_steps=True`)."""

from typing import NamedTuple

from keras import ops


class AttentionRecord(NamedTuple):
    """Every intermediate value of one attention call, named as the papers name them.

        scores[t, s]  = a(q_t, k_s)                        the layer's score
        softmax[t, :] = softmax(scores[t, :]) over the keys `mask[t, :]` allows
        weights[t, :] = softmax[t, :]                      (local-p: times its Gaussian;
                                                            dropped out while training)
        context[t]    = sum_s weights[t, s] v_s

    An attention layer of `layers/` returns it beside its output when called with
    `return_steps=True`; the normal call computes the same values and keeps none of
    them. The parts are the layer's own tensors (float32 scores, masks and softmax
    under half precision, as `BaseAttention` computes them); a multi-head layer's have
    a heads axis after the batch: `(batch_size, [num_heads,] ...)` below.

    A NamedTuple, so that `keras.tree`, `tf.nest` and `map` see its parts, and a
    record of NumPy arrays reads as one of tensors.

    Attributes:
        query: `(batch_size, [num_heads,] Tq, d)`, the queries the score compares: the
            call's own, or each head's `q W_q^i + b_q^i` (before any `1/sqrt(d_k)`).
        keys: `(batch_size, [num_heads,] Tv, d_k)`, the keys as given, or each head's
            `k W_k^i + b_k^i` (`MultiHeadAttention.attend_projected`, handed keys
            already projected, records those).
        values: `(batch_size, [num_heads,] Tv, d_v)`, the values weighted: each
            head's `v W_v^i + b_v^i` for a multi-head layer.
        scores: `(batch_size, [num_heads,] Tq, Tv)`, `a(q_t, k_s)` for every key,
            masked ones included.
        mask: bool, the shape of `scores`: True where query `t` may attend to key
            `s` (not padding; inside a local window; not a later position of a
            causal self-attention).
        softmax: the shape of `scores`, the softmax over the allowed keys, exactly 0
            elsewhere.
        weights: the shape of `scores`, what weighted the values: `softmax`, times
            local-p's Gaussian, dropped out while training.
        context: `(batch_size, [num_heads,] Tq, d_v)`, `weights @ values`; zero at a
            padded query (a multi-head layer's heads: before `W_o`, which applies
            the query mask after it).
        projected_keys: the score's term in the keys alone (`project_keys`: `k W_a`,
            `k W_k`, ...; the keys themselves where the score has none).
        aligned_positions: local attention's window centres `p_t` `(batch_size,
            Tq)` (Luong et al. 2015, eq. 9), else None.
        gaussian: local-p's factors `exp(-(s - p_t)² / (2σ²))`, the shape of
            `scores` (eq. 10), else None.
        query_input: a layer that projects its inputs: what it projected into the
            queries (`x`, `(batch_size, Tq, dim)`), else None.
        key_input: what it projected into the keys and values (`x_s`,
            `(batch_size, Tv, dim)`), else None.
    """

    query: object
    keys: object
    values: object
    scores: object
    mask: object
    softmax: object
    weights: object
    context: object
    projected_keys: object = None
    aligned_positions: object = None
    gaussian: object = None
    query_input: object = None
    key_input: object = None

    def map(self, function):
        """The record with `function` applied to every part present (None stays None):
        `record.map(np.asarray)`, `record.map(lambda part: part[0])`."""
        return AttentionRecord(*(None if part is None else function(part) for part in self))

    def weighted_values(self):
        """`weights[t, s] * v_s`, the terms of the context's sum: `(..., Tq, Tv, d_v)`,
        or `(Tv, d_v)` for a record of one query (no query axis)."""
        if len(self.weights.shape) < len(self.values.shape):  # one query: (Tv,), (Tv, d_v)
            return self.weights[..., None] * self.values
        return self.weights[..., None] * self.values[..., None, :, :]


# The parts that hold one row per query; the others describe the keys.
_PER_QUERY = ("query", "scores", "mask", "softmax", "weights", "context", "gaussian",
              "query_input")


def join_queries(records):
    """Records of successive queries over the same keys as one record of them all.

    The per-query parts are concatenated along their query axis (the window centres
    along their last); the keys' parts are the first record's.
    """
    joined = {}
    for name in AttentionRecord._fields:
        parts = [getattr(record, name) for record in records]
        if parts[0] is None or (name not in _PER_QUERY and name != "aligned_positions"):
            joined[name] = parts[0]
        else:
            joined[name] = ops.concatenate(parts, axis=-1 if name == "aligned_positions"
                                           else -2)
    return AttentionRecord(**joined)
