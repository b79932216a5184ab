"""The self-attention decoder (Vaswani et al. 2017, section 3.1), teacher-forced over a
whole target or one step at a time with its keys and values cached."""

import keras
from keras import ops

import layers
from attncli.scores import SCORES
from attncli.model.tied_output import TiedOutputProjection
from attncli.model.transformer_encoder import ResidualBlock, SelfAttentionStack

# What a decoder block and the decoder take beyond `BLOCK_ARGUMENTS`: the cross-attention's.
CROSS_ARGUMENTS = ("memory_dim", "score", "attention_units")


@keras.saving.register_keras_serializable(package="attncli")
class DecoderBlock(ResidualBlock):
    """One decoder block: causal self-attention, cross-attention, feed-forward.

        x = Sublayer(x, SelfAttention(x, x, x))       causal: position t sees s <= t
        x = Sublayer(x, CrossAttention(x, h, h))      h: the encoder's outputs, padding masked
        x = Sublayer(x, FFN(x))

    (`Sublayer` as in `ResidualBlock`.) Self-attention has the scaled dot score;
    cross-attention any of attncli's (`score`), both `layers.MultiHeadAttention`
    with `d_k = d_v = model_dim / num_heads`.

    Args:
        memory_dim: int, features of the encoder's outputs.
        score: the cross-attention's score: `"scaled_dot"`, `"dot"`, `"general"`,
            `"concat"` or `"additive"`. Defaults to `"scaled_dot"`.
        attention_units: int or None, the hidden size of the concat and additive
            scores. Defaults to None (= `model_dim / num_heads`).
        other arguments: as `ResidualBlock`.

    Call arguments:
        x: `(batch_size, T, model_dim)`.
        target_mask: bool `(batch_size, T)`, True at real target positions.
        cross_keys, cross_values: the cross-attention's `project_key_value` of the
            encoder's outputs, `(batch_size, num_heads, S, d)`.
        source_mask: bool `(batch_size, S)`.
        training: bool.
        return_steps: bool, return both attentions' `layers.AttentionRecord`s
            in place of their weights. The cross-attention then attends to
            `encoder_outputs` itself (`MultiHeadAttention.attend` projects them as
            `project_key_value` made `cross_keys` and `cross_values`), so that its
            record holds each head's keys `h_s W_k^i + b_k^i` and the `h_s`.
            Defaults to False.
        encoder_outputs: `(batch_size, S, memory_dim)`, the `h` above; read with
            `return_steps=True` only. Defaults to None.

    Returns:
        `(x, self_weights, cross_weights)`: `(batch_size, T, model_dim)`,
        `(batch_size, num_heads, T, T)` and `(batch_size, num_heads, T, S)` (the
        records with `return_steps=True`).
    """

    def __init__(self, *args, memory_dim, score="scaled_dot", attention_units=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.memory_dim = memory_dim
        self.score = score
        self.attention_units = attention_units
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self.cross_attention = layers.MultiHeadAttention(
            self.num_heads, self.model_dim // self.num_heads, score=score,
            units=attention_units if SCORES[score].takes_units else None,
            dropout=self.attention_dropout, dtype=self.dtype_policy, name="cross_attention",
        )
        self.cross_attention_norm = self._norm("cross_attention_norm")

    def build(self, input_shape=None):
        super().build(input_shape)
        shape = (None, None, self.model_dim)
        self.self_attention.build([shape, shape])
        self.cross_attention.build([shape, (None, None, self.memory_dim)])
        self.self_attention_norm.build(shape)
        self.cross_attention_norm.build(shape)

    def _cross_and_feed_forward(self, x, cross_keys, cross_values, source_mask, *,
                                training=None, encoder_outputs=None):
        query = self.sublayer_input(x, self.cross_attention_norm)
        if encoder_outputs is None:
            attended, cross_weights = self.cross_attention.attend_projected(
                query, cross_keys, cross_values, value_mask=source_mask,
                return_attention_scores=True, training=training,
            )
        else:  # the record of `call(..., return_steps=True)`
            attended, cross_weights = self.cross_attention.attend(
                query, encoder_outputs, encoder_outputs, value_mask=source_mask,
                training=training, return_steps=True,
            )
        x = self.sublayer_output(x, attended, self.cross_attention_norm, training=training)
        return self.feed_forward(x, training=training), cross_weights

    def call(self, x, target_mask, cross_keys, cross_values, source_mask, training=None,
             return_steps=False, encoder_outputs=None):
        query = self.sublayer_input(x, self.self_attention_norm)
        # self_weights: batch x heads x T x T, or the record holding them
        attended, self_weights = self.self_attention.attend(
            query, query, query, value_mask=target_mask, use_causal_mask=True,
            return_attention_scores=not return_steps, training=training,
            return_steps=return_steps,
        )
        x = self.sublayer_output(x, attended, self.self_attention_norm, training=training)
        x, cross_weights = self._cross_and_feed_forward(
            x, cross_keys, cross_values, source_mask, training=training,
            encoder_outputs=encoder_outputs if return_steps else None,
        )
        return x, self_weights, cross_weights

    def step(self, x, keys, values, cross_keys, cross_values, source_mask, training=None):
        """One position, its self-attention reading the keys and values of the steps
        before it.

        Args:
            x: `(batch_size, 1, model_dim)`, the step's input.
            keys, values: `(batch_size, num_heads, t, model_dim / num_heads)`, this
                block's projected keys and values of the `t` steps so far.
            cross_keys, cross_values, source_mask, training: as in `call`.

        Returns:
            `(x, keys, values, cross_weights)`: the step's output `(batch_size, 1,
            model_dim)`, the keys and values with this step's appended, `(batch_size,
            num_heads, t + 1, d)`, and `(batch_size, num_heads, 1, S)`.
        """
        query = self.sublayer_input(x, self.self_attention_norm)
        new_keys, new_values = self.self_attention.project_key_value(query)
        # keys, values: batch x heads x (t + 1) x head_dim, every position visible
        keys = ops.concatenate([keys, ops.cast(new_keys, keys.dtype)], axis=2)
        values = ops.concatenate([values, ops.cast(new_values, values.dtype)], axis=2)
        attended = self.self_attention.attend_projected(query, keys, values, training=training)
        x = self.sublayer_output(x, attended, self.self_attention_norm, training=training)
        x, cross_weights = self._cross_and_feed_forward(
            x, cross_keys, cross_values, source_mask, training=training
        )
        return x, keys, values, cross_weights

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in CROSS_ARGUMENTS})
        return config


@keras.saving.register_keras_serializable(package="attncli")
class TransformerDecoder(SelfAttentionStack):
    """Decodes with causal self-attention and cross-attention (Vaswani et al. 2017).

        x_0 = Dropout(sqrt(d) E[y_{t-1}] + PE(t - 1))
        x_n = DecoderBlock_n(x_{n-1}, h)               n = 1 .. N
        features_t = LayerNorm(x_N) (pre-norm) or x_N (post-norm)
        logits_t = W_o features_t + b_o                (`output_layer`)

    With `tie_output` the output layer's weight is the token embedding matrix,
    `W_o = E` (`TiedOutputProjection`; Vaswani et al. 2017, section 3.4): `E`
    enters scaled, `sqrt(d) E[y]`, and leaves unscaled, `logits_t = E features_t
    + b_o`.

    Teacher-forced, `call` runs the blocks over the whole target with a causal
    mask. Step by step (`step`, what greedy and beam search call), each block
    appends the step's projected key and value to its cache and attends the
    step's query to it, which gives what the causal call gives at that position
    (tested). The state is the cache: a tuple with one `(keys, values)` pair per
    block, each `(batch_size, num_heads, t, model_dim / num_heads)` after `t`
    steps, so the step's position is `t` for every row (a search decodes the
    rows still translating, all at the same step); `initial_state(batch_size)`
    makes it empty. The cross-attention's keys and values are projected once
    per sentence, in `memory`.

    The attention weights returned with each position are the last block's
    cross-attention weights averaged over the heads.

    Args:
        memory_dim: int, features of the encoder's outputs.
        score: the cross-attention's score. Defaults to `"scaled_dot"`.
        attention_units: int or None, hidden size of the concat and additive
            scores. Defaults to None.
        tie_output: bool, tie the output layer to the token embedding. Defaults
            to False.
        other arguments: as `SelfAttentionStack`.

    Call arguments:
        target_in_ids: int `(batch_size, T)`, `[bos] + target`, right-padded with 0.
        state: ignored (the teacher-forced call needs no cache); accepted for the
            RNN decoders' signature.
        memory: dict from `memory`.
        training: bool.
        stepwise: accepted for the RNN decoders' signature; one path here.
        return_attention_scores: bool; also return every block's weights.
        return_steps: bool; also return every block's attention records
            (`DecoderBlock`) instead.

    Returns:
        `(features (batch_size, T, model_dim), weights (batch_size, T, S))`, and
        with `return_attention_scores=True` a dict of lists, one entry per block:
        `"decoder"` `(batch_size, num_heads, T, T)` and `"cross"`
        `(batch_size, num_heads, T, S)` (their `layers.AttentionRecord`s with
        `return_steps=True`). `output_layer(features)` are the logits.
    """

    block_class = DecoderBlock

    def __init__(self, vocab_size, model_dim, memory_dim, num_layers, num_heads,
                 feed_forward_dim, score="scaled_dot", attention_units=None, tie_output=False,
                 **kwargs):
        super().__init__(
            vocab_size, model_dim, num_layers, num_heads, feed_forward_dim,
            block_arguments={"memory_dim": memory_dim, "score": score,
                             "attention_units": attention_units},
            **kwargs,
        )
        self.memory_dim = memory_dim
        self.score = score
        self.attention_units = attention_units
        self.tie_output = tie_output
        self.output_layer = (
            TiedOutputProjection(
                self.embedding.token_embedding, dtype=self.dtype_policy, name="output_projection"
            )
            if tie_output else
            keras.layers.Dense(vocab_size, dtype=self.dtype_policy, name="output_projection")
        )

    def build(self, input_shape=None):
        super().build(input_shape)
        self.output_layer.build((None, self.model_dim))

    @property
    def head_dim(self):
        return self.model_dim // self.num_heads

    def memory(self, values, source_mask):
        """The encoder's outputs with every block's cross-attention keys and values,
        projected here once per sentence."""
        projected = [block.cross_attention.project_key_value(values) for block in self.blocks]
        return {
            "values": values,
            "source_mask": source_mask,
            "cross_keys": [keys for keys, _ in projected],
            "cross_values": [values for _, values in projected],
        }

    def initial_state(self, batch_size):
        """The empty cache: one `(keys, values)` pair of zero steps per block."""
        empty = ops.zeros((batch_size, self.num_heads, 0, self.head_dim),
                          dtype=self.compute_dtype)
        return tuple((empty, empty) for _ in self.blocks)

    def call(self, target_in_ids, state=None, memory=None, training=None, stepwise=False,
             return_attention_scores=False, return_steps=False):
        target_mask = ops.not_equal(target_in_ids, 0)
        x = self.embed(target_in_ids, training=training)
        maps = {"decoder": [], "cross": []}
        # The records' arguments, left out of the normal call.
        steps = ({"return_steps": True, "encoder_outputs": memory["values"]}
                 if return_steps else {})
        for index, block in enumerate(self.blocks):
            x, self_weights, cross_weights = block(
                x, target_mask, memory["cross_keys"][index], memory["cross_values"][index],
                memory["source_mask"], training=training, **steps,
            )
            maps["decoder"].append(self_weights)
            maps["cross"].append(cross_weights)
        features = self.finish(x)
        last = maps["cross"][-1]
        weights = ops.mean(last.weights if return_steps else last, axis=1)
        if return_attention_scores or return_steps:
            return features, weights, maps
        return features, weights

    def step(self, token_ids, state, memory, training=None):
        """One step from the previous token ids `(batch_size,)`, at position `t`, the
        number of steps the cache `state` holds.

        Returns `(features (B, model_dim), new_state, weights (B, S))`.
        """
        position = ops.shape(state[0][0])[2]
        x = self.embed(token_ids[:, None], positions=ops.reshape(position, (1,)),
                       training=training)
        cache = []
        for index, (block, (keys, values)) in enumerate(zip(self.blocks, state)):
            x, keys, values, cross_weights = block.step(
                x, keys, values, memory["cross_keys"][index], memory["cross_values"][index],
                memory["source_mask"], training=training,
            )
            cache.append((keys, values))
        # cross_weights: batch x heads x 1 x S -> batch x S, averaged over the heads
        weights = ops.mean(cross_weights[:, :, 0, :], axis=1)
        return self.finish(x)[:, 0], tuple(cache), weights

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in CROSS_ARGUMENTS + ("tie_output",)})
        return config
