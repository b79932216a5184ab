"""The output layer tied to the target embedding (Press & Wolf 2017)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="attncli")
class TiedOutputProjection(keras.layers.Layer):
    """Logits from features with the target embedding matrix as the weight.

        logits = features E^T + b

    `E` `(vocab_size, d)` is the `embeddings` variable of `embedding`: one variable
    read by both layers, so a gradient step on either use moves the other (Press &
    Wolf 2017, "Using the Output Embedding to Improve Language Models"; Vaswani et
    al. 2017, section 3.4). Only the bias `b` `(vocab_size,)` is this layer's own.
    The matrix is used as it is: a Transformer's input embedding is `sqrt(d) E[w]`
    (`layers.PositionalEmbedding`), its logits `features E^T + b`, unscaled, as in
    Vaswani et al.

    Args:
        embedding: a `keras.layers.Embedding` whose `output_dim` is the size `d`
            of the features.

    Call arguments:
        features: `(..., d)`.

    Returns:
        logits `(..., vocab_size)`.

    Example:

    >>> embedding = keras.layers.Embedding(100, 8)
    >>> output = TiedOutputProjection(embedding)
    >>> output(np.zeros((2, 5, 8))).shape
    (2, 5, 100)
    """

    def __init__(self, embedding, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(embedding, keras.layers.Embedding):
            raise ValueError(
                "`embedding` must be a keras.layers.Embedding. "
                f"Received: embedding={embedding!r}"
            )
        self.embedding = embedding

    @property
    def vocab_size(self):
        return self.embedding.input_dim

    def build(self, input_shape=None):
        if input_shape is not None and input_shape[-1] != self.embedding.output_dim:
            raise ValueError(
                f"the features must have the embedding's size {self.embedding.output_dim}. "
                f"Received: input_shape={input_shape}"
            )
        if not self.embedding.built:
            self.embedding.build()
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")

    def call(self, features):
        matrix = ops.cast(self.embedding.embeddings, features.dtype)
        return ops.matmul(features, ops.transpose(matrix)) + ops.cast(self.bias, features.dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config["embedding"] = keras.saving.serialize_keras_object(self.embedding)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["embedding"] = keras.saving.deserialize_keras_object(config["embedding"])
        return cls(**config)
