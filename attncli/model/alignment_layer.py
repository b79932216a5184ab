"""The alignment layer: an attention over the source trained to align, not to translate.

Garg et al. 2019 ("Jointly learning to align and translate with transformer models",
section 4) add to a trained Transformer one attention over the encoder's outputs whose
query sees the whole target, future included, and train it on word alignments alone:
the decoder's own cross-attention at step t must guess where y_t comes from before y_t
is known, the added layer reads y_t and what follows it. This is that layer, for any
decoder of ours, with a query made of what a teacher-forced pass has around `y_t`:

    q_t = tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)                 context "next"
    q_t = tanh(W_q [c_t; f_t; f_{t+1}; E(y_t)] + b_q)            context "full"
    c_t = [GRU→([f; E(y)])_t; GRU←([f; E(y)])_t]              (over the whole target)
    a_t(s) = softmax_s(q_t^T W_a h_s)        over the source's real positions
    (Luong et al. 2015's general score, `layers.LuongAttention`)

`f_t` is the decoder's feature vector at the step that emits `y_t` (it has read
`y_{<t}`), `f_{t+1}` the next step's, which has read `y_t` and, in a self-attention
decoder, attends over the whole prefix up to it; `E(y_t)` is `y_t`'s target embedding
(unscaled, without position); `h_s` the encoder's outputs. Past the last step
`f_{t+1}` and `E` are zeros (the row of `[END]`, which has no link).

With context `"next"` the query sees `y_t` and the step after it; with `"full"` (Garg
et al.'s "full context", there an unmasked decoder self-attention) a bidirectional GRU
runs over the target's rows `[f_t; E(y_t)]`, so `q_t` reads every target word, those
after `y_t` included: a word's link can depend on the words that follow it (a French
adjective after its noun, a particle at the end of the clause). `align` always has the
whole target, so nothing is lost.

The layer's inputs are cut from the gradient (`stop_gradient`): guided alignment's
loss trains this layer only, and the translation loss never reaches it, so a model
with an alignment layer translates as it would without one (the search never calls
it) and a finished model can be given one (`training.guided_alignment.freeze_translation`).
"""

import keras
from keras import ops

from layers import LuongAttention

CONTEXTS = ("next", "full")


@keras.saving.register_keras_serializable(package="attncli")
class AlignmentLayer(keras.layers.Layer):
    """`a_t(s) = softmax_s(tanh(W_q [c_t; f_t; f_{t+1}; E(y_t)] + b_q)^T W_a h_s)`.

    Args:
        units: int, the size of the query `q_t` (and of each direction of the
            context GRU).
        context: `"next"` (the query reads `f_t`, `f_{t+1}`, `E(y_t)`) or `"full"`
            (and `c_t`, a bidirectional GRU's output over the whole target).
            Defaults to `"next"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        features: `(batch_size, T, feature_dim)`, the decoder's features of a
            teacher-forced pass over `[bos] y_1 .. y_{T-1}` (row t emits `y_t`).
        next_embeddings: `(batch_size, T, embedding_dim)`, row t the embedding of the
            token read at step t + 1 (`y_t`), zeros past the end.
        values: `(batch_size, S, memory_dim)`, the encoder's outputs `h_s`.
        source_mask: bool `(batch_size, S)`, the real source positions.
        target_mask: bool `(batch_size, T)`, the rows of real target tokens `y_t`
            (the context GRU reads only those). Defaults to every row.
        return_steps: bool, return the attention's `layers.AttentionRecord` (its
            queries `q_t`, keys `h_s`, `h_s W_a`, scores, ...) instead of the
            weights. Defaults to False.

    Returns:
        The weights `(batch_size, T, S)`, each row summing to 1 over the real
        positions (the record holding them with `return_steps=True`).
    """

    def __init__(self, units, context="next", **kwargs):
        super().__init__(**kwargs)
        if context not in CONTEXTS:
            raise ValueError(f"context must be one of {', '.join(CONTEXTS)}. "
                             f"Received: context={context!r}")
        self.units = units
        self.context = context
        self.context_rnn = (
            keras.layers.Bidirectional(
                keras.layers.GRU(units, return_sequences=True, dtype=self.dtype_policy,
                                 name="gru"),
                dtype=self.dtype_policy, name="context_rnn")
            if context == "full" else None
        )
        self.query_projection = keras.layers.Dense(
            units, activation="tanh", dtype=self.dtype_policy, name="query_projection")
        self.attention = LuongAttention(score="general", dtype=self.dtype_policy,
                                        name="attention")

    def build(self, features_shape, embeddings_shape, values_shape):
        query_dim = 2 * features_shape[-1] + embeddings_shape[-1]
        if self.context_rnn is not None:
            self.context_rnn.build(
                (None, None, features_shape[-1] + embeddings_shape[-1]))
            query_dim += 2 * self.units
        self.query_projection.build((None, None, query_dim))
        self.attention.build([(None, None, self.units), tuple(values_shape)])
        self.built = True

    def call(self, features, next_embeddings, values, source_mask, target_mask=None,
             return_steps=False):
        query = self.query(features, next_embeddings, target_mask)
        _, weights = self.attention(
            [query, ops.stop_gradient(values)], mask=[None, source_mask],
            return_attention_scores=not return_steps, return_steps=return_steps,
        )
        return weights

    def query(self, features, next_embeddings, target_mask=None):
        """The queries `q_t` `(batch_size, T, units)` of `call`'s arguments: what its
        attention scores against `W_a h_s`."""
        features = ops.stop_gradient(features)
        next_embeddings = ops.stop_gradient(next_embeddings)
        following = ops.concatenate(
            [features[:, 1:], ops.zeros_like(features[:, :1])], axis=1)
        parts = [features, following, next_embeddings]
        if self.context_rnn is not None:
            rows = ops.concatenate([features, next_embeddings], axis=-1)
            if target_mask is None:
                target_mask = ops.ones(ops.shape(rows)[:2], dtype="bool")
            parts.insert(0, self.context_rnn(rows, mask=target_mask))
        return self.query_projection(ops.concatenate(parts, axis=-1))

    def get_config(self):
        return {**super().get_config(), "units": self.units, "context": self.context}
