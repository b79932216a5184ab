"""The recurrent encoder: embedding, stacked (bi)directional GRU or LSTM layers."""

import keras
import tensorflow as tf
from keras import ops

from attncli.model import recurrent
from attncli.model.cells import make_cell


@keras.saving.register_keras_serializable(package="attncli")
class Encoder(keras.layers.Layer):
    """Reads source ids into annotations `h_1 .. h_S` and a final state.

    Each layer runs a forward cell and, if bidirectional, a backward cell; the two
    directions are merged by `sum` (`h_s = h->_s + h<-_s`) or `concat`
    (`h_s = [h->_s; h<-_s]`, Bahdanau et al. 2015). Pad ids (0) are masked: they
    neither change the states nor appear among the valid annotations.

    Args:
        vocab_size: int, number of source ids.
        embedding_dim: int, size of the embeddings.
        units: int, size of each direction's state.
        cell: `"gru"` or `"lstm"`.
        num_layers: int, stacked layers. Defaults to 1.
        bidirectional: bool. Defaults to True.
        merge_mode: `"sum"` or `"concat"`. Defaults to `"sum"`.
        dropout: float, dropout on the embeddings and between layers. Defaults to 0.
        embedding: a `keras.layers.Embedding` of `(vocab_size, embedding_dim)` to read
            the source with, shared with another layer (tied embeddings), or None
            for a new one. Left out of `get_config`. Defaults to None.
        implementation: `"auto"`, `"loop"` or `"keras"`: how the recurrences run.
            `"loop"`: the split cells' graph loop with its hand-written gradient
            (`recurrent.run`; the faster on a CPU); `"keras"`: `keras.layers.GRU` /
            `LSTM` with the same weights (`recurrent.run_keras`), cuDNN's kernels on
            a GPU; `"auto"`: `"keras"` while training where a GPU is present,
            `"loop"` otherwise (`recurrent.uses_keras_layers`). Defaults to `"auto"`.

    Call arguments:
        source_ids: int `(batch_size, S)`, right-padded with 0.
        training: bool, whether dropout is active.

    Returns:
        `(outputs, final_state, source_mask)`: outputs `(batch_size, S, d)` with
        `d = 2 * units` for concatenated directions and `units` otherwise (zero at
        padding) in the compute dtype, the top layer's final state as a tuple
        (`(h,)` or `(h, c)`, directions merged like the outputs) in the cells'
        `state_dtype` (float32 under a mixed policy), and the boolean mask
        `(batch_size, S)`.
    """

    def __init__(self, vocab_size, embedding_dim, units, cell, num_layers=1,
                 bidirectional=True, merge_mode="sum", dropout=0.0, embedding=None,
                 implementation="auto", **kwargs):
        super().__init__(**kwargs)
        if merge_mode not in ("sum", "concat"):
            raise ValueError(
                f"`merge_mode` must be 'sum' or 'concat'. Received: merge_mode={merge_mode!r}"
            )
        recurrent.uses_keras_layers(implementation, False)  # validates it
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.cell = cell
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.merge_mode = merge_mode
        self.dropout = dropout
        self.implementation = implementation
        if embedding is None:
            embedding = keras.layers.Embedding(
                vocab_size, embedding_dim, dtype=self.dtype_policy, name="embedding"
            )
        self.embedding = embedding
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")
        self.forward_cells = [
            make_cell(cell, units, name=f"layer_{index}_forward", dtype=self.dtype_policy)
            for index in range(num_layers)
        ]
        self.backward_cells = [
            make_cell(cell, units, name=f"layer_{index}_backward", dtype=self.dtype_policy)
            for index in range(num_layers if bidirectional else 0)
        ]

    @property
    def output_dim(self):
        return 2 * self.units if self.bidirectional and self.merge_mode == "concat" else self.units

    def build(self, input_shape=None):
        if not self.embedding.built:  # a shared one may be
            self.embedding.build((None, None))
        for index in range(self.num_layers):
            input_dim = self.embedding_dim if index == 0 else self.output_dim
            for cells in (self.forward_cells, self.backward_cells):
                if cells:
                    cells[index].build((None, input_dim))

    def _merge(self, forward, backward):
        if self.merge_mode == "sum":
            return forward + backward
        return ops.concatenate([forward, backward], axis=-1)

    def _run_loop(self, cells, inputs, initial, source_mask, lengths):
        """Per cell, `h` at every step and the final state, by `recurrent.run`."""
        projected = recurrent.project_tokens(cells, inputs, source_mask)
        if self.bidirectional:
            # The backward cell reads each sequence's real steps last to first;
            # its padding stays at the end, where it changes nothing.
            projected[1] = tf.reverse_sequence(projected[1], lengths, seq_axis=1, batch_axis=0)
        states = recurrent.run(cells, projected, initial, lengths=lengths)
        finals = [recurrent.final_state(s, lengths, i) for s, i in zip(states, initial)]
        return [s[0] for s in states], finals

    def _run_keras(self, cells, inputs, initial, source_mask, lengths):
        """The same by `recurrent.run_keras`, one Keras layer per direction."""
        inputs = [inputs]
        if self.bidirectional:
            # reversed within each sequence, so that the padding stays on the right
            inputs.append(tf.reverse_sequence(inputs[0], lengths, seq_axis=1, batch_axis=0))
        runs = [
            recurrent.run_keras(cell, x, state, source_mask)
            for cell, x, state in zip(cells, inputs, initial)
        ]
        return [outputs for outputs, _ in runs], [final for _, final in runs]

    def call(self, source_ids, training=None):
        source_mask = ops.not_equal(source_ids, 0)
        lengths = ops.sum(ops.cast(source_mask, "int32"), axis=1)
        batch_size = ops.shape(source_ids)[0]
        outputs = self.dropout_layer(self.embedding(source_ids), training=training)
        for index in range(self.num_layers):
            if index > 0:
                outputs = self.dropout_layer(outputs, training=training)
            cells = [self.forward_cells[index]]
            if self.bidirectional:
                cells.append(self.backward_cells[index])
            initial = [cell.initial_state(batch_size) for cell in cells]
            if recurrent.uses_keras_layers(self.implementation, training, self.compute_dtype):
                sequences, finals = self._run_keras(cells, outputs, initial, source_mask, lengths)
            else:
                sequences, finals = self._run_loop(cells, outputs, initial, source_mask, lengths)
            if self.bidirectional:
                backward = tf.reverse_sequence(sequences[1], lengths, seq_axis=1, batch_axis=0)
                outputs = self._merge(sequences[0], backward)
                final_state = tuple(self._merge(f, b) for f, b in zip(*finals))
            else:
                outputs, final_state = sequences[0], finals[0]
            # outputs: batch x S x output_dim, zero at padding, in the compute dtype
            # (the states are float32 under a mixed policy)
            outputs = ops.cast(outputs, self.compute_dtype)
            outputs = outputs * ops.cast(source_mask[:, :, None], outputs.dtype)
        return outputs, final_state, source_mask

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "cell": self.cell,
            "num_layers": self.num_layers,
            "bidirectional": self.bidirectional,
            "merge_mode": self.merge_mode,
            "dropout": self.dropout,
            "implementation": self.implementation,
        })
        return config
