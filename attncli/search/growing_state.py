"""Decoder states that change shape from step to step, inside a search's single `tf.while_loop`.

A self-attention decoder attends to the keys and values of every step so far, so its
state (its cache) grows by one position per step; and the search keeps the state of
the hypotheses still translating only, so every state loses rows as hypotheses finish
(`attncli.search.search_steps.decode_rows`). A `tf.while_loop` keeps the shapes of its
loop variables unless told otherwise: `loose_shapes` tells it which dimensions of the
state and memory may change, the first (the rows) and those of size 0 before the first
step (the steps a state grows by), and keeps the others, so that the graph knows them.

`PrefixRecomputingModel` is the same search without a cache: each step runs the
decoder over the whole prefix again. It is the baseline the cache is measured against
(`benchmarks/bench_self_attention.py`) and a second route to the same translations.
"""

import tensorflow as tf


def loose_shapes(tensors):
    """The shape invariants of nested batch-first `tensors` as the search changes them:
    each tensor's static shape with its first dimension, and every dimension of size
    0, unknown."""
    def loose(tensor):
        shape = tensor.shape.as_list()
        return tf.TensorShape([None] + [None if size == 0 else size for size in shape[1:]])

    return tf.nest.map_structure(loose, tensors)


class PrefixRecomputingModel:
    """A self-attention `Seq2Seq` decoded without its cache: every step recomputes the prefix.

    Its state is the tokens fed so far, `(batch_size, t)`. Each `decode_step` appends
    the new token, runs the decoder teacher-forced over the `t + 1` tokens (a causal
    mask keeps each position from seeing the ones after it) and returns the last
    position: the cached decoder's result, at the cost of the whole prefix per step.

    Args:
        model: a `Seq2Seq` whose `config.decoder` is `"self-attention"`.
    """

    def __init__(self, model):
        if not getattr(model, "self_attention_decoder", False):
            raise ValueError("PrefixRecomputingModel needs a self-attention decoder")
        self.model = model

    def encode(self, source_ids, training=False):
        memory, _ = self.model.encode(source_ids, training=training)
        return memory, (tf.zeros([tf.shape(source_ids)[0], 0], tf.int32),)

    def decode_step(self, token_ids, state, memory, training=False):
        (prefix,) = state
        prefix = tf.concat([prefix, tf.cast(token_ids, tf.int32)[:, None]], axis=1)
        features, weights = self.model.decoder(prefix, None, memory, training=training)
        return self.model.decoder.output_layer(features[:, -1]), (prefix,), weights[:, -1]
