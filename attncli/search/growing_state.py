"""Decoder states that grow with every step, inside a search's single `tf.while_loop`.

A self-attention decoder attends to the keys and values of every step so far, so its
state (its cache) grows by one position per step. A `tf.while_loop` keeps the shapes of
its loop variables, so the search gives such a model, before the loop, a buffer of the
largest number of steps it may take (`make_room`); the decoder writes step `t` into
position `t` and masks the positions after it. A model whose state does not grow (the
RNN decoders) has no `make_room`, and its state is used as it is.

`PrefixRecomputingModel` is the same search without a cache: each step runs the
decoder over the whole prefix again. It is the baseline the cache is measured against
(`benchmarks/bench_self_attention.py`) and a second route to the same translations.
"""

import tensorflow as tf

from attncli.data.vocabulary import PAD


def make_room(model, state, steps):
    """`model.make_room(state, steps)` if the model has it, else `state` unchanged.

    Args:
        model: an encoder-decoder (see `attncli.search.decoding`).
        state: the state from `model.encode`.
        steps: int32 scalar, the most `decode_step` calls the search will make.
    """
    grow = getattr(model, "make_room", None)
    return state if grow is None else grow(state, steps)


class PrefixRecomputingModel:
    """A self-attention `Seq2Seq` decoded without its cache: every step recomputes the prefix.

    Its state is `(prefix, step)`: the tokens fed so far in a buffer of `steps`
    positions `(batch_size, steps)` and the next position `(batch_size,)`. Each
    `decode_step` writes the new token at `step`, runs the decoder teacher-forced
    over positions `0 .. max(step)` (a causal mask keeps each position from seeing
    the ones after it) and returns position `step` of every row: the cached
    decoder's result, at the cost of the whole prefix per step.

    Args:
        model: a `Seq2Seq` whose `config.decoder` is `"self-attention"`.
    """

    def __init__(self, model):
        if not getattr(model, "self_attention_decoder", False):
            raise ValueError("PrefixRecomputingModel needs a self-attention decoder")
        self.model = model

    def encode(self, source_ids, training=False):
        memory, _ = self.model.encode(source_ids, training=training)
        batch_size = tf.shape(source_ids)[0]
        return memory, (tf.zeros([batch_size, 0], tf.int32), tf.zeros([batch_size], tf.int32))

    def make_room(self, state, steps):
        batch_size = tf.shape(state[1])[0]
        return tf.fill([batch_size, steps], PAD), tf.zeros([batch_size], tf.int32)

    def decode_step(self, token_ids, state, memory, training=False):
        prefix, step = state
        positions = tf.range(tf.shape(prefix)[1])[None, :]
        prefix = tf.where(positions == step[:, None], token_ids[:, None], prefix)
        length = tf.reduce_max(step) + 1
        # Rows that have not reached `length` hold padding after their step; the
        # causal mask keeps it out of their own position.
        features, weights = self.model.decoder(
            prefix[:, :length], None, memory, training=training
        )
        features = tf.gather(features, step, axis=1, batch_dims=1)
        weights = tf.gather(weights, step, axis=1, batch_dims=1)
        return self.model.decoder.output_layer(features), (prefix, step + 1), weights
