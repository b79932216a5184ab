"""The per-epoch batches a resumed training run relies on."""

import numpy as np
import pytest

from attncli.data.corpora import read_bundled
from attncli.data.pipeline import PipelineStats, encode_pairs, epoch_batches, make_dataset
from attncli.data.tokenization import Tokenizer


@pytest.fixture(scope="module")
def encoded():
    corpus = read_bundled(limit=3000).select(range(0, 3000, 3))
    source, target = Tokenizer("word", lowercase=True), Tokenizer("word", lowercase=True)
    source = source.with_vocabulary(source.build_vocabulary(corpus.sources, 800))
    target = target.with_vocabulary(target.build_vocabulary(corpus.targets, 800))
    return encode_pairs(corpus, source, target, max_length=12)


def batches(encoded, epoch, seed=0):
    return [
        tuple(np.asarray(t) for t in (inputs[0], inputs[1], target_out))
        for inputs, target_out in epoch_batches(encoded, epoch, batch_size=32, seed=seed)
    ]


def same(a, b):
    return len(a) == len(b) and all(
        all(np.array_equal(x, y) for x, y in zip(p, q)) for p, q in zip(a, b)
    )


def test_an_epoch_is_a_function_of_seed_and_epoch(encoded):
    first = batches(encoded, 3)
    assert same(first, batches(encoded, 3))
    assert not same(first, batches(encoded, 4))
    assert not same(first, batches(encoded, 3, seed=1))


def test_every_pair_appears_once_per_epoch(encoded):
    rows = [tuple(row[row > 0]) for batch in batches(encoded, 0) for row in batch[2]]
    expected = [tuple(row) for row in encoded.target_out.to_list()]
    assert sorted(rows) == sorted(expected)


def test_skipping_resumes_the_same_epoch(encoded):
    full = batches(encoded, 2)
    rest = [
        tuple(np.asarray(t) for t in (inputs[0], inputs[1], target_out))
        for inputs, target_out in epoch_batches(encoded, 2, batch_size=32).skip(5)
    ]
    assert same(full[5:], rest)


def test_stats_count_padding(encoded):
    stats = PipelineStats()
    for _ in epoch_batches(encoded, 0, batch_size=32, stats=stats):
        pass
    assert stats.sentences == encoded.source_ids.nrows()
    assert 0.0 <= stats.padding_fraction < 0.5


def test_the_batches_run_without_tf_data_autotuning(encoded):
    """An autotuned iterator's end waits for the tuner's thread to wake (up to a minute
    at every epoch's end): the training batches are made without it
    (`attncli.data.pipeline.without_autotune`)."""
    assert epoch_batches(encoded, 0).options().autotune.enabled is False
    corpus = read_bundled(limit=200)
    words = Tokenizer("word", lowercase=True)
    words = words.with_vocabulary(
        words.build_vocabulary(list(corpus.sources) + list(corpus.targets), 500))
    assert make_dataset(corpus, words, words).options().autotune.enabled is False
