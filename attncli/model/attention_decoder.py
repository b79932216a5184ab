"""What the attentional RNN decoders of `attncli.model.decoder` share.

The embedding, the cell, the attention and the output layer; the decoder state; and
the teacher-forced path that runs the subclass's `step` inside a graph loop
(`tf.scan`), or one step after another to keep the attention's records.
"""

import keras
import tensorflow as tf
from keras import ops

import layers
from attncli.model.cells import make_cell
from attncli.model.tied_output import TiedOutputProjection
from attncli.scores import make_attention


class AttentionDecoder(keras.layers.Layer):
    """What both decoders share: embedding, cell, attention, output layer.

    Subclasses define `step` and may override `call` with a faster whole-sequence
    path.

    With `tie_output` the output layer is a `TiedOutputProjection` of the
    embedding, `logits = LayerNorm(features) E^T + b`, which needs `units =
    embedding_dim`; `embedding` passes in a `keras.layers.Embedding` shared with
    the encoder (left out of `get_config`).

    The decoder state is a tuple: the cell's states (`(h,)` for a GRU, `(h, c)` for
    an LSTM; in the cell's `state_dtype`, float32 under a mixed policy), then
    `h~_{t-1}` (in the compute dtype) if the decoder feeds it back, then the step
    number `(batch_size,)` int32 if local-m attention needs it.
    """

    def __init__(self, vocab_size, embedding_dim, units, cell, memory_dim, score,
                 alignment="global", window=10, attention_units=None, dropout=0.0,
                 tie_output=False, embedding=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.cell_kind = cell
        self.memory_dim = memory_dim
        self.score = score
        self.alignment = alignment
        self.window = window
        self.attention_units = attention_units
        self.dropout = dropout
        self.tie_output = tie_output
        if tie_output and units != embedding_dim:
            raise ValueError(
                "`tie_output=True` needs features of the embedding's size: `units` equal "
                f"to `embedding_dim`. Received: units={units}, embedding_dim={embedding_dim}"
            )
        if embedding is None:
            embedding = keras.layers.Embedding(
                vocab_size, embedding_dim, dtype=self.dtype_policy, name="embedding"
            )
        self.embedding = embedding
        self.cell = make_cell(cell, units, name=f"{cell}_cell", dtype=self.dtype_policy)
        self.attention = make_attention(
            score, alignment, window, attention_units or units, name="attention"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")
        # The output layer reads layer-normalised features. Without the norm they start
        # tiny (about 0.01 RMS: Keras's embeddings are U(-0.05, 0.05) and the GRUs and
        # tanh(W_c [c; h]) keep that scale), so each Adam step on W_o moves the logits
        # very little and the model learned about 2x slower per step than the TF
        # tutorial's (which layer-normalises too): training loss 4.53 after 300 steps of
        # batch 64 on spa-eng, 2.73 with the norm, 2.67 the tutorial's. epsilon 1e-6:
        # Keras's 1e-3 exceeds the features' variance at initialisation (2.88).
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, dtype=self.dtype_policy, name="output_norm"
        )
        self.output_layer = (
            TiedOutputProjection(self.embedding, dtype=self.dtype_policy, name="output_projection")
            if tie_output else
            keras.layers.Dense(vocab_size, dtype=self.dtype_policy, name="output_projection")
        )

    @property
    def feeds_back(self):
        """Whether `h~_{t-1}` is part of the state."""
        return False

    @property
    def tracks_position(self):
        return self.alignment == "local-m"

    def build(self, input_shape=None):
        if not self.embedding.built:  # a shared one may be
            self.embedding.build((None, None))
        self.cell.build((None, self.cell_input_dim))
        self.attention.build([(None, None, self.units), (None, None, self.memory_dim)])
        self.output_norm.build((None, self.units))
        self.output_layer.build((None, self.units))

    def memory(self, values, source_mask):
        """The per-sentence tensors every step reads; keys are projected here, once."""
        return {
            "values": values,
            "projected_keys": self.attention.project_keys(values),
            "source_mask": source_mask,
        }

    def initial_state(self, cell_state):
        """The decoder state before the first step, from the bridged cell state."""
        state = tuple(ops.cast(s, self.cell.state_dtype) for s in cell_state)
        batch_size = ops.shape(state[0])[0]
        if self.feeds_back:
            state += (ops.zeros((batch_size, self.units), dtype=self.compute_dtype),)
        if self.tracks_position:
            state += (ops.zeros((batch_size,), dtype="int32"),)
        return state

    def _split_state(self, state):
        cell_state = tuple(state[: self.cell.num_states])
        rest = list(state[self.cell.num_states :])
        attentional = rest.pop(0) if self.feeds_back else None
        position = rest.pop(0) if self.tracks_position else None
        return cell_state, attentional, position

    def _join_state(self, cell_state, attentional, position):
        state = tuple(cell_state)
        if self.feeds_back:
            state += (attentional,)
        if self.tracks_position:
            state += (position + 1,)
        return state

    def _attend(self, query, memory, training, query_positions=None, return_steps=False):
        """context `(B, Tq, d_v)` and weights `(B, Tq, S)` for queries `(B, Tq, units)`
        (with `return_steps`, the attention's `layers.AttentionRecord`)."""
        return self.attention.attend(
            query, memory["values"], memory["values"],
            value_mask=memory["source_mask"],
            return_attention_scores=not return_steps,
            training=training,
            query_positions=query_positions,
            projected_keys=memory["projected_keys"],
            return_steps=return_steps,
        )

    def embed(self, target_ids, training=None):
        """Input embeddings, dropped out, projected by the cell's input kernel."""
        embedded = self.dropout_layer(self.embedding(target_ids), training=training)
        return self.cell.project_inputs(embedded)

    def call(self, target_in_ids, state, memory, training=None, stepwise=False,
             return_steps=False):
        return self.run_steps(target_in_ids, state, memory, training, return_steps)

    def run_steps(self, target_in_ids, state, memory, training=None, return_steps=False):
        """Teacher-forced features and weights, computed with `step` in a graph loop.

        Returns `(features (B, T, units), weights (B, T, S))`; with `return_steps`
        the attention's record of every step in place of the weights
        (`recorded_steps`).
        """
        if return_steps:
            return self.recorded_steps(target_in_ids, state, memory, training)
        # time-major: T x batch x gates*units
        projected = tf.transpose(self.embed(target_in_ids, training), (1, 0, 2))
        source_length = ops.shape(memory["values"])[1]
        batch_size = ops.shape(target_in_ids)[0]

        def scan_step(carry, projected_embedding):
            _, _, state = carry
            features, state, weights = self.step(
                projected_embedding, state, memory, training
            )
            return features, weights, state

        features, weights, _ = tf.scan(
            scan_step, projected,
            initializer=(
                tf.zeros((batch_size, self.units), self.compute_dtype),
                tf.zeros((batch_size, source_length), self.compute_dtype),
                tuple(state),
            ),
        )
        return tf.transpose(features, (1, 0, 2)), tf.transpose(weights, (1, 0, 2))

    def recorded_steps(self, target_in_ids, state, memory, training=None):
        """`run_steps` with the attention's record of each `step`, one step after
        another in Python (eagerly: a graph loop carries tensors of fixed structure,
        and a record's parts depend on the attention), the records joined into one
        over all the target's queries (`layers.join_queries`).

        Returns `(features (B, T, units), record)`.
        """
        projected = self.embed(target_in_ids, training)
        features, records = [], []
        for t in range(target_in_ids.shape[1]):
            step_features, state, record = self.step(projected[:, t], state, memory,
                                                     training, return_steps=True)
            features.append(step_features)
            records.append(record)
        return ops.stack(features, axis=1), layers.join_queries(records)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "cell": self.cell_kind,
            "memory_dim": self.memory_dim,
            "score": self.score,
            "alignment": self.alignment,
            "window": self.window,
            "attention_units": self.attention_units,
            "dropout": self.dropout,
            "tie_output": self.tie_output,
        })
        return config
