"""The tf.data input pipeline: text pairs in, padded int32 batches of ids out.

Stages: encode in chunks (vectorised tensorflow-text ops, in parallel) → drop pairs
longer than `max_length` → keep the ids in memory (`encode_pairs`, once per corpus); then
each epoch: shuffle with a seed → bucket by length → pad → count → prefetch
(`epoch_batches`, or `make_dataset` for both at once). Every dataset here runs with
tf.data's autotuning off (`without_autotune`): an iterator dropped at an epoch's end
otherwise waited up to a minute for the tuner's thread to wake.

Bucketing (`attncli.data.bucketing`) groups pairs whose source and target lengths fall in
the same length bands, so a batch carries little padding on either side.

Each element is `((source_ids, target_in_ids), target_out_ids)`, int32, padded with 0:
`target_in = [START] + target`, `target_out = target + [END]`; the source gets no start id
and an end id only with `source_end=True`. Pairs encoded with piece links (guided
alignment training, `attncli.data.alignments`) give `((source_ids, target_in_ids),
(target_out_ids, gold))` instead, `gold` float32 `(batch, T, S)` the gold attention of
each target position (`gold_distributions`).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from attncli.errors import DataError
from attncli.data.alignments import gold_distributions
from attncli.data.bucketing import make_batcher
from attncli.data.vocabulary import END, START


def without_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning off.

    The tuner's thread sleeps between its rounds (up to a minute), and an iterator's end
    waits for it to wake: each epoch's iterator (a new one an epoch) held the training
    loop idle for 0 to 60 seconds at the epoch's end, and a Multi30k run on one core left
    its core idle a quarter of its training time (docs/performance.md). Without it,
    `AUTOTUNE` buffers still adapt (tf.data's older per-buffer tuning) and parallel maps
    use every core; nothing waits.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


class PipelineStats:
    """What the pipeline delivered since the last `reset()`, read by the training loop.

    Counters live in `tf.Variable`s updated by the pipeline as each batch leaves it; call
    `reset()` before an epoch and read the properties after it.

    Attributes (Python numbers):
        batches, sentences: counts delivered.
        source_tokens, target_tokens: non-pad ids delivered (target: `target_out`, so the
            end id is counted, as in the tokens/s of docs/references.md).
        source_padding_fraction, target_padding_fraction, padding_fraction: share of the
            padded slots (batch x length) that hold padding, per side and over both.
        too_long: pairs dropped for exceeding `max_length`; counted while the first pass
            fills the cache, so not cleared by `reset()`.
    """

    _EPOCH_COUNTERS = (
        "batches", "sentences", "source_tokens", "source_slots", "target_tokens", "target_slots"
    )

    def __init__(self):
        self._counters = {
            name: tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
            for name in self._EPOCH_COUNTERS + ("too_long",)
        }

    def reset(self) -> None:
        for name in self._EPOCH_COUNTERS:
            self._counters[name].assign(0)

    def count_batch(self, source_ids, target_out_ids) -> None:
        """Adds one padded batch to the counters (a TensorFlow op, run inside tf.data)."""
        updates = {
            "batches": 1,
            "sentences": tf.shape(source_ids)[0],
            "source_tokens": tf.math.count_nonzero(source_ids),
            "source_slots": tf.size(source_ids),
            "target_tokens": tf.math.count_nonzero(target_out_ids),
            "target_slots": tf.size(target_out_ids),
        }
        for name, value in updates.items():
            self._counters[name].assign_add(tf.cast(value, tf.int64))

    def count_too_long(self, count) -> None:
        self._counters["too_long"].assign_add(tf.cast(count, tf.int64))

    def _read(self, name: str) -> int:
        return int(self._counters[name].numpy())

    batches = property(lambda self: self._read("batches"))
    sentences = property(lambda self: self._read("sentences"))
    source_tokens = property(lambda self: self._read("source_tokens"))
    source_slots = property(lambda self: self._read("source_slots"))
    target_tokens = property(lambda self: self._read("target_tokens"))
    target_slots = property(lambda self: self._read("target_slots"))
    too_long = property(lambda self: self._read("too_long"))

    @property
    def source_padding_fraction(self) -> float:
        return _padding(self.source_tokens, self.source_slots)

    @property
    def target_padding_fraction(self) -> float:
        return _padding(self.target_tokens, self.target_slots)

    @property
    def padding_fraction(self) -> float:
        return _padding(
            self.source_tokens + self.target_tokens, self.source_slots + self.target_slots
        )

    def as_dict(self) -> dict:
        names = self._EPOCH_COUNTERS + ("too_long",)
        values = {name: getattr(self, name) for name in names}
        values["padding_fraction"] = self.padding_fraction
        values["source_padding_fraction"] = self.source_padding_fraction
        values["target_padding_fraction"] = self.target_padding_fraction
        return values


def _padding(tokens: int, slots: int) -> float:
    return 1.0 - tokens / slots if slots else 0.0


class EncodedPairs(NamedTuple):
    """A corpus encoded once, kept in memory for every epoch.

    Attributes:
        source_ids, target_in, target_out: int32 ragged tensors `(pairs, None)`.
        max_length: the length limit they were filtered by (None: unfiltered); it
            also sets the length bands of bucketing.
        links: int32 ragged `(pairs, None, 2)`, the `(target position, source
            position)` links of each pair (`attncli.data.alignments.piece_links`), or
            None (no guided alignment).
    """

    source_ids: tf.RaggedTensor
    target_in: tf.RaggedTensor
    target_out: tf.RaggedTensor
    max_length: int | None
    links: tf.RaggedTensor | None = None

    @property
    def pairs(self):
        """The ragged tensors of every pair that batches are made of: the ids, and the
        links when there are any."""
        ids = (self.source_ids, self.target_in, self.target_out)
        return ids if self.links is None else ids + (self.links,)


def encode_pairs(
    corpus,
    source_tokenizer,
    target_tokenizer,
    max_length: int | None = 50,
    source_end: bool = False,
    stats: PipelineStats | None = None,
    chunk_size: int = 2048,
    links: tf.RaggedTensor | None = None,
) -> EncodedPairs:
    """Encodes every pair of `corpus` into ids, once.

    Args:
        corpus: a `Corpus` (`sources`, `targets`: lists of strings).
        source_tokenizer, target_tokenizer: `Tokenizer`s with vocabularies.
        max_length: drop pairs whose source ids or `target_out` ids are longer. `None`
            keeps every pair (evaluation). Defaults to 50.
        source_end: append the end id to each source. Defaults to `False`.
        stats: a `PipelineStats` that counts the pairs dropped as too long.
        chunk_size: sentences encoded per tensorflow-text call. Defaults to 2048.
        links: int32 ragged `(pairs, None, 2)`, the piece links of each pair of
            `corpus` (`attncli.data.alignments.piece_links`), kept for the pairs kept.
            Defaults to None.

    Returns:
        `EncodedPairs`: target_in = [start] + target, target_out = target + [end].
    """
    if len(corpus) == 0:
        raise DataError("the corpus has no pairs")

    # The functions given to tf.data have no tensor-dependent Python control flow, so
    # AutoGraph is skipped: converting the tokenizers' code took seconds per dataset.
    @tf.autograph.experimental.do_not_convert
    def encode(sources, targets, indices):
        source_ids = source_tokenizer.encode(sources)
        if source_end:
            source_ids = _append(source_ids, END)
        target_ids = target_tokenizer.encode(targets)
        return source_ids, _prepend(target_ids, START), _append(target_ids, END), indices

    @tf.autograph.experimental.do_not_convert
    def drop_too_long(source_ids, target_in, target_out, indices):
        fits = (source_ids.row_lengths() <= max_length) & (
            target_out.row_lengths() <= max_length
        )
        if stats is not None:
            stats.count_too_long(tf.reduce_sum(tf.cast(~fits, tf.int64)))
        return tuple(
            tf.ragged.boolean_mask(ids, fits) for ids in (source_ids, target_in, target_out)
        ) + (tf.boolean_mask(indices, fits),)

    # Encode in parallel chunks, then gather every pair into one element of three
    # ragged tensors `(pairs, None)` and the pairs' indices in the corpus.
    encoded = tf.data.Dataset.from_tensor_slices((
        tf.constant(corpus.sources, tf.string), tf.constant(corpus.targets, tf.string),
        tf.range(len(corpus), dtype=tf.int64),
    ))
    encoded = encoded.batch(chunk_size).map(
        encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    if max_length is not None:
        encoded = encoded.map(drop_too_long)
    gathered = list(without_autotune(encoded.unbatch().ragged_batch(len(corpus))))
    if not gathered:
        raise DataError(
            f"no pair of the corpus has at most max_length={max_length} tokens on both sides"
        )
    *ids, kept = gathered[0]
    return EncodedPairs(*ids, max_length, None if links is None else tf.gather(links, kept))


def epoch_batches(
    encoded: EncodedPairs,
    epoch: int,
    batch_size: int = 64,
    tokens_per_batch: int | None = None,
    bucketing: bool = True,
    band_growth: float = 1.1,
    shuffle: bool = True,
    seed: int = 0,
    stats: PipelineStats | None = None,
) -> tf.data.Dataset:
    """The padded batches of one epoch, the same for the same `(seed, epoch)`.

    The order depends on nothing but the seed and the epoch number, so a resumed run
    finds epoch `k` exactly as it was and can skip the batches it already trained on.

    Args:
        encoded: `encode_pairs`'s result.
        epoch: int, the epoch number (0-based).
        batch_size: sentences per batch (ignored when `tokens_per_batch` is set).
        tokens_per_batch: if set, a batch of a pair of length bands holds
            `tokens_per_batch // longest_band_bound` sentences (at least 1). Needs
            `bucketing`.
        bucketing: batch pairs of similar lengths together. Defaults to `True`.
        band_growth: width of the length bands as a share of their length (see
            `length_bands`): wider bands leave more padding but fill more batches
            completely (each pair of bands ends an epoch with one partial batch). On
            Multi30k, 1.1 gives 2.5% padding and 50 sentences per 64-sentence batch on
            average, 1.2 gives 6% and 57. Defaults to 1.1.
        shuffle: shuffle pairs and batches. Defaults to `True`.
        seed: the run's seed.
        stats: a `PipelineStats` counting tokens and padding.

    Returns:
        A dataset of `((source_ids, target_in_ids), target_out_ids)` int32 batches,
        or with `encoded.links` `((source_ids, target_in_ids), (target_out_ids,
        gold))`, `gold` float32 `(batch, T, S)` (`gold_distributions`).
    """
    batcher = make_batcher(
        encoded.max_length, batch_size, tokens_per_batch, bucketing, band_growth, shuffle
    )
    seeds = tf.constant([seed, epoch], tf.int64)
    batches = batcher(encoded.pairs, seeds)
    dataset = tf.data.Dataset.from_tensor_slices(batches)
    return without_autotune(dataset.map(_padder(stats)).prefetch(tf.data.AUTOTUNE))


def make_dataset(
    corpus,
    source_tokenizer,
    target_tokenizer,
    batch_size: int = 64,
    tokens_per_batch: int | None = None,
    max_length: int | None = 50,
    bucketing: bool = True,
    band_growth: float = 1.1,
    shuffle: bool = True,
    seed: int = 0,
    source_end: bool = False,
    stats: PipelineStats | None = None,
    chunk_size: int = 2048,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of padded id batches for `corpus`, reshuffled each iteration.

    Encodes the corpus once (`encode_pairs`); each iteration over the dataset is one
    epoch with a new random seed drawn from `seed`. A training loop that must resume
    mid-epoch uses `encode_pairs` and `epoch_batches` instead.

    Args:
        corpus, source_tokenizer, target_tokenizer, max_length, source_end, chunk_size:
            as in `encode_pairs`.
        batch_size, tokens_per_batch, bucketing, band_growth, shuffle: as in
            `epoch_batches`.
        seed: seed of the shuffles; epoch k of any run with this seed is the same.
            Defaults to 0.
        stats: a `PipelineStats` to count into (keep a reference to it while the dataset
            is in use). Defaults to `None`: nothing counted.

    Returns:
        A dataset of `((source_ids, target_in_ids), target_out_ids)`: int32 tensors
        `(batch, source_length)`, `(batch, target_length)`, `(batch, target_length)`.
    """
    encoded = encode_pairs(
        corpus, source_tokenizer, target_tokenizer, max_length, source_end, stats, chunk_size
    )
    batcher = make_batcher(
        max_length, batch_size, tokens_per_batch, bucketing, band_growth, shuffle
    )
    epoch_seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    pairs = tf.data.Dataset.from_tensors(encoded.pairs)
    batches = tf.data.Dataset.zip(pairs, epoch_seeds).map(
        lambda pairs, epoch_seed: batcher(pairs, tf.stack([epoch_seed, 0]))
    )
    batches = batches.flat_map(_slices)
    return without_autotune(batches.map(_padder(stats)).prefetch(tf.data.AUTOTUNE))


def _padder(stats):
    @tf.autograph.experimental.do_not_convert
    def pad_count_arrange(source_ids, target_in, target_out, *links):
        source_ids, target_in, target_out = (
            ids.to_tensor() for ids in (source_ids, target_in, target_out)
        )
        if stats is not None:
            stats.count_batch(source_ids, target_out)
        if links:
            shape = tf.shape(target_out)[1], tf.shape(source_ids)[1]
            return (source_ids, target_in), (target_out, gold_distributions(*links, *shape))
        return (source_ids, target_in), target_out

    return pad_count_arrange


@tf.autograph.experimental.do_not_convert
def _slices(*rows):
    return tf.data.Dataset.from_tensor_slices(rows)


def _prepend(ids: tf.RaggedTensor, value: int) -> tf.RaggedTensor:
    column = tf.fill([ids.nrows(), 1], tf.constant(value, ids.dtype))
    return tf.concat([column, ids], axis=1)


def _append(ids: tf.RaggedTensor, value: int) -> tf.RaggedTensor:
    column = tf.fill([ids.nrows(), 1], tf.constant(value, ids.dtype))
    return tf.concat([ids, column], axis=1)
