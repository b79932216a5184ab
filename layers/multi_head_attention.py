"""Multi-head attention (Vaswani et al. 2017) over any attncli score."""

import keras
from keras import ops

from layers.base_attention import BaseAttention
from layers.scores import SCORES, make_attention


def _check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value}")


@keras.saving.register_keras_serializable(package="attncli")
class MultiHeadAttention(BaseAttention):
    """Multi-head attention: `num_heads` attentions side by side, each on its own
    projections of the queries, keys and values (Vaswani et al. 2017, "Attention
    Is All You Need", section 3.2.2):

        MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o + b_o
        head_i = Attention(Q W_q^i + b_q^i, K W_k^i + b_k^i, V W_v^i + b_v^i)
        Attention(q, k, v): weights_t = softmax_s(a(q_t, k_s)), context_t = sum_s weights_t[s] v_s

    The score `a` is one of the registry's (`layers.scores.SCORES`), computed by
    the layer it builds, on every head:

        scaled_dot: a(q, k) = <q, k> / sqrt(d_k)            (Vaswani et al., eq. 1)
        dot:        a(q, k) = <q, k>                         (Luong et al. 2015, eq. 8)
        general:    a(q, k) = qᵀ W_a k                       (Luong et al. 2015, eq. 8)
        concat:     a(q, k) = v_aᵀ tanh(W_a [q; k])          (Luong et al. 2015, eq. 8)
        additive:   a(q, k) = vᵀ tanh(W_q q + W_k k)         (Bahdanau et al. 2015, A.1.2)

    `scaled_dot` and `dot` are `DotProductAttention` (the scaled one multiplies
    the queries by `1/sqrt(d_k)` before the product, so `<q, k>` is never formed
    at full size); `general` and `concat` are `LuongAttention`, `additive` is
    `BahdanauAttention`. The score layer's own weights (`W_a`, `v_a`, `v`, ...)
    act on `key_dim`-sized heads and are shared by all heads; the heads differ
    through their projections `W_q^i`, `W_k^i`, `W_v^i`. Masking, the softmax,
    dropout on the weights and the causal mask are `BaseAttention.attend`'s, run
    on a heads axis. The output at a padded query is zero. Under float16 and
    bfloat16 the projections run in the compute dtype, the scores and the
    softmax in float32 (a float16 `<q, k>` overflows past 65,504), and the
    weights are cast back for the weighted sum of the values.

    Kernels are stored in Keras's `(input, output)` layout with the heads side by
    side, as in the paper's concatenation: `W_q` has shape
    `(query_dim, num_heads * key_dim)` and head `i` owns its columns
    `i * key_dim .. (i + 1) * key_dim - 1`; `W_o` has shape
    `(num_heads * value_dim, output_dim)`.

    Self-attention is `layer([x, x])` (a decoder's with `use_causal_mask=True`);
    cross-attention is `layer([decoder_states, encoder_states])`.

    Incremental decoding: `project_key_value(value, key)` projects keys and
    values once, to per-head tensors; `attend_projected(query, keys, values)`
    attends queries to them. A decoder's self-attention appends each step's
    projected key and value to a cache along axis 2 and attends the step's query
    to the whole cache, which gives what the full causal call gives at that step.
    With `use_causal_mask=True` the queries are taken to be the last `Tq`
    positions of the keys' sequence: query `t` sees keys `s <= Tv - Tq + t` (the
    lower triangle when `Tq == Tv`), so several new steps can attend to a cache
    that already holds their prefix.

    Args:
        num_heads: int >= 1, the number of heads `h`.
        key_dim: int >= 1, the size `d_k` of each head's queries and keys.
        value_dim: int >= 1, the size `d_v` of each head's values. Defaults to
            `None`, meaning `key_dim`.
        score: one of `"scaled_dot"`, `"dot"`, `"general"`, `"concat"`,
            `"additive"`. Defaults to `"scaled_dot"`.
        units: int >= 1, the hidden size of the `"concat"` and `"additive"`
            scores; only they take it. Defaults to `None`, meaning `key_dim`.
        use_output_projection: bool; multiply the concatenated heads by `W_o`
            (and add `b_o`). Without it the output is the concatenation itself,
            of size `num_heads * value_dim`. Defaults to True.
        output_dim: int >= 1, the output size with the output projection.
            Defaults to `None`, meaning the query's last dimension (`d_model`, so
            that a residual connection can add the query).
        use_bias: bool; add the biases `b_q`, `b_k`, `b_v` (and `b_o`) to the
            projections. Defaults to True.
        dropout: float in `[0, 1)`, dropout on the attention weights while
            training. Defaults to `0.0`.
        seed: int, seed of the dropout. Defaults to `None`.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Weights: `W_q` `(query_dim, h * key_dim)`, `W_k` `(key_input_dim, h *
    key_dim)`, `W_v` `(value_input_dim, h * value_dim)`, `W_o` `(h * value_dim,
    output_dim)`, biases `b_q`, `b_k`, `b_v`, `b_o` of the matching sizes; the
    score layer `score` holds the score's weights (`general`: `W_a` `(key_dim,
    key_dim)`; `concat`: `W_a` `(2 * key_dim, units)`, `v_a` `(units,)`;
    `additive`: `W_q`, `W_k` `(key_dim, units)`, `v` `(units,)`).

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]`, shapes
            `(batch_size, Tq, query_dim)`, `(batch_size, Tv, value_input_dim)`,
            `(batch_size, Tv, key_input_dim)`; key defaults to value.
        mask: `[query_mask, value_mask]`, booleans `(batch_size, Tq)` and
            `(batch_size, Tv)`, either may be `None`; Keras masks arrive here on
            their own.
        valid_lengths: integers `(batch_size,)`, an alternative to `value_mask`:
            key `s` is valid where `s < valid_lengths`. Defaults to `None`.
        return_attention_scores: bool; also return the weights (after softmax).
            Defaults to False.
        training: bool, whether dropout is applied. Defaults to the Keras
            learning phase.
        use_causal_mask: bool; query `t` attends only to keys `s <= t` (with
            `Tq == Tv`; see above for `Tq < Tv`). Defaults to False.
        return_steps: bool; also return the `AttentionRecord` of every head:
            each head's query `x W_q^i + b_q^i`, keys `x_s W_k^i + b_k^i` (and the
            score's key term as `projected_keys`), values, scores, mask, softmax,
            weights and context (before `W_o`), with a heads axis after the batch,
            and the inputs the heads projected (`query_input`, `key_input`).
            Defaults to False.

    Returns:
        output `(batch_size, Tq, output_dim)` (`(batch_size, Tq, num_heads *
        value_dim)` without the output projection), and the weights
        `(batch_size, num_heads, Tq, Tv)` if `return_attention_scores=True` (the
        `AttentionRecord` if `return_steps=True`). The output carries the query's
        Keras mask.

    Cache methods (the layer must be built, e.g. by
    `build([query_shape, value_shape])` in the decoder's own `build`):
        `project_key_value(value, key=None)` -> `(keys, values)`, shapes
            `(batch_size, num_heads, Tv, score_key_dim)` and
            `(batch_size, num_heads, Tv, value_dim)`; `score_key_dim` is
            `key_dim`, or `units` for `"concat"` and `"additive"` (the keys carry
            the score's key term, e.g. `W_k k` of the additive score).
        `attend_projected(query, keys, values, query_mask=None,
            value_mask=None, return_attention_scores=False, training=None,
            use_causal_mask=False, return_steps=False)`: the call's result for a
            query `(batch_size, Tq, query_dim)` against those keys and values (a
            record's `keys` are then the keys given, the score's key term in them).

    Example:

    >>> layer = MultiHeadAttention(num_heads=4, key_dim=8, score="general")
    >>> target = np.random.rand(2, 5, 32).astype("float32")
    >>> source = np.random.rand(2, 7, 16).astype("float32")
    >>> output, weights = layer([target, source], valid_lengths=np.array([7, 3]),
    ...                         return_attention_scores=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 5, 32), (2, 4, 5, 7))
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        score="scaled_dot",
        units=None,
        use_output_projection=True,
        output_dim=None,
        use_bias=True,
        dropout=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(dropout=dropout, seed=seed, **kwargs)
        _check_positive_int("num_heads", num_heads)
        _check_positive_int("key_dim", key_dim)
        _check_positive_int("value_dim", value_dim, allow_none=True)
        _check_positive_int("units", units, allow_none=True)
        _check_positive_int("output_dim", output_dim, allow_none=True)
        if score not in SCORES:
            raise ValueError(
                f"`score` must be one of {', '.join(SCORES)}. Received: score={score}"
            )
        if units is not None and not SCORES[score].takes_units:
            takers = [name for name, entry in SCORES.items() if entry.takes_units]
            raise ValueError(
                f"`units` is used only by score={' and score='.join(takers)}. "
                f"Received: units={units} with score={score}"
            )
        if output_dim is not None and not use_output_projection:
            raise ValueError(
                "`output_dim` needs the output projection. Received: "
                f"output_dim={output_dim} with use_output_projection=False"
            )
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        # `score` is BaseAttention's scoring method, so the argument is kept as
        # `score_name`, as LuongAttention does.
        self.score_name = score
        self.units = units
        self.use_output_projection = use_output_projection
        self.output_dim = output_dim
        self.use_bias = use_bias
        # The score layer keeps dropout 0: this layer drops the attention weights
        # itself, once, in BaseAttention.attend. A hidden size of None is the
        # heads' size.
        self.score_layer = make_attention(
            score, units=units or key_dim, name="score", dtype=self.dtype_policy
        )

    @property
    def _value_dim(self):
        return self.value_dim or self.key_dim

    def _output_dim(self, query_dim):
        if not self.use_output_projection:
            return self.num_heads * self._value_dim
        return self.output_dim or query_dim

    def build(self, input_shape):
        query_dim = input_shape[0][-1]
        value_input_dim = input_shape[1][-1]
        key_input_dim = (input_shape[2] if len(input_shape) == 3 else input_shape[1])[-1]
        key_units = self.num_heads * self.key_dim
        value_units = self.num_heads * self._value_dim
        self.W_q = self._kernel("W_q", query_dim, key_units)
        self.W_k = self._kernel("W_k", key_input_dim, key_units)
        self.W_v = self._kernel("W_v", value_input_dim, value_units)
        self.b_q = self._bias("b_q", key_units)
        self.b_k = self._bias("b_k", key_units)
        self.b_v = self._bias("b_v", value_units)
        self.W_o = self.b_o = None
        if self.use_output_projection:
            output_dim = self._output_dim(query_dim)
            self.W_o = self._kernel("W_o", value_units, output_dim)
            self.b_o = self._bias("b_o", output_dim)
        head_shape = (None, None, self.key_dim)
        self.score_layer.build([head_shape, head_shape])

    def _kernel(self, name, inputs, units):
        return self.add_weight(name=name, shape=(inputs, units),
                               initializer="glorot_uniform")

    def _bias(self, name, units):
        if not self.use_bias:
            return None
        return self.add_weight(name=name, shape=(units,), initializer="zeros")

    def _split_heads(self, inputs, kernel, bias, head_dim):
        """`inputs @ kernel + bias` with its heads on their own axis:
        `(batch_size, T, dim)` -> `(batch_size, num_heads, T, head_dim)`."""
        inputs = ops.cast(inputs, self.compute_dtype)
        projected = ops.matmul(inputs, ops.cast(kernel, inputs.dtype))
        if bias is not None:
            projected = projected + ops.cast(bias, inputs.dtype)
        batch_size, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        # batch x T x heads x head_dim -> batch x heads x T x head_dim
        projected = ops.reshape(projected, (batch_size, length, self.num_heads, head_dim))
        return ops.transpose(projected, (0, 2, 1, 3))

    def project_queries(self, query):
        """Per-head queries `(batch_size, num_heads, Tq, key_dim)`: `q W_q^i + b_q^i`."""
        return self._split_heads(query, self.W_q, self.b_q, self.key_dim)

    def project_keys(self, keys):
        """Per-head keys as the score takes them, `(batch_size, num_heads, Tv,
        score_key_dim)`: `k W_k^i + b_k^i`, then the score's key term."""
        keys = self._split_heads(keys, self.W_k, self.b_k, self.key_dim)
        return self.score_layer.project_keys(keys)

    def project_values(self, values):
        """Per-head values `(batch_size, num_heads, Tv, value_dim)`: `v W_v^i + b_v^i`."""
        return self._split_heads(values, self.W_v, self.b_v, self._value_dim)

    def project_key_value(self, value, key=None):
        """`(project_keys(key), project_values(value))`; `key` defaults to `value`."""
        return self.project_keys(value if key is None else key), self.project_values(value)

    def score_projected(self, query, projected_keys):
        # scores: batch x heads x Tq x Tv, from the raw query and per-head keys
        return self.score_layer.score_projected(self.project_queries(query), projected_keys)

    def score_mask(self, query, keys, value_mask, query_positions=None):
        allowed = super().score_mask(query, keys, value_mask, query_positions)
        # batch x Tq x Tv -> batch x 1 (every head) x Tq x Tv
        return None if allowed is None else ops.expand_dims(allowed, 1)

    @staticmethod
    def _causal_mask(num_queries, num_keys):
        # Query t is position Tv - Tq + t of the keys' sequence (the lower
        # triangle when Tq == Tv), so new steps can attend to a cache holding
        # their prefix; bottom-right alignment, as FlashAttention 2.1 has it.
        rows = ops.expand_dims(ops.arange(num_queries) + (num_keys - num_queries), -1)
        cols = ops.expand_dims(ops.arange(num_keys), 0)
        return ops.expand_dims(ops.greater_equal(rows, cols), 0)

    def attend(self, query, value, key, return_steps=False, **kwargs):
        """`attend_projected(query, *project_key_value(value, key), **kwargs)`."""
        if not return_steps:
            keys, values = self.project_key_value(value, key)
            return self.attend_projected(query, keys, values, **kwargs)
        # The record names each head's keys before the score's term in them (k W_a,
        # ...), which `project_keys` adds and the record keeps as `projected_keys`.
        head_keys = self._split_heads(key, self.W_k, self.b_k, self.key_dim)
        output, record = self.attend_projected(
            query, self.score_layer.project_keys(head_keys), self.project_values(value),
            return_steps=True, **kwargs,
        )
        return output, record._replace(keys=head_keys, key_input=key)

    def attend_projected(
        self,
        query,
        keys,
        values,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        return_steps=False,
    ):
        """Attend queries `(batch_size, Tq, query_dim)` to per-head `keys` and
        `values` from `project_key_value`; see the class docstring."""
        # context: batch x heads x Tq x value_dim; weights: batch x heads x Tq x Tv
        # (or the record holding them). The query mask is applied to the output
        # below, after the heads merge.
        context, weights = super().attend(
            query,
            values,
            keys,
            value_mask=value_mask,
            return_attention_scores=not return_steps,
            training=training,
            use_causal_mask=use_causal_mask,
            projected_keys=keys,
            return_steps=return_steps,
        )
        batch_size, num_queries = ops.shape(query)[0], ops.shape(query)[1]
        # batch x Tq x heads x value_dim -> batch x Tq x (heads * value_dim)
        output = ops.reshape(
            ops.transpose(context, (0, 2, 1, 3)),
            (batch_size, num_queries, self.num_heads * self._value_dim),
        )
        if self.use_output_projection:
            output = ops.matmul(output, ops.cast(self.W_o, output.dtype))
            if self.b_o is not None:
                output = output + ops.cast(self.b_o, output.dtype)
        if query_mask is not None:
            output = output * ops.cast(ops.expand_dims(query_mask, -1), output.dtype)
        if return_steps:
            # The heads' own queries x W_q^i + b_q^i.
            return output, weights._replace(query=self.project_queries(query),
                                            query_input=query)
        if return_attention_scores:
            return output, weights
        return output

    def compute_output_shape(self, input_shape):
        query_shape = input_shape[0]
        return tuple(query_shape[:-1]) + (self._output_dim(query_shape[-1]),)

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False,
                            return_steps=False, **kwargs):
        if return_steps:  # refused by BaseAttention
            return super().compute_output_spec(inputs, mask=mask, return_steps=True,
                                               **kwargs)
        query, value, _ = self._unpack_inputs(inputs)
        output = keras.KerasTensor(
            self.compute_output_shape([query.shape, value.shape]),
            dtype=self.compute_dtype,
        )
        if not return_attention_scores:
            return output
        weights_shape = (query.shape[0], self.num_heads, query.shape[1], value.shape[1])
        return output, keras.KerasTensor(weights_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "score": self.score_name,
                "units": self.units,
                "use_output_projection": self.use_output_projection,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
            }
        )
        return config
