"""Attentional RNN decoders: Bahdanau's and Luong's.

Both decode one step at a time with `step`, the function beam search calls. Trained
with teacher forcing, a decoder whose recurrence runs through attention (Bahdanau's,
Luong's with input feeding) runs `step` inside a graph loop (`tf.scan`); Luong's
without input feeding runs its RNN over the whole target at once and attends with one
batched product. Both paths compute the same function. What they share is
`attncli.model.attention_decoder.AttentionDecoder`.
"""

import keras
from keras import ops

from attncli.model import recurrent
from attncli.model.attention_decoder import AttentionDecoder


@keras.saving.register_keras_serializable(package="attncli")
class BahdanauDecoder(AttentionDecoder):
    """Bahdanau et al. (2015): attend with the previous state, then update the RNN.

        c_i = sum_j a_ij h_j,  a_i = softmax_j(score(s_{i-1}, h_j))
        s_i = f(s_{i-1}, [E y_{i-1}; c_i])
        logits_i = W_o LayerNorm(s_i) + b_o     W_o = E with `tie_output`

    The query is the previous decoder state `s_{i-1}` (for an LSTM its `h`); the
    context is concatenated with the input embedding and fed to the RNN.

    Args:
        vocab_size: int, number of target ids.
        embedding_dim: int, size of the target embeddings.
        units: int, size of the decoder state.
        cell: `"gru"` or `"lstm"`.
        memory_dim: int, features of the encoder outputs.
        score: a name of `attncli.scores.SCORES` (see `make_attention`).
        alignment: `"global"`, `"local-m"` or `"local-p"`. Defaults to `"global"`.
        window: int, half-width of local attention. Defaults to 10.
        attention_units: int or None, hidden size of concat/additive scores.
        dropout: float, on embeddings and on the features before the output layer.
        tie_output: bool, the output layer's weight is the embedding matrix:
            `W_o = E` (`TiedOutputProjection`); needs `units = embedding_dim`.
            Defaults to False.
        embedding: a `keras.layers.Embedding` shared with the encoder (tied
            source and target embeddings), or None for a new one. Defaults to None.

    Call arguments:
        target_in_ids: int `(batch_size, T)`, `[bos] + target`.
        state: the initial decoder state (tuple).
        memory: dict from `memory`.
        training: bool.
        stepwise: accepted for a common signature; this decoder has one path.
        return_steps: bool, return the attention's `layers.AttentionRecord` of
            every step (its query `s_{i-1}`, ...) in place of the weights; runs
            eagerly, one `step` at a time. Defaults to False.

    Returns:
        `(features (batch_size, T, units), weights (batch_size, T, S))`;
        `output_layer(features)` are the logits.
    """

    @property
    def cell_input_dim(self):
        return self.embedding_dim + self.memory_dim

    def step(self, projected_embedding, state, memory, training=None, return_steps=False):
        """One step from the cell-projected embedding of `y_{i-1}`.

        Returns `(features (B, units), new_state, weights (B, S))`; with
        `return_steps`, the attention's record of the step (one query) in place of
        the weights.
        """
        cell_state, _, position = self._split_state(state)
        query = ops.cast(cell_state[0], self.compute_dtype)[:, None, :]
        positions = None if position is None else position[:, None]
        context, weights = self._attend(query, memory, training, positions, return_steps)
        # context: batch x 1 x memory_dim
        gates_x = projected_embedding + self.cell.project_inputs(
            context[:, 0], offset=self.embedding_dim, use_bias=False
        )
        output, cell_state = self.cell.step(gates_x, cell_state)
        output = ops.cast(output, self.compute_dtype)
        features = self.dropout_layer(self.output_norm(output), training=training)
        weights = weights if return_steps else weights[:, 0]
        return features, self._join_state(cell_state, None, position), weights


@keras.saving.register_keras_serializable(package="attncli")
class LuongDecoder(AttentionDecoder):
    """Luong et al. (2015): update the RNN, then attend with its output.

        h_t = f(h_{t-1}, x_t),  x_t = E y_{t-1}  or  [E y_{t-1}; h~_{t-1}] (input feeding)
        c_t = sum_s a_ts h_s,  a_t = align(h_t, h_s)
        h~_t = tanh(W_c [c_t; h_t])
        logits_t = W_o LayerNorm(h~_t) + b_o    W_o = E with `tie_output`

    Without input feeding nothing recurrent depends on attention, so `call` runs the
    RNN over the whole target and attends with one batched product (skipping the
    target's padding, where its features are unspecified); with it, `call` runs
    `step` in a graph loop.

    Args:
        input_feeding: bool, feed `h~_{t-1}` into the next input. Defaults to False.
        implementation: `"auto"`, `"loop"` or `"keras"`: how the RNN runs over the
            whole target without input feeding, as `Encoder`'s (`"keras"`:
            `keras.layers.GRU` / `LSTM`, cuDNN's kernels on a GPU). Defaults to
            `"auto"`.
        other arguments: as `BahdanauDecoder`.

    Call arguments:
        as `BahdanauDecoder` (the records' query is `h_t`), plus `stepwise`: bool,
        force the step-by-step path (same result; used to check the fast path).
        Defaults to False.

    Returns:
        `(features (batch_size, T, units), weights (batch_size, T, S))`, features
        being `LayerNorm(h~)`.
    """

    def __init__(self, *args, input_feeding=False, implementation="auto", **kwargs):
        super().__init__(*args, **kwargs)
        recurrent.uses_keras_layers(implementation, False)  # validates it
        self.input_feeding = input_feeding
        self.implementation = implementation
        self.combine = keras.layers.Dense(
            self.units, activation="tanh", use_bias=False, dtype=self.dtype_policy,
            name="W_c",
        )

    @property
    def feeds_back(self):
        return self.input_feeding

    @property
    def cell_input_dim(self):
        return self.embedding_dim + (self.units if self.input_feeding else 0)

    def build(self, input_shape=None):
        super().build(input_shape)
        self.combine.build((None, self.memory_dim + self.units))

    def _attentional(self, query, memory, training, positions, return_steps=False):
        context, weights = self._attend(query, memory, training, positions, return_steps)
        attentional = self.combine(ops.concatenate([context, query], axis=-1))
        return attentional, weights

    def step(self, projected_embedding, state, memory, training=None, return_steps=False):
        """One step from the cell-projected embedding of `y_{t-1}`.

        Returns `(features (B, units), new_state, weights (B, S))`; with
        `return_steps`, the attention's record of the step (one query) in place of
        the weights.
        """
        cell_state, attentional, position = self._split_state(state)
        gates_x = projected_embedding
        if self.input_feeding:
            gates_x = gates_x + self.cell.project_inputs(
                attentional, offset=self.embedding_dim, use_bias=False
            )
        output, cell_state = self.cell.step(gates_x, cell_state)
        output = ops.cast(output, self.compute_dtype)
        positions = None if position is None else position[:, None]
        attentional, weights = self._attentional(output[:, None, :], memory, training,
                                                 positions, return_steps)
        # attentional: batch x 1 x units
        attentional = attentional[:, 0]
        features = self.dropout_layer(self.output_norm(attentional), training=training)
        weights = weights if return_steps else weights[:, 0]
        return features, self._join_state(cell_state, attentional, position), weights

    def call(self, target_in_ids, state, memory, training=None, stepwise=False,
             return_steps=False):
        if stepwise or self.input_feeding:
            return self.run_steps(target_in_ids, state, memory, training, return_steps)
        cell_state, _, position = self._split_state(state)
        target_mask = ops.not_equal(target_in_ids, 0)
        embedded = self.dropout_layer(self.embedding(target_in_ids), training=training)
        if recurrent.uses_keras_layers(self.implementation, training, self.compute_dtype):
            outputs, _ = recurrent.run_keras(self.cell, embedded, cell_state, target_mask)
        else:
            # Padding is skipped: the input projection is computed on the real tokens
            # only, and the loop updates only the rows still running.
            lengths = ops.sum(ops.cast(target_mask, "int32"), axis=1)
            projected = recurrent.project_tokens([self.cell], embedded, target_mask)
            (states,) = recurrent.run([self.cell], projected, [cell_state], lengths=lengths)
            outputs = states[0]
        outputs = ops.cast(outputs, self.compute_dtype)
        positions = None
        if position is not None:
            steps = ops.arange(ops.shape(target_in_ids)[1], dtype="int32")
            positions = position[:, None] + steps[None, :]
        attentional, weights = self._attentional(outputs, memory, training, positions,
                                                 return_steps)
        features = self.output_norm(attentional)
        return self.dropout_layer(features, training=training), weights

    def get_config(self):
        config = super().get_config()
        config.update({"input_feeding": self.input_feeding,
                       "implementation": self.implementation})
        return config
