"""Dot-product attention, scaled or not."""

import math

import keras
from keras import ops

from layers.base_attention import BaseAttention, score_dtype


@keras.saving.register_keras_serializable(package="attncli")
class DotProductAttention(BaseAttention):
    """Dot-product attention: `a(q, k) = <q, k> / sqrt(d)`.

    Queries and keys share the dimension `d`. With `use_scale=False` the score is
    the plain dot product `<q, k>` (Luong et al. 2015, "dot"); with the default
    scaling it is the scaled dot product of Vaswani et al. 2017, which keeps the
    scores' variance independent of `d`. In matrix form, for `Q` of shape
    `(Tq, d)` and `K` of shape `(Tv, d)`: `scores = Q K^T / sqrt(d)`, computed as
    `(Q / sqrt(d)) K^T` so that no intermediate exceeds the scaled scores.
    Half-precision queries and keys are scored in float32: in float16 the plain
    `<q, k>` overflows past 65,504 (`BaseAttention`).

    Args:
        use_scale: bool; divide the scores by `sqrt(d)`. Defaults to True.
        dropout: float in `[0, 1)`, dropout on the attention weights while
            training. Defaults to `0.0`.
        seed: int, seed of the dropout. Defaults to `None`.

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]`, shapes
            `(batch_size, Tq, d)`, `(batch_size, Tv, value_dim)`,
            `(batch_size, Tv, d)`; key defaults to value.
        mask: `[query_mask, value_mask]` or `[query_mask, value_mask,
            key_mask]`, booleans `(batch_size, Tq)`, `(batch_size, Tv)`,
            `(batch_size, Tv)`; a key is valid where both key-side masks
            allow it. Keras masks arrive here on their own.
        valid_lengths: integers `(batch_size,)`, an alternative to `value_mask`.
        return_attention_scores: bool, also return the weights. Defaults to False.
        training: bool, whether dropout is active.
        use_causal_mask: bool, forbid attending to later keys. Defaults to False.
        return_steps: bool, also return the `AttentionRecord` of the call (its
            query, keys, projected keys, scores, mask, softmax, weights, context).
            Defaults to False.

    Returns:
        context `(batch_size, Tq, value_dim)`, and weights `(batch_size, Tq, Tv)`
        if `return_attention_scores=True` (the `AttentionRecord` if
        `return_steps=True`).

    Example (the worked example of the design notes, unscaled):

    >>> layer = DotProductAttention(use_scale=False)
    >>> query = np.array([[[10.0, 5.0, 10.0]]])
    >>> keys = np.array([[[0.0, 1, 1], [5, 0, 1], [1, 1, 0], [0, 5, 1]]])
    >>> layer([query, keys])  # scores [15, 60, 15, 35] -> context [5, 0, 1]
    """

    def __init__(self, use_scale=True, dropout=0.0, seed=None, **kwargs):
        super().__init__(dropout=dropout, seed=seed, **kwargs)
        self.use_scale = use_scale

    def score_projected(self, query, projected_keys):
        # float32 for half-precision queries: <q, k> overflows float16 at 65,504.
        dtype = score_dtype(query.dtype)
        query = ops.cast(query, dtype)
        if self.use_scale:
            # The query is scaled before the product, as Keras's MultiHeadAttention
            # does: no intermediate exceeds the scaled scores. A product with a
            # Python float: its gradient, unlike a division's, computes nothing
            # for the constant.
            query = query * (1.0 / math.sqrt(query.shape[-1]))
        # scores: batch x Tq x Tv. The einsum contracts the keys' last axis in
        # place; matmul(query, swapaxes(keys)) would copy the keys transposed on
        # every eager call.
        return ops.einsum("...qd,...kd->...qk", query, ops.cast(projected_keys, dtype))

    def get_config(self):
        config = super().get_config()
        config.update({"use_scale": self.use_scale})
        return config
