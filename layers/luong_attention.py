"""Luong et al. (2015) attention: dot, general and concat scores; global and local."""

import keras
from keras import ops

from layers.base_attention import BaseAttention, score_dtype
from layers.scores import ALIGNMENTS, SCORES, local_scores


@keras.saving.register_keras_serializable(package="attncli")
class LuongAttention(BaseAttention):
    """Luong attention (Luong, Pham & Manning 2015, "Effective Approaches to
    Attention-based Neural Machine Translation"), section 3.

    The query is the decoder's current hidden state `h_t`, the keys the encoder's
    hidden states `h̄_s`. The score (eq. 8) is one of:

        dot:      score(h_t, h̄_s) = h_tᵀ h̄_s
        general:  score(h_t, h̄_s) = h_tᵀ W_a h̄_s
        concat:   score(h_t, h̄_s) = v_aᵀ tanh(W_a [h_t; h̄_s])

    Weights are stored in Keras's `(input, output)` layout, so the matrices are
    the paper's transposed: general's `W_a` has shape `(key_dim, query_dim)` and
    `score = q · (k @ W_a)`; concat's `W_a` has shape `(query_dim + key_dim,
    units)`, its first `query_dim` rows act on `h_t` and the others on `h̄_s`,
    so `W_a [h_t; h̄_s]` is `h_t @ W_a[:query_dim] + h̄_s @ W_a[query_dim:]`.
    In both, `project_keys(keys)` computes the key term once per source.

    `weights_t = softmax(scores_t)` over the keys the alignment allows (eq. 7),
    and `context_t = sum_s weights_t[s] h̄_s`.

    Alignment (section 3.2). Source positions `s` count the valid keys from 0
    (the first word is `s = 0`, the last `s = S - 1`), so padding, at either end,
    never moves them; `D = window`. Local attention takes the softmax over the
    valid keys in the window `[p_t - D, p_t + D]`, that is `|s - p_t| <= D`; the
    part of the window outside the sentence is ignored, as in the paper.

    - `"global"`: every valid key.
    - `"local-m"`: monotonic, `p_t = t`, the query's target position (from
      `query_positions`, default `0 .. Tq-1`).
    - `"local-p"`: predicted, `p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))` (eq. 9)
      with `S` the source's valid length (the count of valid keys, `Tv` without
      a mask), so `p_t` lies in `[0, S]`. After the softmax over the window the
      weights are multiplied by the Gaussian centred on `p_t`,
      `exp(-(s - p_t)² / (2σ²))`, `σ = D / 2` (eq. 10), so they sum to at most
      1, as in the paper. The paper does not say where it counts positions
      from; counting from 0, a centre near `S` lies past the last word, and its
      window keeps the last words within `D` of it.

    A query whose window holds no valid key (local-m with `t` past the source's
    end) gets all-zero weights and a zero context.

    Under float16 and bfloat16 the scores, `p_t`, the softmax and the Gaussian
    are computed in float32, and the weights cast back for the weighted sum
    (`BaseAttention`): a float16 `h_tᵀ h̄_s` overflows past 65,504.

    Args:
        score: `"dot"`, `"general"` or `"concat"`. Defaults to `"dot"`.
        units: int, hidden size of concat's `W_a` and local-p's `W_p`; only
            those use it. Defaults to `None`: the query's dimension.
        alignment: `"global"`, `"local-m"` or `"local-p"`. Defaults to
            `"global"`.
        window: int >= 1, the half-width `D` of the local window. Defaults to
            `10`, the paper's value.
        dropout: float in `[0, 1)`, dropout on the attention weights while
            training. Defaults to `0.0`.
        seed: int, seed of the dropout. Defaults to `None`.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Weights: `W_a` (general, concat), `v_a` `(units,)` (concat), `W_p`
    `(query_dim, units)` and `v_p` `(units,)` (local-p).

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]`, shapes
            `(batch_size, Tq, query_dim)`, `(batch_size, Tv, value_dim)`,
            `(batch_size, Tv, key_dim)`; key defaults to value. `"dot"` needs
            `query_dim == key_dim`.
        mask: `[query_mask, value_mask]` or `[query_mask, value_mask,
            key_mask]`, booleans `(batch_size, Tq)`, `(batch_size, Tv)`,
            `(batch_size, Tv)`; a key is valid where both key-side masks
            allow it. Keras masks arrive here on their own.
        valid_lengths: integers `(batch_size,)`, an alternative to `value_mask`.
        return_attention_scores: bool, also return the weights. Defaults to False.
        training: bool, whether dropout is active.
        use_causal_mask: bool, forbid attending to later keys. Defaults to False.
        return_steps: bool, also return the `AttentionRecord` of the call, with
            local attention's window centres `p_t` and local-p's Gaussian. Defaults
            to False.

    A decoder stepping one query at a time calls `attend(query, value, key,
    value_mask=..., query_positions=..., projected_keys=...)` with
    `projected_keys = project_keys(key)` computed once per source and
    `query_positions` `(batch_size, Tq)` its step numbers (local-m needs them).
    Such a decoder calls `build([query_shape, value_shape])` in its own `build`.

    Returns:
        context `(batch_size, Tq, value_dim)`, and weights `(batch_size, Tq, Tv)`
        if `return_attention_scores=True` (the `AttentionRecord` if
        `return_steps=True`).

    Example:

    >>> layer = LuongAttention(score="general", alignment="local-p", window=2)
    >>> decoder_states = np.random.rand(2, 3, 8).astype("float32")
    >>> encoder_states = np.random.rand(2, 5, 6).astype("float32")
    >>> context, weights = layer(
    ...     [decoder_states, encoder_states], valid_lengths=np.array([5, 3]),
    ...     return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 3, 5))
    """

    def __init__(
        self,
        score="dot",
        units=None,
        alignment="global",
        window=10,
        dropout=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(dropout=dropout, seed=seed, **kwargs)
        # The scores this layer computes are the registry's local ones (`Score.local`).
        if score not in local_scores():
            raise ValueError(
                f"`score` must be one of {', '.join(local_scores())}. Received: score={score}"
            )
        if alignment not in ALIGNMENTS:
            raise ValueError(
                f"`alignment` must be one of {', '.join(ALIGNMENTS)}. "
                f"Received: alignment={alignment}"
            )
        if units is not None:
            if isinstance(units, bool) or not isinstance(units, int) or units < 1:
                raise ValueError(
                    f"`units` must be a positive integer or None. Received: units={units}"
                )
            if not (SCORES[score].takes_units or ALIGNMENTS[alignment].takes_units):
                takers = [f"score={name}" for name in local_scores()
                          if SCORES[name].takes_units]
                takers += [f"alignment={name}" for name, entry in ALIGNMENTS.items()
                           if entry.takes_units]
                raise ValueError(
                    f"`units` is used only by {' and '.join(takers)}. "
                    f"Received: units={units} with score={score}, alignment={alignment}"
                )
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(
                f"`window` must be an integer >= 1. Received: window={window}"
            )
        # `score` is BaseAttention's scoring method, so the argument is kept as
        # `score_name`.
        self.score_name = score
        self.units = units
        self.alignment = alignment
        self.window = window

    def build(self, input_shape):
        query_dim = input_shape[0][-1]
        key_dim = (input_shape[2] if len(input_shape) == 3 else input_shape[1])[-1]
        hidden = self.units or query_dim
        self._query_dim = query_dim
        if self.score_name == "dot" and query_dim != key_dim:
            raise ValueError(
                "score='dot' needs queries and keys of the same dimension; use "
                "score='general' to relate different ones. Received: "
                f"query_dim={query_dim}, key_dim={key_dim}"
            )
        if self.score_name == "general":
            self.W_a = self.add_weight(
                name="W_a", shape=(key_dim, query_dim), initializer="glorot_uniform"
            )
        elif self.score_name == "concat":
            self.W_a = self.add_weight(
                name="W_a",
                shape=(query_dim + key_dim, hidden),
                initializer="glorot_uniform",
            )
            self.v_a = self.add_weight(
                name="v_a", shape=(hidden,), initializer="glorot_uniform"
            )
        if self.alignment == "local-p":
            self.W_p = self.add_weight(
                name="W_p", shape=(query_dim, hidden), initializer="glorot_uniform"
            )
            self.v_p = self.add_weight(
                name="v_p", shape=(hidden,), initializer="glorot_uniform"
            )

    def project_keys(self, keys):
        """The key term of the score: `h̄_s @ W_a` (general), `h̄_s @ W_a[query_dim:]`
        (concat), the keys themselves (dot)."""
        if self.score_name == "general":
            return ops.matmul(keys, ops.cast(self.W_a, keys.dtype))
        if self.score_name == "concat":
            key_half = ops.cast(self.W_a, keys.dtype)[self._query_dim :]
            return ops.matmul(keys, key_half)
        return keys

    def score_projected(self, query, projected_keys):
        # float32 for half-precision queries: h_tᵀ h̄_s overflows float16 at 65,504.
        dtype = score_dtype(query.dtype)
        query = ops.cast(query, dtype)
        projected_keys = ops.cast(projected_keys, dtype)
        if self.score_name in ("dot", "general"):
            # scores: batch x Tq x Tv; the einsum contracts the keys' last axis
            # in place, where matmul(query, swapaxes(keys)) copies them transposed.
            return ops.einsum("...qd,...kd->...qk", query, projected_keys)
        query_half = ops.cast(self.W_a, dtype)[: self._query_dim]
        projected_query = ops.matmul(query, query_half)
        # hidden: batch x Tq x Tv x units
        hidden = ops.tanh(
            ops.expand_dims(projected_query, -2) + ops.expand_dims(projected_keys, -3)
        )
        return ops.sum(hidden * ops.cast(self.v_a, dtype), axis=-1)

    def aligned_positions(self, query, keys, value_mask=None, query_positions=None):
        """The window centres `p_t` of local attention, float32 `(batch_size, Tq)`.

        local-m: `query_positions` (default `0 .. Tq-1`). local-p (eq. 9):
        `S · sigmoid(v_pᵀ tanh(W_p h_t))` in `[0, S]`, `S` the count of valid keys.
        """
        if self.alignment == "global":
            raise ValueError(
                "Window centres exist only for local attention. "
                f"Received: alignment={self.alignment}"
            )
        batch_and_queries = ops.shape(query)[:2]
        if self.alignment == "local-m":
            if query_positions is None:
                query_positions = ops.arange(batch_and_queries[1])
            return ops.broadcast_to(
                ops.cast(query_positions, "float32"), batch_and_queries
            )
        # In float32 for half-precision queries, as the scores are.
        query = ops.cast(query, score_dtype(query.dtype))
        hidden = ops.tanh(ops.matmul(query, ops.cast(self.W_p, query.dtype)))
        logits = ops.matmul(hidden, ops.cast(self.v_p, query.dtype))
        fraction = ops.sigmoid(ops.cast(logits, "float32"))
        if value_mask is None:
            source_length = ops.cast(ops.shape(keys)[1], "float32")
        else:
            source_length = ops.sum(ops.cast(value_mask, "float32"), axis=-1, keepdims=True)
        return fraction * source_length

    def score_mask(self, query, keys, value_mask, query_positions=None):
        allowed = super().score_mask(query, keys, value_mask, query_positions)
        if self.alignment == "global":
            return allowed
        centres = self.aligned_positions(query, keys, value_mask, query_positions)
        offsets = self._offsets(keys, value_mask, centres)
        in_window = ops.less_equal(ops.abs(offsets), float(self.window))
        return in_window if allowed is None else ops.logical_and(allowed, in_window)

    def reweight(self, weights, query, keys, value_mask, query_positions=None):
        if self.alignment != "local-p":
            return weights
        centres = self.aligned_positions(query, keys, value_mask, query_positions)
        gaussian = self._gaussian(self._offsets(keys, value_mask, centres))
        return weights * ops.cast(gaussian, weights.dtype)

    def record_window(self, record, value_mask, query_positions=None):
        """The record with the window centres `p_t` and, for local-p, the Gaussian."""
        if self.alignment == "global":
            return record
        centres = self.aligned_positions(record.query, record.keys, value_mask,
                                         query_positions)
        gaussian = None
        if self.alignment == "local-p":
            gaussian = self._gaussian(self._offsets(record.keys, value_mask, centres))
        return record._replace(aligned_positions=centres, gaussian=gaussian)

    def _gaussian(self, offsets):
        """`exp(-(s - p_t)² / (2σ²))`, `σ = D / 2` (eq. 10), for offsets `s - p_t`."""
        sigma = self.window / 2.0
        return ops.exp(-ops.square(offsets) / (2.0 * sigma**2))

    def _offsets(self, keys, value_mask, centres):
        """`s - p_t` for every query and key, float32 `(batch_size, Tq, Tv)`, from
        the window centres `p_t` `(batch_size, Tq)`."""
        if value_mask is None:
            # positions: 1 x Tv
            positions = ops.expand_dims(ops.arange(ops.shape(keys)[1], dtype="float32"), 0)
        else:
            # positions: batch x Tv, counting valid keys only (padding keeps the
            # count of the last valid key before it, and is masked anyway)
            positions = ops.cumsum(ops.cast(value_mask, "float32"), axis=-1) - 1.0
        return ops.expand_dims(positions, -2) - ops.expand_dims(centres, -1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": self.score_name,
                "units": self.units,
                "alignment": self.alignment,
                "window": self.window,
            }
        )
        return config
