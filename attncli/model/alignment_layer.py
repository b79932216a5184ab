"""The alignment layer: an attention over the source trained to align, not to translate.

Garg et al. 2019 ("Jointly learning to align and translate with transformer models",
section 4) add to a trained Transformer one attention over the encoder's outputs whose
query sees the whole target, future included, and train it on word alignments alone:
the decoder's own cross-attention at step t must guess where y_t comes from before y_t
is known, the added layer reads y_t and what follows it. This is that layer, for any
decoder of ours, with a query made of what a teacher-forced pass has around `y_t`:

    q_t = tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)
    a_t(s) = softmax_s(q_t^T W_a h_s)        over the source's real positions
    (Luong et al. 2015's general score, `layers.LuongAttention`)

`f_t` is the decoder's feature vector at the step that emits `y_t` (it has read
`y_{<t}`), `f_{t+1}` the next step's, which has read `y_t` and, in a self-attention
decoder, attends over the whole prefix up to it; `E(y_t)` is `y_t`'s target embedding
(unscaled, without position); `h_s` the encoder's outputs. Past the last step
`f_{t+1}` and `E` are zeros (the row of `[END]`, which has no link).

The layer's inputs are cut from the gradient (`stop_gradient`): guided alignment's
loss trains this layer only, and the translation loss never reaches it, so a model
with an alignment layer translates as it would without one (the search never calls
it) and a finished model can be given one (`training.guided_alignment.freeze_translation`).
"""

import keras
from keras import ops

from layers import LuongAttention


@keras.saving.register_keras_serializable(package="attncli")
class AlignmentLayer(keras.layers.Layer):
    """`a_t(s) = softmax_s(tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)^T W_a h_s)`.

    Args:
        units: int, the size of the query `q_t`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        features: `(batch_size, T, feature_dim)`, the decoder's features of a
            teacher-forced pass over `[bos] y_1 .. y_{T-1}` (row t emits `y_t`).
        next_embeddings: `(batch_size, T, embedding_dim)`, row t the embedding of the
            token read at step t + 1 (`y_t`), zeros past the end.
        values: `(batch_size, S, memory_dim)`, the encoder's outputs `h_s`.
        source_mask: bool `(batch_size, S)`, the real source positions.

    Returns:
        The weights `(batch_size, T, S)`, each row summing to 1 over the real positions.
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.query_projection = keras.layers.Dense(
            units, activation="tanh", dtype=self.dtype_policy, name="query_projection")
        self.attention = LuongAttention(score="general", dtype=self.dtype_policy,
                                        name="attention")

    def build(self, features_shape, embeddings_shape, values_shape):
        query_dim = 2 * features_shape[-1] + embeddings_shape[-1]
        self.query_projection.build((None, None, query_dim))
        self.attention.build([(None, None, self.units), tuple(values_shape)])
        self.built = True

    def call(self, features, next_embeddings, values, source_mask):
        features = ops.stop_gradient(features)
        following = ops.concatenate(
            [features[:, 1:], ops.zeros_like(features[:, :1])], axis=1)
        query = ops.concatenate(
            [features, following, ops.stop_gradient(next_embeddings)], axis=-1)
        query = self.query_projection(query)
        _, weights = self.attention(
            [query, ops.stop_gradient(values)], mask=[None, source_mask],
            return_attention_scores=True,
        )
        return weights

    def get_config(self):
        return {**super().get_config(), "units": self.units}
