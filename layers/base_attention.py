"""The call convention every attention layer of attncli shares."""

import keras
from keras import ops

from layers.attention_record import AttentionRecord
from layers.masking import masked_softmax, score_dtype, sequence_mask


class BaseAttention(keras.layers.Layer):
    """Attention pooling: score, masked softmax, weighted sum of the values.

    For queries `q_t` and key-value pairs `(k_s, v_s)`:

        scores[t, s]  = a(q_t, k_s)                       (the subclass's score)
        weights[t, :] = softmax(scores[t, :]) over the valid keys
        context[t]    = sum_s weights[t, s] * v_s

    Padding keys get weight exactly 0; a query with no valid key gets a zero
    context; outputs at padded query positions are zero.

    Under float16 and bfloat16 (pure or mixed policies) the scores, the softmax
    and the reweighting are computed in float32 (`score_dtype`): a float16
    `<q, k>` past 65,504 would be `inf` and its weights NaN. The weights are
    then cast to the values' dtype, the layer's compute dtype, in which the
    weighted sum is taken and the weights are returned.

    Subclasses implement `score_projected(query, projected_keys)`, computed in
    `score_dtype(query.dtype)`, and, where the score has a term in the keys
    alone (`W_k k` in additive attention, `W_a k` in Luong's general score),
    `project_keys(keys)`: a decoder projects the keys once per source sequence
    and passes them to `attend` at every step. Subclasses that restrict or
    reweight the keys (local attention) override `score_mask` and `reweight`, and
    `record_window` to report how (`return_steps`).

    Args:
        dropout: float in `[0, 1)`, the fraction of attention weights dropped while
            training. Defaults to `0.0`.
        seed: int, the seed of the dropout. Defaults to `None`.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: list `[query, value]` or `[query, value, key]`; `key` defaults to
            `value`.
            - query: `(batch_size, Tq, dim)`.
            - value: `(batch_size, Tv, value_dim)`.
            - key: `(batch_size, Tv, key_dim)`.
        mask: list `[query_mask, value_mask]` or `[query_mask, value_mask,
            key_mask]` of boolean tensors `(batch_size, Tq)`, `(batch_size, Tv)`
            and `(batch_size, Tv)`, any of them `None`. The key mask and the
            value mask both cover the `Tv` key-value pairs: a key is valid where
            every mask given is True. Keras masks (e.g. from
            `Embedding(mask_zero=True)`) arrive here without any extra argument.
        valid_lengths: integer tensor `(batch_size,)`, an alternative to
            `value_mask`: key `s` is valid where `s < valid_lengths` (and where
            the masks allow it, if also given).
        return_attention_scores: bool; if True, also return the attention weights
            (after softmax, as `keras.layers.Attention` does). Defaults to False.
        training: bool, whether dropout is applied. Defaults to the Keras learning
            phase.
        use_causal_mask: bool; if True, query `t` may only attend to keys
            `s <= t` (self-attention in a decoder). Defaults to False.
        return_steps: bool; if True, also return the `AttentionRecord` of the call:
            its query, keys, values, scores, mask, softmax, weights and context
            (for `inspect-weights --step` and `score-demo`). Not with
            `return_attention_scores`: the record holds the weights. Defaults to
            False; without it the call keeps none of them.

    Returns:
        context: `(batch_size, Tq, value_dim)`.
        weights: `(batch_size, Tq, Tv)`, if `return_attention_scores=True`.
        record: an `AttentionRecord`, if `return_steps=True`.
    """

    def __init__(self, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                f"`dropout` must be in [0, 1). Received: dropout={dropout}"
            )
        self.dropout = dropout
        self.seed = seed
        self.supports_masking = True
        if dropout > 0.0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    def project_keys(self, keys):
        """The part of the score that depends on the keys alone. Identity here."""
        return keys

    def score_projected(self, query, projected_keys):
        """Raw scores `(batch_size, Tq, Tv)` from queries and projected keys."""
        raise NotImplementedError

    def score(self, query, keys):
        """Raw scores `a(q_t, k_s)`, shape `(batch_size, Tq, Tv)`, before masking."""
        return self.score_projected(query, self.project_keys(keys))

    def score_mask(self, query, keys, value_mask, query_positions=None):
        """Which keys each query may attend to: `(batch_size, Tq, Tv)` or None.

        The default allows every valid key. Local attention narrows it to a window.
        """
        if value_mask is None:
            return None
        return ops.expand_dims(value_mask, axis=-2)

    def reweight(self, weights, query, keys, value_mask, query_positions=None):
        """Adjust the weights after the softmax. The default leaves them alone."""
        return weights

    def call(
        self,
        inputs,
        mask=None,
        valid_lengths=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        return_steps=False,
    ):
        query, value, key = self._unpack_inputs(inputs)
        query_mask, value_mask = self._unpack_masks(mask, value, valid_lengths)
        return self.attend(
            query,
            value,
            key,
            query_mask=query_mask,
            value_mask=value_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            use_causal_mask=use_causal_mask,
            return_steps=return_steps,
        )

    def attend(
        self,
        query,
        value,
        key,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        query_positions=None,
        projected_keys=None,
        return_steps=False,
    ):
        """The computation behind `call`, on plain tensors and masks.

        Decoders call this directly: `projected_keys` is `project_keys(key)`
        computed once per source sequence, and `query_positions`
        (`(batch_size, Tq)` integers, defaulting to `0 .. Tq-1`) tells local
        attention which target step each query is.
        """
        if return_steps and return_attention_scores:
            raise ValueError(
                "Give `return_attention_scores` or `return_steps`, not both: the "
                "record holds the weights. Received: return_attention_scores=True, "
                "return_steps=True"
            )
        if projected_keys is None:
            projected_keys = self.project_keys(key)
        scores = self.score_projected(query, projected_keys)
        allowed = self.score_mask(query, key, value_mask, query_positions)
        if use_causal_mask:
            causal = self._causal_mask(ops.shape(scores)[-2], ops.shape(scores)[-1])
            allowed = causal if allowed is None else ops.logical_and(allowed, causal)
        # softmax and weights: float32 for half-precision inputs, as the scores are
        softmax = masked_softmax(scores, allowed)
        weights = self.reweight(softmax, query, key, value_mask, query_positions)
        if training and self.dropout > 0.0:
            weights = keras.random.dropout(
                weights, self.dropout, seed=self.seed_generator
            )
        # Back to the values' dtype (the compute dtype): weights that sum to at
        # most 1 keep the weighted sum within the values' own range.
        weights = ops.cast(weights, value.dtype)
        context = ops.matmul(weights, value)
        if query_mask is not None:
            query_mask = ops.cast(ops.expand_dims(query_mask, -1), context.dtype)
            context = context * query_mask
        if return_steps:
            mask = (ops.ones_like(scores, dtype="bool") if allowed is None
                    else ops.broadcast_to(allowed, ops.shape(scores)))
            record = AttentionRecord(
                query=query, keys=key, values=value, scores=scores, mask=mask,
                softmax=softmax, weights=weights, context=context,
                projected_keys=projected_keys,
            )
            return context, self.record_window(record, value_mask, query_positions)
        if return_attention_scores:
            return context, weights
        return context

    def record_window(self, record, value_mask, query_positions=None):
        """The `record` with what restricted its keys beyond the mask (local
        attention's window centres and Gaussian). Nothing here."""
        return record

    def _unpack_inputs(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
            raise ValueError(
                f"{self.__class__.__name__} expects inputs [query, value] or "
                f"[query, value, key]. Received: inputs={inputs}"
            )
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) == 3 else value
        return query, value, key

    def _unpack_masks(self, mask, value, valid_lengths):
        """`(query_mask, value_mask)`: the key mask and the valid lengths, both
        over `Tv` like the value mask, are folded into the value mask with AND."""
        query_mask = None
        key_side = []
        if mask is not None:
            if not isinstance(mask, (list, tuple)) or len(mask) not in (2, 3):
                raise ValueError(
                    f"{self.__class__.__name__} expects mask [query_mask, value_mask] "
                    f"or [query_mask, value_mask, key_mask]. Received: mask={mask}"
                )
            query_mask = mask[0]
            key_side.extend(m for m in mask[1:] if m is not None)
        if valid_lengths is not None:
            key_side.append(sequence_mask(valid_lengths, ops.shape(value)[1]))
        value_mask = None
        for each in key_side:
            each = ops.cast(each, "bool")
            value_mask = each if value_mask is None else ops.logical_and(value_mask, each)
        return query_mask, value_mask

    @staticmethod
    def _causal_mask(num_queries, num_keys):
        rows = ops.expand_dims(ops.arange(num_queries), -1)
        cols = ops.expand_dims(ops.arange(num_keys), 0)
        return ops.expand_dims(ops.greater_equal(rows, cols), 0)

    def compute_mask(self, inputs, mask=None):
        if mask is None or mask[0] is None:
            return None
        return ops.convert_to_tensor(mask[0])

    def compute_output_shape(self, input_shape):
        query_shape, value_shape = input_shape[0], input_shape[1]
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False,
                            return_steps=False, **kwargs):
        if return_steps:
            raise ValueError(
                "`return_steps=True` records a call on tensors: a symbolic call's "
                "outputs must all be tensors, and a record's optional parts are None. "
                "Received: return_steps=True on symbolic inputs"
            )
        query, value, key = self._unpack_inputs(inputs)
        context = keras.KerasTensor(
            self.compute_output_shape([query.shape, value.shape]),
            dtype=self.compute_dtype,
        )
        if not return_attention_scores:
            return context
        weights_shape = tuple(query.shape[:-1]) + (key.shape[-2],)
        return context, keras.KerasTensor(weights_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "seed": self.seed})
        return config
