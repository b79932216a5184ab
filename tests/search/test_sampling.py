"""Sampling in place of the search: the distribution drawn from (chi-square against NumPy's
tempered, truncated and renormalised softmax), reproducibility, independence of the
batch, and scores against teacher forcing."""

import math

import numpy as np
import pytest
import tensorflow as tf
from history_decoder import EMITTED, SOURCES, HistoryDecoder

from attncli.config.search import Sampling, SearchConfig
from attncli.data.vocabulary import END, PAD, START
from attncli.search import decoding

ONE_STEP = SearchConfig(max_length_ratio=0.0, max_length_offset=1)


class FixedLogits:
    """A decoder whose every step gives the logits `table[first source id]`."""

    def __init__(self, table):
        self.table = tf.constant(table, tf.float32)

    def encode(self, source_ids, training=False):
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        return {"row": source_ids[:, 0], "width": tf.zeros_like(source_ids)}, (
            tf.zeros_like(source_ids[:, 0]),)

    def decode_step(self, token_ids, state, memory, training=False):
        logits = tf.gather(self.table, memory["row"])
        return logits, state, tf.one_hot(tf.zeros_like(token_ids), tf.shape(memory["width"])[1])


def numpy_sampling_distribution(logits, method, temperature, top_k=None, top_p=None):
    """q(y) ∝ exp(logit / T) over the kept tokens (written from Holtzman et al. 2019 and
    fairseq's definitions): top-k keeps the k largest, top-p the fewest largest whose
    mass reaches p; padding and start-of-sentence are never drawn."""
    logits = np.asarray(logits, np.float64).copy()
    logits[[PAD, START]] = -np.inf
    scaled = logits / temperature
    p = np.exp(scaled - scaled.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    keep = np.zeros_like(p, bool)
    if method == "random":
        keep[:] = p > 0
    elif method == "topk":
        keep[order[:top_k]] = True
    else:
        mass = np.cumsum(p[order])
        count = int(np.searchsorted(mass, top_p - 1e-12)) + 1
        keep[order[:count]] = True
    q = np.where(keep, p, 0.0)
    return q / q.sum()


def chi_square_critical(df, z=3.09):
    """The 0.999 quantile of chi-square with `df` degrees of freedom (Wilson and
    Hilferty 1931's approximation; z = 3.09 is the normal's 0.999 quantile)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


LOGITS = np.array([
    [0.0, 0.3, 0.0, -0.5, 1.2, 0.9, 0.1, -1.0, 0.6, 0.4],
    [0.0, -2.0, 0.0, 0.5, 2.5, 0.2, 0.2, 1.0, -0.3, 0.0],
])


@pytest.mark.parametrize("method, options, temperature", [
    ("random", {}, 1.0),
    ("random", {}, 0.5),
    ("topk", {"top_k": 4}, 1.0),
    ("topk", {"top_k": 3}, 2.0),
    ("topp", {"top_p": 0.7}, 1.0),
    ("topp", {"top_p": 0.5}, 1.5),
])
def test_the_first_token_follows_numpys_distribution(method, options, temperature):
    double = FixedLogits(LOGITS)
    sampling = Sampling(method, temperature=temperature, samples=100, **options)
    # 40 distinct sentences per logits row (their other ids differ), 100 samples each.
    sources = [[row, 4 + sentence] for row in (0, 1) for sentence in range(40)]
    search = decoding.compile_search(double, ONE_STEP, sampling=sampling)
    result = search(tf.constant(sources), tf.fill([len(sources)], tf.constant(7, tf.int64)))
    first = result.token_ids[:, :, 0].numpy()
    for row in (0, 1):
        drawn = first[[i for i, source in enumerate(sources) if source[0] == row]].ravel()
        expected = numpy_sampling_distribution(LOGITS[row], method, temperature, **options)
        counts = np.bincount(drawn, minlength=len(expected))
        assert np.all(counts[expected == 0] == 0), (counts, expected)
        kept = expected > 0
        frequencies = expected[kept] * drawn.size
        statistic = float(np.sum((counts[kept] - frequencies) ** 2 / frequencies))
        if kept.sum() > 1:
            assert statistic < chi_square_critical(kept.sum() - 1), (counts, frequencies)


def test_scores_are_the_models_log_probs_whatever_the_temperature():
    double = HistoryDecoder(seed=2)
    search = SearchConfig(alpha=0.6, max_length_ratio=1.0, max_length_offset=3)
    sampling = Sampling("topk", top_k=3, temperature=0.7, samples=4)
    result = decoding.sample_search(double, tf.constant(SOURCES), search, sampling,
                                    tf.fill([len(SOURCES)], tf.constant(11, tf.int64)))
    for b, source in enumerate(SOURCES):
        scores = result.scores[b].numpy()
        assert np.all(np.diff(scores) <= 0), scores  # best first
        for i in range(4):
            length = int(result.lengths[b, i])
            tokens = result.token_ids[b, i, :length].numpy()
            assert set(tokens) <= set(EMITTED)
            assert END not in tokens[:-1]
            log_probs, weights = double.numpy_steps(source, tokens)
            np.testing.assert_allclose(result.log_probs[b, i], log_probs.sum(), rtol=1e-5)
            np.testing.assert_allclose(
                scores[i], log_probs.sum() / ((5.0 + length) / 6.0) ** 0.6, rtol=1e-5
            )
            np.testing.assert_array_equal(result.weights[b, i, :length].numpy(), weights)
            assert np.all(result.token_ids[b, i, length:].numpy() == PAD)


def test_the_same_seed_draws_the_same_samples_alone_and_in_any_batch():
    double = HistoryDecoder(seed=3)
    search = SearchConfig(max_length_ratio=1.0, max_length_offset=4)
    sampling = Sampling("random", samples=3)
    sample = decoding.compile_search(double, search, sampling=sampling)

    def seeds(count, seed):
        return tf.fill([count], tf.constant(seed, tf.int64))

    batch = sample(tf.constant(SOURCES), seeds(len(SOURCES), 5))
    reversed_batch = sample(tf.constant(SOURCES[::-1]), seeds(len(SOURCES), 5))
    again = sample(tf.constant(SOURCES), seeds(len(SOURCES), 5))
    other_seed = sample(tf.constant(SOURCES), seeds(len(SOURCES), 6))
    np.testing.assert_array_equal(batch.token_ids, again.token_ids)
    assert not np.array_equal(batch.token_ids, other_seed.token_ids)
    for b, source in enumerate(SOURCES):
        length = int(np.sum(np.array(source) != 0))
        alone = sample(tf.constant([source[:length]]), seeds(1, 5))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        np.testing.assert_array_equal(
            reversed_batch.token_ids[len(SOURCES) - 1 - b, :, :steps], alone.token_ids[0]
        )
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-6)
    # The samples of one sentence are drawn apart: not all equal.
    assert any(len({tuple(row) for row in batch.token_ids[b].numpy()}) > 1
               for b in range(len(SOURCES)))
    assert sample.experimental_get_tracing_count() == 1


def test_topk_1_is_greedy_search():
    double = HistoryDecoder(seed=4)
    search = SearchConfig(alpha=0.6, max_length_ratio=2.0, max_length_offset=3)
    greedy = decoding.greedy_search(double, tf.constant(SOURCES), search)
    sampled = decoding.sample_search(double, tf.constant(SOURCES), search,
                                     Sampling("topk", top_k=1, temperature=3.0),
                                     tf.zeros([len(SOURCES)], tf.int64))
    np.testing.assert_array_equal(greedy.token_ids, sampled.token_ids)
    np.testing.assert_allclose(greedy.scores, sampled.scores, rtol=1e-6)


def test_a_beam_with_sampling_is_refused():
    with pytest.raises(ValueError, match="without a beam. Received: beam_size=3"):
        decoding.compile_search(HistoryDecoder(), SearchConfig(beam_size=3),
                                sampling=Sampling())


@pytest.mark.parametrize("text, expected", [
    ("random", Sampling()),
    ("topk:10", Sampling("topk", top_k=10)),
    ("topp:0.9", Sampling("topp", top_p=0.9)),
    ("topp:1", Sampling("topp", top_p=1.0)),
])
def test_sampling_is_read_as_written(text, expected):
    assert Sampling.parse(text) == expected
    assert Sampling.parse(str(expected)) == expected


@pytest.mark.parametrize("text", [
    "topk", "topk:", "topk:0", "topk:2.5", "topp:0", "topp:1.5", "topp:nan", "random:3",
    "beam", "top-k:5", "",
])
def test_bad_sampling_is_refused_in_one_line(text):
    with pytest.raises(ValueError) as error:
        Sampling.parse(text)
    assert "\n" not in str(error.value) and ("Received" in str(error.value))


@pytest.mark.parametrize("options, message", [
    ({"temperature": 0.0}, "temperature must be a number in [0.001, 100]"),
    ({"temperature": 1e-300}, "temperature must be a number in [0.001, 100]"),
    ({"temperature": math.inf}, "temperature"),
    ({"samples": 0}, "samples must be in [1, 100]"),
    ({"samples": 101}, "samples must be in [1, 100]"),
    ({"method": "topk"}, "top_k goes with topk sampling only"),
    ({"top_p": 0.5}, "top_p goes with topp sampling only"),
])
def test_bad_settings_are_refused_with_their_value(options, message):
    with pytest.raises(ValueError) as error:
        Sampling(**options)
    assert message in str(error.value)

