"""Splitting an epoch of pairs into batches of similar lengths.

Bucketing groups pairs whose source AND target lengths fall in the same length bands, so a
batch carries little padding on either side. It is what `bucket_by_sequence_length` does,
with a key that looks at both sides, but computed for a whole epoch at once with vectorised
ops: `group_by_window`, element by element, delivered several times fewer sentences/s.
Bands are one token wide up to 10 tokens, then about 10% of the length wide. A batch holds
`batch_size` sentences, or, with `tokens_per_batch`, as many sentences as fit in that many
token slots of the band's longest side, so every batch costs about the same to train on.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from attncli.errors import DataError


def length_bands(max_length: int, growth: float = 1.1) -> list[int]:
    """Inclusive upper bounds of the length bands: 1, 2, ..., 10, 11, 13, 15, ..., max_length.

    A band's width is at most `growth - 1` of its upper bound (one token for short ones).
    """
    if max_length < 1:
        raise DataError(f"max_length must be at least 1. Received: max_length={max_length}")
    if growth <= 1:
        raise DataError(f"band growth must be above 1. Received: growth={growth}")
    bands, upper = [], 1
    while upper < max_length:
        bands.append(upper)
        upper = max(upper + 1, math.ceil(upper * growth))
    bands.append(max_length)
    return bands


def make_batcher(max_length, batch_size, tokens_per_batch, bucketing, band_growth, shuffle):
    """The `Batcher` of these settings (see `epoch_batches`), checked."""
    if tokens_per_batch is not None and not bucketing:
        raise DataError("tokens_per_batch needs bucketing")
    if batch_size < 1 or (tokens_per_batch is not None and tokens_per_batch < 1):
        raise DataError(
            f"batch sizes must be positive. Received: batch_size={batch_size}, "
            f"tokens_per_batch={tokens_per_batch}"
        )
    bands = length_bands(max_length or LONGEST_BAND, band_growth)
    return Batcher(bands, batch_size, tokens_per_batch, bucketing, shuffle)


#: Length bands cover this many tokens when `max_length` is None; longer pairs share the
#: last band.
LONGEST_BAND = 1024


class Batcher:
    """Splits one epoch of ragged pairs into ragged batches `(batches, None, None)`.

    Vectorised over the whole epoch: permute the pairs (seeded), sort them stably by
    their (source band, target band) key, number the batches within each key, then
    permute the batches (seeded).
    """

    def __init__(self, bands, batch_size, tokens_per_batch, bucketing, shuffle):
        uppers = np.array(bands, dtype=np.int32)
        if tokens_per_batch is None:
            sizes = np.full(len(bands) ** 2, batch_size, dtype=np.int64)
        else:
            longest_side = np.maximum(uppers[:, None], uppers[None, :]).reshape(-1)
            sizes = np.maximum(1, tokens_per_batch // longest_side).astype(np.int64)
        self.uppers, self.sizes = uppers, sizes
        self.batch_size, self.bucketing, self.shuffle = batch_size, bucketing, shuffle

    def band(self, lengths):
        bands = tf.searchsorted(tf.constant(self.uppers), tf.cast(lengths, tf.int32))
        return tf.minimum(tf.cast(bands, tf.int64), len(self.uppers) - 1)

    @tf.autograph.experimental.do_not_convert
    def __call__(self, pairs, seeds):
        """`pairs`: the ragged tensors of every pair (`EncodedPairs.pairs`: source ids,
        target in, target out, and maybe links); `seeds`: int64 `(2,)`, the stateless
        seed."""
        source_ids, _, target_out = pairs[:3]
        n = source_ids.nrows()
        order = tf.range(n)
        if self.shuffle:
            order = tf.random.experimental.stateless_shuffle(order, seed=seeds)
        if self.bucketing:
            keys = self.band(tf.gather(source_ids.row_lengths(), order)) * len(
                self.uppers
            ) + self.band(tf.gather(target_out.row_lengths(), order))
            by_key = tf.argsort(keys, stable=True)
            order, keys = tf.gather(order, by_key), tf.gather(keys, by_key)
            # rank of each pair within its key → its batch within the key
            rank = tf.range(n) - tf.searchsorted(keys, keys, side="left", out_type=tf.int64)
            batch_in_key = rank // tf.gather(tf.constant(self.sizes), keys)
            _, batch_ids = tf.unique(keys * tf.cast(n, tf.int64) + batch_in_key)
            batch_ids = tf.cast(batch_ids, tf.int64)
        else:
            batch_ids = tf.range(n) // self.batch_size
        if self.shuffle:
            count = tf.reduce_max(batch_ids) + 1
            new_place = tf.argsort(
                tf.random.experimental.stateless_shuffle(tf.range(count), seed=seeds + 1)
            )
            batch_ids = tf.gather(tf.cast(new_place, tf.int64), batch_ids)
            by_batch = tf.argsort(batch_ids, stable=True)
            order, batch_ids = tf.gather(order, by_batch), tf.gather(batch_ids, by_batch)
        return tuple(
            tf.RaggedTensor.from_value_rowids(tf.gather(ids, order), batch_ids)
            for ids in pairs
        )
