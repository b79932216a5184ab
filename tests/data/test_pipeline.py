from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from shared_data import shared_data

from attncli.data.corpora import read_bundled
from attncli.errors import AttncliError
from attncli.data.bucketing import length_bands
from attncli.data.pipeline import PipelineStats, make_dataset
from attncli.data.readers import Corpus, read_parallel, read_tsv
from attncli.data.tokenization import Tokenizer
from attncli.data.vocabulary import END, START


@pytest.fixture(scope="module")
def spa():
    return read_tsv(shared_data("spa-eng/spa.txt"), source_column=1, target_column=0)


@pytest.fixture(scope="module")
def corpus(spa):
    # Every 40th pair of the whole file, so short and long sentences are both present.
    return spa.select(range(0, len(spa), 40))


@pytest.fixture(scope="module")
def tokenizers(corpus):
    source, target = Tokenizer("word", lowercase=True), Tokenizer("word", lowercase=True)
    return (
        source.with_vocabulary(source.build_vocabulary(corpus.sources, 2000)),
        target.with_vocabulary(target.build_vocabulary(corpus.targets, 2000)),
    )


@pytest.fixture(scope="module")
def bucketed(corpus, tokenizers):
    """Token batches; two epochs delivered, with the stats of the second."""
    stats = PipelineStats()
    dataset = make_dataset(corpus, *tokenizers, tokens_per_batch=400, stats=stats)
    first = epoch(dataset)
    stats.reset()
    return dataset, stats, first, epoch(dataset)


@pytest.fixture(scope="module")
def in_order(corpus, tokenizers):
    """Sentence batches in corpus order, with a source end id; one epoch and its stats."""
    stats = PipelineStats()
    dataset = make_dataset(
        corpus, *tokenizers, batch_size=50, bucketing=False, shuffle=False, max_length=None,
        source_end=True, stats=stats,
    )
    return stats, epoch(dataset)


def encoded(tokenizer, texts):
    return [row for row in tokenizer.encode(tf.constant(texts)).to_list()]


def unpadded_rows(batch):
    return [tuple(int(i) for i in row if i != 0) for row in batch]


def epoch(dataset):
    return [(s.numpy(), ti.numpy(), to.numpy()) for (s, ti), to in dataset]


def test_element_structure_and_shifted_targets(bucketed):
    dataset, _, batches, _ = bucketed
    spec = dataset.element_spec
    assert [t.dtype for t in tf.nest.flatten(spec)] == [tf.int32] * 3
    assert [t.shape.as_list() for t in tf.nest.flatten(spec)] == [[None, None]] * 3
    for source, target_in, target_out in batches:
        assert source.shape[0] == target_in.shape[0] == target_out.shape[0]
        assert target_in.shape == target_out.shape
        assert (target_in[:, 0] == START).all()
        lengths = (target_out != 0).sum(axis=1)
        for row_in, row_out, length in zip(target_in, target_out, lengths):
            assert row_out[length - 1] == END
            assert (row_in[1:length] == row_out[: length - 1]).all()
            assert (row_in[length:] == 0).all() and (row_out[length:] == 0).all()
            assert END not in row_in and START not in row_out
        assert (source != 0).sum(axis=1).min() >= 1


def test_every_pair_once_per_epoch(corpus, tokenizers, bucketed):
    sources = encoded(tokenizers[0], corpus.sources)
    targets = encoded(tokenizers[1], corpus.targets)
    expected = Counter(
        (tuple(s), tuple(t + [END])) for s, t in zip(sources, targets) if len(t) + 1 <= 50
    )
    for batches in bucketed[2:]:
        delivered = Counter()
        for source, _, target_out in batches:
            delivered.update(zip(unpadded_rows(source), unpadded_rows(target_out)))
        assert delivered == expected


def test_batches_stay_within_their_length_bands(bucketed):
    bands = np.array(length_bands(50))
    sizes = []
    for source, _, target_out in bucketed[2]:
        for side in (source, target_out):
            lengths = (side != 0).sum(axis=1)
            band = np.searchsorted(bands, lengths)
            assert (band == band[0]).all()  # one band per side per batch
            assert side.shape[1] == lengths.max()  # padded to the longest, no further
        longest = max(
            bands[np.searchsorted(bands, (side != 0).sum(axis=1))].max()
            for side in (source, target_out)
        )
        assert len(source) <= max(1, 400 // longest)
        sizes.append(len(source))
    assert max(sizes) > 3 * min(sizes)  # short sentences come in bigger batches


def test_length_bands():
    assert length_bands(10) == list(range(1, 11))
    bands = length_bands(50)
    assert bands[:11] == list(range(1, 12)) and bands[11] == 13 and bands[-1] == 50
    widths = np.diff(bands)
    assert (widths >= 1).all() and (widths[10:] <= 0.1 * np.array(bands[11:]) + 1).all()
    assert len(length_bands(50, growth=1.3)) < len(bands)
    with pytest.raises(AttncliError):
        length_bands(0)
    with pytest.raises(AttncliError):
        length_bands(50, growth=1.0)


def test_too_long_pairs_are_dropped_and_counted(corpus, tokenizers):
    sources = encoded(tokenizers[0], corpus.sources)
    targets = encoded(tokenizers[1], corpus.targets)
    too_long = sum(len(s) > 8 or len(t) + 1 > 8 for s, t in zip(sources, targets))
    assert 0 < too_long < len(corpus)
    stats = PipelineStats()
    dataset = make_dataset(corpus, *tokenizers, max_length=8, stats=stats)
    batches = epoch(dataset)
    assert stats.too_long == too_long
    assert stats.sentences == len(corpus) - too_long
    assert max(max(s.shape[1], to.shape[1]) for s, _, to in batches) <= 8


def sources_of(batches):
    return [batch[0].tolist() for batch in batches]


def test_seeded_shuffle(corpus, tokenizers, bucketed):
    epoch_1, epoch_2 = bucketed[2:]
    again = make_dataset(corpus, *tokenizers, tokens_per_batch=400, seed=0)
    other = make_dataset(corpus, *tokenizers, tokens_per_batch=400, seed=1)
    assert sources_of(epoch(again)) == sources_of(epoch_1)
    assert sources_of(epoch(again)) == sources_of(epoch_2)
    assert sources_of(epoch_1) != sources_of(epoch_2)
    assert sources_of(epoch(other)) != sources_of(epoch_1)


def test_unshuffled_unbucketed_keeps_corpus_order(corpus, tokenizers, in_order):
    batches = in_order[1]
    assert [len(b[0]) for b in batches[:-1]] == [50] * (len(batches) - 1)
    sources = [row for b in batches for row in unpadded_rows(b[0])]
    assert sources == [tuple(row + [END]) for row in encoded(tokenizers[0], corpus.sources)]


def test_stats_match_the_batches(bucketed):
    dataset, stats, _, batches = bucketed
    source_tokens = sum(int((b[0] != 0).sum()) for b in batches)
    source_slots = sum(b[0].size for b in batches)
    target_tokens = sum(int((b[2] != 0).sum()) for b in batches)
    target_slots = sum(b[2].size for b in batches)
    assert stats.batches == len(batches)
    assert stats.target_tokens == target_tokens
    assert stats.source_padding_fraction == pytest.approx(1 - source_tokens / source_slots)
    assert stats.padding_fraction == pytest.approx(
        1 - (source_tokens + target_tokens) / (source_slots + target_slots)
    )
    stats.reset()
    assert stats.batches == 0 and stats.padding_fraction == 0.0
    epoch(dataset)
    assert stats.batches == len(batches)
    assert set(stats.as_dict()) >= {"padding_fraction", "target_tokens", "too_long"}


def test_bucketing_removes_most_padding(bucketed, in_order):
    # Tatoeba lists pairs by length, so even batches in file order are partly sorted.
    assert in_order[0].padding_fraction > 0.2
    assert bucketed[1].padding_fraction < 0.05


def test_parallel_and_bundled_corpora():
    multi30k = read_parallel(
        shared_data("multi30k/val.de"), shared_data("multi30k/val.en"), limit=200
    )
    bundled = read_bundled(limit=200)
    for corpus, level in ((multi30k, "word"), (bundled, "char")):
        source, target = Tokenizer(level), Tokenizer(level)
        source = source.with_vocabulary(source.build_vocabulary(corpus.sources, 300))
        target = target.with_vocabulary(target.build_vocabulary(corpus.targets, 300))
        stats = PipelineStats()
        batches = epoch(make_dataset(corpus, source, target, max_length=None, stats=stats))
        assert sum(len(b[0]) for b in batches) == len(corpus) == stats.sentences


def test_settings_errors(tokenizers):
    corpus = Corpus(["hola"], ["hello"])
    with pytest.raises(AttncliError, match="bucketing"):
        make_dataset(corpus, *tokenizers, tokens_per_batch=100, bucketing=False)
    with pytest.raises(AttncliError, match="positive"):
        make_dataset(corpus, *tokenizers, batch_size=0)
    with pytest.raises(AttncliError, match="no pairs"):
        make_dataset(Corpus([], []), *tokenizers)


def test_nothing_fits_is_a_user_error(tokenizers):
    corpus = Corpus(["hola amigo mío", "buenos días"], ["hello my friend", "good morning"])
    with pytest.raises(AttncliError, match="max_length=2"):
        make_dataset(corpus, *tokenizers, max_length=2)
