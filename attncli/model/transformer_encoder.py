"""The self-attention encoder (Vaswani et al. 2017, section 3.1), and the block pieces
the self-attention decoder and the cascade encoder share: residual sublayers with pre- or
post-norm, the position-wise feed-forward network, the encoder blocks."""

import keras
from keras import ops

import layers

# The constructor arguments every block and every stack of blocks takes.
BLOCK_ARGUMENTS = ("model_dim", "num_heads", "feed_forward_dim", "norm", "activation",
                   "dropout", "attention_dropout")


class ResidualBlock(keras.layers.Layer):
    """What every self-attention block shares: residual sublayers and the feed-forward
    network.

    A sublayer `f` (attention, feed-forward) is wrapped as

        post-norm (Vaswani et al. 2017):  x + f(x) -> LayerNorm(x + Dropout(f(x)))
        pre-norm  (Wang et al. 2019):     x -> x + Dropout(f(LayerNorm(x)))

    and the feed-forward network is `FFN(x) = act(x W_1 + b_1) W_2 + b_2` (eq. 2),
    `act` ReLU or GELU. Subclasses create their norms with `_norm(name)`.

    Args:
        model_dim: int, `d_model`, the size of the block's inputs and outputs.
        num_heads: int, heads of every attention; must divide `model_dim`.
        feed_forward_dim: int, `d_ff`, the inner size of the feed-forward network.
        norm: `"pre"` or `"post"`. Defaults to `"pre"`.
        activation: `"relu"` or `"gelu"`. Defaults to `"relu"`.
        dropout: float, on every sublayer's output. Defaults to 0.
        attention_dropout: float, on the attention weights. Defaults to 0.
    """

    def __init__(self, model_dim, num_heads, feed_forward_dim, norm="pre", activation="relu",
                 dropout=0.0, attention_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if norm not in ("pre", "post"):
            raise ValueError(f"`norm` must be 'pre' or 'post'. Received: norm={norm!r}")
        if model_dim % num_heads:
            raise ValueError(
                f"`num_heads` must divide `model_dim` ({model_dim}). Received: "
                f"num_heads={num_heads}"
            )
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.feed_forward_dim = feed_forward_dim
        self.norm = norm
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")
        self.feed_forward_inner = keras.layers.Dense(
            feed_forward_dim, activation=activation, dtype=self.dtype_policy, name="W_1"
        )
        self.feed_forward_outer = keras.layers.Dense(
            model_dim, dtype=self.dtype_policy, name="W_2"
        )
        self.feed_forward_norm = self._norm("feed_forward_norm")

    def _norm(self, name):
        return keras.layers.LayerNormalization(epsilon=1e-6, dtype=self.dtype_policy, name=name)

    def _attention(self, name):
        return layers.MultiHeadAttention(
            self.num_heads, self.model_dim // self.num_heads, dropout=self.attention_dropout,
            dtype=self.dtype_policy, name=name,
        )

    def build(self, input_shape=None):
        self.feed_forward_inner.build((None, None, self.model_dim))
        self.feed_forward_outer.build((None, None, self.feed_forward_dim))
        self.feed_forward_norm.build((None, None, self.model_dim))

    def sublayer_input(self, x, norm):
        """What the sublayer reads: `LayerNorm(x)` (pre-norm) or `x` (post-norm)."""
        return norm(x) if self.norm == "pre" else x

    def sublayer_output(self, x, output, norm, *, training=None):
        """The residual sum: `x + Dropout(output)`, normalised after it in post-norm."""
        x = x + self.dropout_layer(output, training=training)
        return x if self.norm == "pre" else norm(x)

    def feed_forward(self, x, *, training=None):
        """The feed-forward sublayer with its residual connection."""
        inner = self.feed_forward_inner(self.sublayer_input(x, self.feed_forward_norm))
        return self.sublayer_output(
            x, self.feed_forward_outer(inner), self.feed_forward_norm, training=training
        )

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in BLOCK_ARGUMENTS})
        return config


@keras.saving.register_keras_serializable(package="attncli")
class EncoderBlock(ResidualBlock):
    """One encoder block: multi-head self-attention, then the feed-forward network.

        x = Sublayer(x, SelfAttention(x, x, x))      padded keys masked
        x = Sublayer(x, FFN(x))

    (`Sublayer` as in `ResidualBlock`.) Self-attention is
    `layers.MultiHeadAttention` with the scaled dot score, `d_k = d_v =
    model_dim / num_heads`.

    Args: as `ResidualBlock`.

    Call arguments:
        x: `(batch_size, S, model_dim)`.
        mask: bool `(batch_size, S)`, True at real positions.
        training: bool.
        return_attention_scores: bool. Defaults to False.
        return_steps: bool, return the self-attention's `layers.AttentionRecord`
            (every head's query, keys, values, scores, mask, softmax, weights and
            context) in place of its weights. Defaults to False.

    Returns:
        `(batch_size, S, model_dim)`, and the self-attention weights
        `(batch_size, num_heads, S, S)` with `return_attention_scores=True` (its
        record with `return_steps=True`).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")

    def build(self, input_shape=None):
        super().build(input_shape)
        shape = (None, None, self.model_dim)
        self.self_attention.build([shape, shape])
        self.self_attention_norm.build(shape)

    def call(self, x, mask, training=None, return_attention_scores=False,
             return_steps=False):
        query = self.sublayer_input(x, self.self_attention_norm)
        # weights: batch x heads x S x S, or the record holding them
        attended, weights = self.self_attention.attend(
            query, query, query, query_mask=mask, value_mask=mask,
            return_attention_scores=not return_steps, training=training,
            return_steps=return_steps,
        )
        x = self.sublayer_output(x, attended, self.self_attention_norm, training=training)
        x = self.feed_forward(x, training=training)
        return (x, weights) if return_attention_scores or return_steps else x


def make_final_norm(norm, gain, dtype_policy):
    """The LayerNorm after the last pre-norm block, its gain `gamma` starting at `gain`
    (None with post-norm, whose blocks end normalised).

    A LayerNorm's output has norm `gain * sqrt(d)` per position at initialisation. A
    recurrent decoder attending over it expects the small outputs of a freshly
    initialised RNN instead, so a gain below 1 starts a self-attention encoder's
    annotations on that scale (`model.encoder_norm_gain`).
    """
    if norm != "pre":
        return None
    return keras.layers.LayerNormalization(
        epsilon=1e-6, gamma_initializer=keras.initializers.Constant(gain),
        dtype=dtype_policy, name="final_norm",
    )


def run_encoder_blocks(blocks, final_norm, x, source_mask, training=None,
                       return_steps=False):
    """`EncoderBlock`s over `x` `(batch_size, S, d)`, then `final_norm` (None with
    post-norm): the self-attention encoder's and the cascade encoder's upper half.

    Returns:
        `(outputs, weights)`: outputs `(batch_size, S, d)`, zero at padding, and the
        list, per block, of self-attention weights `(batch_size, num_heads, S, S)`
        (with `return_steps=True`, of self-attention records).
    """
    all_weights = []
    for block in blocks:
        x, weights = block(x, source_mask, training=training, return_attention_scores=True,
                           return_steps=return_steps)
        all_weights.append(weights)
    if final_norm is not None:
        x = final_norm(x)
    # outputs: batch x S x d, zero at padding
    return x * ops.cast(source_mask[:, :, None], x.dtype), all_weights


class SelfAttentionStack(keras.layers.Layer):
    """Positional embedding, `num_layers` blocks and, with pre-norm, a final LayerNorm:
    what the self-attention encoder and decoder share.

        x_0 = Dropout(sqrt(d) E[w_t] + PE(t))      (`layers.PositionalEmbedding`)
        x_n = Block_n(x_{n-1})
        output = LayerNorm(x_N) with pre-norm, x_N with post-norm

    Subclasses set `block_class`.

    Args:
        vocab_size: int, number of token ids.
        model_dim: int, `d_model`: embeddings and every block.
        num_layers: int, blocks.
        num_heads, feed_forward_dim, norm, activation, dropout, attention_dropout:
            as `ResidualBlock`.
        position_encoding: `"sinusoidal"` or `"learned"`. Defaults to `"sinusoidal"`.
        max_positions: int, rows of the learned position table. Defaults to 256.
        embedding: a `keras.layers.Embedding` `(vocab_size, model_dim)`, the `E`
            above, shared with another layer (tied embeddings), or None for a new
            one. Left out of `get_config`. Defaults to None.
        final_gain: float, the initial gain of the final LayerNorm (pre-norm only).
            Defaults to 1.0.
    """

    block_class = None

    def __init__(self, vocab_size, model_dim, num_layers, num_heads, feed_forward_dim,
                 norm="pre", activation="relu", dropout=0.0, attention_dropout=0.0,
                 position_encoding="sinusoidal", max_positions=256, block_arguments=None,
                 embedding=None, final_gain=1.0, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.model_dim = model_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.feed_forward_dim = feed_forward_dim
        self.norm = norm
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.position_encoding = position_encoding
        self.max_positions = max_positions
        self.embedding = layers.PositionalEmbedding(
            vocab_size, model_dim, encoding=position_encoding,
            max_length=max_positions if position_encoding == "learned" else None,
            token_embedding=embedding, dtype=self.dtype_policy, name="embedding",
        )
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")
        self.blocks = [
            self.block_class(
                model_dim, num_heads, feed_forward_dim, norm=norm, activation=activation,
                dropout=dropout, attention_dropout=attention_dropout,
                dtype=self.dtype_policy, name=f"block_{index}", **(block_arguments or {}),
            )
            for index in range(num_layers)
        ]
        self.final_gain = final_gain
        self.final_norm = make_final_norm(norm, final_gain, self.dtype_policy)

    def build(self, input_shape=None):
        self.embedding.build((None, None))
        for block in self.blocks:
            block.build()
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.model_dim))

    def embed(self, token_ids, positions=None, training=None):
        """`Dropout(sqrt(d) E[w] + PE(position))`, `(batch_size, T, model_dim)`."""
        return self.dropout_layer(self.embedding(token_ids, positions=positions),
                                  training=training)

    def finish(self, x):
        """The final LayerNorm of pre-norm stacks; post-norm blocks end normalised."""
        return x if self.final_norm is None else self.final_norm(x)

    def get_config(self):
        config = super().get_config()
        names = BLOCK_ARGUMENTS + ("vocab_size", "num_layers", "position_encoding",
                                   "max_positions", "final_gain")
        config.update({name: getattr(self, name) for name in names})
        return config


@keras.saving.register_keras_serializable(package="attncli")
class TransformerEncoder(SelfAttentionStack):
    """Reads source ids with self-attention (Vaswani et al. 2017, section 3.1).

        x_0 = Dropout(sqrt(d) E[x_s] + PE(s))
        x_n = EncoderBlock_n(x_{n-1})                 n = 1 .. N, padding masked
        h = LayerNorm(x_N) (pre-norm) or x_N (post-norm), zero at padding
        summary = sum_s mask_s h_s / sum_s mask_s    the mean over the real positions

    A self-attention encoder has no final recurrent state. An RNN decoder starts
    from `summary`, which the model's bridge maps to its state (with the dense
    bridge, `s_0 = tanh(W_b summary + b_b)`).

    Args: as `SelfAttentionStack`.

    Call arguments:
        source_ids: int `(batch_size, S)`, right-padded with 0.
        training: bool.
        return_attention_scores: bool, also return every block's weights.
        return_steps: bool, also return every block's self-attention record
            (`EncoderBlock`) instead.

    Returns:
        `(outputs, final_state, source_mask)` like the recurrent `Encoder`:
        outputs `(batch_size, S, model_dim)` (zero at padding), `final_state` the
        tuple `(summary,)`, `summary` `(batch_size, model_dim)`, and the boolean
        mask `(batch_size, S)`; with `return_attention_scores=True` also the list,
        per block, of self-attention weights `(batch_size, num_heads, S, S)` (of
        records with `return_steps=True`).
    """

    block_class = EncoderBlock

    @property
    def output_dim(self):
        return self.model_dim

    def call(self, source_ids, training=None, return_attention_scores=False,
             return_steps=False):
        source_mask = ops.not_equal(source_ids, 0)
        x = self.embed(source_ids, training=training)
        outputs, all_weights = run_encoder_blocks(self.blocks, self.final_norm, x,
                                                  source_mask, training=training,
                                                  return_steps=return_steps)
        real = ops.cast(source_mask[:, :, None], outputs.dtype)
        count = ops.maximum(ops.sum(real, axis=1), 1.0)
        summary = ops.sum(outputs, axis=1) / count
        if return_attention_scores or return_steps:
            return outputs, (summary,), source_mask, all_weights
        return outputs, (summary,), source_mask
