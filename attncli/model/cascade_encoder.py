"""The cascaded encoder of Chen et al. 2018: recurrent layers, then self-attention blocks
on their outputs."""

import keras

from attncli.model.encoder import Encoder
from attncli.model.transformer_encoder import EncoderBlock, make_final_norm, run_encoder_blocks


@keras.saving.register_keras_serializable(package="attncli")
class CascadeEncoder(Encoder):
    """The recurrent `Encoder` with self-attention blocks stacked on its outputs (Chen
    et al. 2018, "The Best of Both Worlds: Combining Recent Advances in Neural Machine
    Translation", arXiv:1804.09849, the section "Cascaded Encoder").

        r_1 .. r_S, h_final = Encoder(x)              the recurrent layers, pad masked
        x_0 = Dropout(W_p r_s + b_p)                  when R != d, else Dropout(r_s)
        x_n = EncoderBlock_n(x_{n-1})                 n = 1 .. N, padded keys masked
        h = LayerNorm(x_N) (pre-norm) or x_N (post-norm), zero at padding

    with `R = 2 * units` for concatenated directions and `units` otherwise (the
    recurrent outputs' width), and `d = embedding_dim` the blocks' width, as in the
    self-attention encoder. The recurrent layers give the blocks their order, so no
    position encoding is added. The decoder attends over `h`; its first state comes
    from the recurrent layers' `h_final` through the bridge, as under a recurrent
    encoder.

    Args:
        vocab_size, embedding_dim, units, cell, num_layers, bidirectional,
            merge_mode, embedding, implementation: as `Encoder`.
        num_blocks: int, the self-attention blocks N on top. Defaults to 1.
        num_heads: int, heads of every block's self-attention; must divide
            `embedding_dim`. Defaults to 4.
        feed_forward_dim: int or None, the blocks' feed-forward inner size.
            Defaults to None (= `4 * embedding_dim`).
        norm: `"pre"` or `"post"`, as `ResidualBlock`. Defaults to `"pre"`.
        activation: `"relu"` or `"gelu"`. Defaults to `"relu"`.
        dropout: float, on the embeddings, between recurrent layers, on `x_0` and
            on every block's sublayer outputs. Defaults to 0.
        attention_dropout: float, on the blocks' attention weights. Defaults to 0.
        final_gain: float, the initial gain of the final LayerNorm (pre-norm only).
            Defaults to 1.0.

    Call arguments:
        source_ids: int `(batch_size, S)`, right-padded with 0.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return every block's weights.
            Defaults to False.
        return_steps: bool, also return every block's self-attention record
            (`EncoderBlock`) instead. Defaults to False.

    Returns:
        `(outputs, final_state, source_mask)`: outputs `h` `(batch_size, S,
        embedding_dim)`, zero at padding; the recurrent layers' final state, as
        `Encoder` returns it (`(h,)` or `(h, c)`, `(batch_size, R)` each); the
        boolean mask `(batch_size, S)`. With `return_attention_scores=True` also
        the list, per block, of self-attention weights `(batch_size, num_heads, S,
        S)`.

    >>> encoder = CascadeEncoder(100, 16, 8, "gru", merge_mode="concat",
    ...                          num_blocks=2, num_heads=2)
    >>> outputs, (h_final,), mask = encoder(keras.ops.convert_to_tensor([[5, 6, 0]]))
    >>> tuple(outputs.shape), tuple(h_final.shape)
    ((1, 3, 16), (1, 16))
    """

    def __init__(self, vocab_size, embedding_dim, units, cell, num_blocks=1, num_heads=4,
                 feed_forward_dim=None, norm="pre", activation="relu",
                 attention_dropout=0.0, final_gain=1.0, **kwargs):
        super().__init__(vocab_size, embedding_dim, units, cell, **kwargs)
        self.num_blocks = num_blocks
        self.num_heads = num_heads
        self.feed_forward_dim = feed_forward_dim
        self.norm = norm
        self.activation = activation
        self.attention_dropout = attention_dropout
        self.projection = None
        if self.output_dim != embedding_dim:
            self.projection = keras.layers.Dense(
                embedding_dim, dtype=self.dtype_policy, name="projection"
            )
        self.blocks = [
            EncoderBlock(
                embedding_dim, num_heads, feed_forward_dim or 4 * embedding_dim, norm=norm,
                activation=activation, dropout=self.dropout,
                attention_dropout=attention_dropout, dtype=self.dtype_policy,
                name=f"block_{index}",
            )
            for index in range(num_blocks)
        ]
        self.final_gain = final_gain
        self.final_norm = make_final_norm(norm, final_gain, self.dtype_policy)

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.projection is not None:
            self.projection.build((None, None, self.output_dim))
        for block in self.blocks:
            block.build()
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.embedding_dim))

    def call(self, source_ids, training=None, return_attention_scores=False,
             return_steps=False):
        x, final_state, source_mask = super().call(source_ids, training=training)
        if self.projection is not None:
            x = self.projection(x)
        # x: batch x S x embedding_dim
        x = self.dropout_layer(x, training=training)
        outputs, all_weights = run_encoder_blocks(self.blocks, self.final_norm, x,
                                                  source_mask, training=training,
                                                  return_steps=return_steps)
        if return_attention_scores or return_steps:
            return outputs, final_state, source_mask, all_weights
        return outputs, final_state, source_mask

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_blocks": self.num_blocks,
            "num_heads": self.num_heads,
            "feed_forward_dim": self.feed_forward_dim,
            "norm": self.norm,
            "activation": self.activation,
            "attention_dropout": self.attention_dropout,
            "final_gain": self.final_gain,
        })
        return config
