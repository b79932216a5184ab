"""Scaled dot-product self-attention over one sequence (Vaswani et al. 2017)."""

import keras
from keras import ops

from layers.dot_product_attention import DotProductAttention
from layers.masking import sequence_mask


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value}")


@keras.saving.register_keras_serializable(package="attncli")
class ScaledDotSelfAttention(DotProductAttention):
    """Self-attention: a sequence attends to itself through three projections.

    Each input `x_t` yields a query, a key and a value (Vaswani et al. 2017,
    "Attention Is All You Need", section 3.2.1, one head):

        Q = X W_q + b_q        (T, key_dim)
        K = X W_k + b_k        (T, key_dim)
        V = X W_v + b_v        (T, value_dim)
        output = softmax(Q K^T / sqrt(key_dim)) V

    The attention itself is `DotProductAttention` on `[Q, V, K]`: masking,
    softmax, dropout and causal masking are the ones every attncli layer shares.
    With `use_scale=False` the scores are the plain `Q K^T` of the "Illustrated
    Self-Attention" worked example. A position that is padding is neither
    attended to nor attending: its output is zero.

    Args:
        key_dim: int, the size of each query and key, `d_k`.
        value_dim: int, the size of each value, which is also the output size.
            Defaults to `None`, meaning `key_dim`.
        use_scale: bool; divide the scores by `sqrt(key_dim)`. Defaults to True.
        use_bias: bool; add the biases `b_q`, `b_k`, `b_v` to the projections.
            Defaults to False.
        dropout: float in `[0, 1)`, dropout on the attention weights while
            training. Defaults to `0.0`.
        seed: int, seed of the dropout. Defaults to `None`.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch_size, T, dim)`, the sequence `X`.
        mask: boolean `(batch_size, T)`, True at real positions. A Keras mask
            (e.g. from `Embedding(mask_zero=True)`) arrives here on its own.
            Defaults to `None`.
        valid_lengths: integers `(batch_size,)`, an alternative to `mask`:
            position `t` is real where `t < valid_lengths`. Defaults to `None`.
        use_causal_mask: bool; if True, position `t` attends only to positions
            `s <= t` (a decoder's self-attention). Defaults to False.
        return_attention_scores: bool; also return the weights. Defaults to
            False.
        training: bool, whether dropout is applied. Defaults to the Keras
            learning phase.
        return_steps: bool; also return the `AttentionRecord` of the call: `Q`,
            `K`, `V`, the scores, mask, softmax, weights and output, and `X` as
            `query_input` and `key_input`. Defaults to False.

    Returns:
        output `(batch_size, T, value_dim)`, and the weights (after softmax)
        `(batch_size, T, T)` if `return_attention_scores=True` (the
        `AttentionRecord` if `return_steps=True`). The output carries the
        input's Keras mask.

    Example:

    >>> layer = ScaledDotSelfAttention(key_dim=3, use_scale=False)
    >>> x = np.array([[[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]])
    >>> queries, keys, values = layer.project(x)  # each (1, 3, 3)
    >>> output = layer(x)                          # (1, 3, 3)
    """

    def __init__(
        self,
        key_dim,
        value_dim=None,
        use_scale=True,
        use_bias=False,
        dropout=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(use_scale=use_scale, dropout=dropout, seed=seed, **kwargs)
        _check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            _check_positive_int("value_dim", value_dim)
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.use_bias = use_bias

    def build(self, input_shape):
        dim = input_shape[-1]
        value_dim = self.value_dim or self.key_dim
        self.W_q = self.add_weight(name="W_q", shape=(dim, self.key_dim),
                                   initializer="glorot_uniform")
        self.W_k = self.add_weight(name="W_k", shape=(dim, self.key_dim),
                                   initializer="glorot_uniform")
        self.W_v = self.add_weight(name="W_v", shape=(dim, value_dim),
                                   initializer="glorot_uniform")
        self.b_q = self.b_k = self.b_v = None
        if self.use_bias:
            self.b_q = self.add_weight(name="b_q", shape=(self.key_dim,), initializer="zeros")
            self.b_k = self.add_weight(name="b_k", shape=(self.key_dim,), initializer="zeros")
            self.b_v = self.add_weight(name="b_v", shape=(value_dim,), initializer="zeros")

    def project(self, inputs):
        """`(queries, keys, values)`: `X W_q + b_q`, `X W_k + b_k`, `X W_v + b_v`.

        Each is `(batch_size, T, key_dim)` (values: `value_dim`). Builds the
        layer on first use, so a demo can show the projections before any call.
        """
        if not self.built:
            self.build(inputs.shape)
        inputs = ops.cast(inputs, self.compute_dtype)
        return (
            self._project(inputs, self.W_q, self.b_q),
            self._project(inputs, self.W_k, self.b_k),
            self._project(inputs, self.W_v, self.b_v),
        )

    @staticmethod
    def _project(inputs, kernel, bias):
        # batch x T x units
        projected = ops.matmul(inputs, ops.cast(kernel, inputs.dtype))
        if bias is not None:
            projected = projected + ops.cast(bias, inputs.dtype)
        return projected

    def call(
        self,
        inputs,
        mask=None,
        valid_lengths=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        return_steps=False,
    ):
        if valid_lengths is not None:
            length_mask = sequence_mask(valid_lengths, ops.shape(inputs)[1])
            mask = length_mask if mask is None else ops.logical_and(
                ops.cast(mask, "bool"), length_mask
            )
        elif mask is not None:
            mask = ops.cast(mask, "bool")
        queries, keys, values = self.project(inputs)
        result = self.attend(
            queries,
            values,
            keys,
            query_mask=mask,
            value_mask=mask,
            return_attention_scores=return_attention_scores,
            training=training,
            use_causal_mask=use_causal_mask,
            return_steps=return_steps,
        )
        if return_steps:
            output, record = result
            return output, record._replace(query_input=inputs, key_input=inputs)
        return result

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.value_dim or self.key_dim,)

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False,
                            return_steps=False, **kwargs):
        if return_steps:  # refused by BaseAttention
            return super().compute_output_spec(inputs, mask=mask, return_steps=True,
                                               **kwargs)
        output = keras.KerasTensor(
            self.compute_output_shape(inputs.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return output
        length = inputs.shape[1]
        weights = keras.KerasTensor(
            (inputs.shape[0], length, length), dtype=self.compute_dtype
        )
        return output, weights

    def get_config(self):
        config = super().get_config()
        config.update({
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "use_bias": self.use_bias,
        })
        return config
