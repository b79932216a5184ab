"""Token embeddings plus sinusoidal or learned position encodings (Vaswani et al. 2017)."""

import math

import keras
from keras import ops


def sinusoidal_encoding(positions, depth):
    """The sinusoidal position encoding of Vaswani et al. 2017, section 3.5.

        PE(pos, 2i)     = sin(pos / 10000^(2i / depth))
        PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))

    Sine and cosine alternate along the last axis: column `j` uses the frequency
    of `i = j // 2`. An odd `depth` ends with a sine column.

    Args:
        positions: integer tensor of any shape, e.g. `(T,)` or `(batch_size, T)`.
        depth: int, the encoding size `d`.

    Returns:
        float32 tensor of shape `positions.shape + (depth,)`.
    """
    columns = ops.arange(depth)
    # 1 / 10000^(2i / depth), with i = column // 2: shape (depth,)
    rates = ops.exp(
        ops.cast(2 * (columns // 2), "float32") * (-math.log(10000.0) / depth)
    )
    angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * rates
    return ops.where(columns % 2 == 0, ops.sin(angles), ops.cos(angles))


@keras.saving.register_keras_serializable(package="attncli")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by `sqrt(d)`, plus a position encoding.

    For token ids `w_1 .. w_T` (Vaswani et al. 2017, sections 3.4 and 3.5):

        x_t = sqrt(d) * E[w_t] + PE(t)
        PE(t, 2i)     = sin(t / 10000^(2i / d))
        PE(t, 2i + 1) = cos(t / 10000^(2i / d))

    with `E` the `(vocab_size, d)` embedding matrix. Attention alone is blind to
    order (permuting its inputs only permutes its outputs); adding `PE` makes
    each output depend on where its token stands. The encoding is computed for
    whatever length arrives, so there is no maximum length. Scaling by
    `sqrt(d)` keeps the embeddings, initialised small, from being drowned by
    the encoding, whose entries lie in `[-1, 1]`.

    With `encoding="learned"` the encoding is a trained table instead
    (Gehring et al. 2017; Vaswani et al. 2017 found both equally good):

        x_t = sqrt(d) * E[w_t] + P[min(t, max_length - 1)]

    with `P` of shape `(max_length, d)`; positions from `max_length - 1` on share
    its last row (the table has no row for them).

    Args:
        vocab_size: int, the number of token ids.
        output_dim: int, the embedding size `d`.
        mask_zero: bool; treat id 0 as padding and propagate a Keras mask, as
            `keras.layers.Embedding` does. Defaults to False.
        encoding: `"sinusoidal"` or `"learned"`. Defaults to `"sinusoidal"`.
        max_length: int >= 1, the rows of the learned table; needed by
            `encoding="learned"` only. Defaults to None.
        token_embedding: a `keras.layers.Embedding` of `(vocab_size, output_dim)`
            to use as `E`, shared with another layer (tied embeddings, e.g. an
            output layer reading `E^T`), or None for a new one. Serialised with
            the layer, so a layer rebuilt from its config has its own copy.
            Defaults to None.
        **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: integer token ids `(batch_size, T)`.
        positions: integers `(batch_size, T)` or `(T,)`, the position of each
            token; a decoder fed one token at a time passes its step here.
            Defaults to `None`, meaning `0 .. T-1`.

    Returns:
        `(batch_size, T, output_dim)`, with the Keras mask `inputs != 0` if
        `mask_zero=True`.

    Example:

    >>> layer = PositionalEmbedding(vocab_size=100, output_dim=8, mask_zero=True)
    >>> layer(np.array([[5, 7, 0]])).shape  # the padding position is masked
    (1, 3, 8)
    """

    def __init__(self, vocab_size, output_dim, mask_zero=False, encoding="sinusoidal",
                 max_length=None, token_embedding=None, **kwargs):
        super().__init__(**kwargs)
        if encoding not in ("sinusoidal", "learned"):
            raise ValueError(
                f"`encoding` must be 'sinusoidal' or 'learned'. Received: encoding={encoding!r}"
            )
        if encoding == "learned" and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
            raise ValueError(
                "`encoding='learned'` needs `max_length`, a positive integer. "
                f"Received: max_length={max_length}"
            )
        self.vocab_size = vocab_size
        self.output_dim = output_dim
        self.mask_zero = mask_zero
        self.encoding = encoding
        self.max_length = max_length
        self.shares_token_embedding = token_embedding is not None
        if token_embedding is None:
            token_embedding = keras.layers.Embedding(
                vocab_size,
                output_dim,
                mask_zero=mask_zero,
                dtype=self.dtype_policy,
                name="token_embedding",
            )
        elif (token_embedding.input_dim, token_embedding.output_dim) != (vocab_size, output_dim):
            raise ValueError(
                "`token_embedding` must have `vocab_size` rows of `output_dim` values "
                f"({vocab_size}, {output_dim}). Received: token_embedding of shape "
                f"({token_embedding.input_dim}, {token_embedding.output_dim})"
            )
        self.token_embedding = token_embedding

    def build(self, input_shape):
        if not self.token_embedding.built:  # a shared one may be
            self.token_embedding.build(input_shape)
        if self.encoding == "learned":
            self.position_table = self.add_weight(
                name="position_table", shape=(self.max_length, self.output_dim),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
            )

    def call(self, inputs, positions=None):
        embedded = self.token_embedding(inputs)
        if positions is None:
            positions = ops.arange(ops.shape(inputs)[-1])
        if self.encoding == "learned":
            rows = ops.minimum(positions, self.max_length - 1)
            encoding = ops.take(ops.cast(self.position_table, embedded.dtype), rows, axis=0)
        else:
            encoding = ops.cast(sinusoidal_encoding(positions, self.output_dim), embedded.dtype)
        scale = ops.cast(math.sqrt(self.output_dim), embedded.dtype)
        return embedded * scale + encoding

    def compute_mask(self, inputs, mask=None):
        return self.token_embedding.compute_mask(inputs, mask)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "output_dim": self.output_dim,
            "mask_zero": self.mask_zero,
            "encoding": self.encoding,
            "max_length": self.max_length,
            "token_embedding": (
                keras.saving.serialize_keras_object(self.token_embedding)
                if self.shares_token_embedding else None
            ),
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("token_embedding") is not None:
            config["token_embedding"] = keras.saving.deserialize_keras_object(
                config["token_embedding"]
            )
        return cls(**config)
