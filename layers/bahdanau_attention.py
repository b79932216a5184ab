"""Bahdanau et al. (2015) additive attention, optionally weight-normalised."""

import math

import keras
from keras import ops

from layers.base_attention import BaseAttention, score_dtype


@keras.saving.register_keras_serializable(package="attncli")
class BahdanauAttention(BaseAttention):
    """Additive attention (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation
    by Jointly Learning to Align and Translate", appendix A.1.2).

    For a query `q_t` (the decoder state) and keys `k_s` (the encoder states):

        scores[t, s] = vᵀ tanh(W_q q_t + W_k k_s)

    With `normalize=True`, the weight-normalised form (Salimans & Kingma 2016, as
    in the "normed Bahdanau" attention of the TensorFlow NMT tutorial):

        scores[t, s] = (g · v / ‖v‖)ᵀ tanh(W_q q_t + W_k k_s + b)

    with a scalar gain `g` (initialised to `sqrt(1 / units)`) and a bias `b`
    (initialised to zeros). Then `weights_t = softmax(scores_t)` over the valid
    keys and `context_t = sum_s weights_t[s] v_s`.

    Under float16 and bfloat16 the scores and the softmax are computed in
    float32 and the weights cast back for the weighted sum (`BaseAttention`).

    `project_keys(keys) = keys @ W_k` does not depend on the query: a decoder
    computes it once per source sequence and passes it to `attend` at every step.
    Matrices are stored in Keras's `(input, output)` layout.

    Args:
        units: int >= 1, the size of the hidden layer inside the tanh.
        normalize: bool, use the weight-normalised score. Defaults to False.
        dropout: float in `[0, 1)`, dropout on the attention weights while
            training. Defaults to `0.0`.
        seed: int, seed of the dropout. Defaults to `None`.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Weights: `W_q` `(query_dim, units)`, `W_k` `(key_dim, units)`, `v`
    `(units,)`; with `normalize=True` also `g` `()` and `b` `(units,)`.

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]`, shapes
            `(batch_size, Tq, query_dim)`, `(batch_size, Tv, value_dim)`,
            `(batch_size, Tv, key_dim)`; key defaults to value.
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

    A decoder that calls `attend` directly calls `build([query_shape,
    value_shape])` in its own `build`.

    Returns:
        context `(batch_size, Tq, value_dim)`, and weights `(batch_size, Tq, Tv)`
        if `return_attention_scores=True` (the `AttentionRecord` if
        `return_steps=True`).

    Example:

    >>> layer = BahdanauAttention(units=16, normalize=True)
    >>> decoder_states = np.random.rand(2, 1, 8).astype("float32")
    >>> encoder_states = np.random.rand(2, 5, 6).astype("float32")
    >>> layer([decoder_states, encoder_states], valid_lengths=np.array([5, 3])).shape
    (2, 1, 6)
    """

    def __init__(self, units, normalize=False, dropout=0.0, seed=None, **kwargs):
        super().__init__(dropout=dropout, seed=seed, **kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(
                f"`units` must be a positive integer. Received: units={units}"
            )
        if not isinstance(normalize, bool):
            raise ValueError(
                f"`normalize` must be True or False. Received: normalize={normalize}"
            )
        self.units = units
        self.normalize = normalize

    def build(self, input_shape):
        query_dim = input_shape[0][-1]
        key_dim = (input_shape[2] if len(input_shape) == 3 else input_shape[1])[-1]
        self.W_q = self.add_weight(
            name="W_q", shape=(query_dim, self.units), initializer="glorot_uniform"
        )
        self.W_k = self.add_weight(
            name="W_k", shape=(key_dim, self.units), initializer="glorot_uniform"
        )
        self.v = self.add_weight(
            name="v", shape=(self.units,), initializer="glorot_uniform"
        )
        if self.normalize:
            self.g = self.add_weight(
                name="g",
                shape=(),
                initializer=keras.initializers.Constant(math.sqrt(1.0 / self.units)),
            )
            self.b = self.add_weight(name="b", shape=(self.units,), initializer="zeros")

    def project_keys(self, keys):
        """`W_k k_s` for every key: `(batch_size, Tv, units)`."""
        return ops.matmul(keys, ops.cast(self.W_k, keys.dtype))

    def score_projected(self, query, projected_keys):
        # float32 for half-precision queries, as every attncli score.
        dtype = score_dtype(query.dtype)
        query = ops.cast(query, dtype)
        projected_query = ops.matmul(query, ops.cast(self.W_q, dtype))
        # hidden: batch x Tq x Tv x units
        hidden = ops.expand_dims(projected_query, -2) + ops.expand_dims(
            ops.cast(projected_keys, dtype), -3
        )
        v = self.v
        if self.normalize:
            hidden = hidden + ops.cast(self.b, dtype)
            # g · v / ‖v‖ in float32: a sum of squares can overflow float16 (a
            # float16 policy's variables are float16).
            v = ops.cast(v, "float32")
            v = ops.cast(self.g, "float32") * v / ops.sqrt(ops.sum(ops.square(v)))
        return ops.sum(ops.tanh(hidden) * ops.cast(v, dtype), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "normalize": self.normalize})
        return config
