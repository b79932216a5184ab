"""A forced prefix in greedy and beam search: the forced tokens, and the continuation's
scores against teacher forcing (a NumPy recomputation for the test double, the model's
own full-sequence call for real models)."""

import numpy as np
import pytest
import tensorflow as tf
from history_decoder import SOURCES, WORDS, HistoryDecoder, brute_force

from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.data.vocabulary import END, PAD, START
from attncli.model.encoder_decoder import Seq2Seq
from attncli.search import decoding

# One prefix per sentence of SOURCES, of different lengths; [] forces nothing.
PREFIXES = [[4, 5], [], [5], [1, 4, 4], [5, 5]]


def padded(rows, width=None):
    width = max(map(len, rows)) if width is None else width
    return tf.constant([row + [PAD] * (width - len(row)) for row in rows], tf.int32)


def hypothesis(result, b, i):
    length = int(result.lengths[b, i])
    return tuple(int(t) for t in result.token_ids[b, i, :length])


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_prefix_is_forced_and_scored_as_teacher_forcing_scores_it(beam_size):
    double = HistoryDecoder(seed=3)
    alpha = 0.6
    search = SearchConfig(beam_size=beam_size, n_best=None, alpha=alpha, max_length_ratio=1.0,
                          max_length_offset=4)
    result = decoding.compile_search(double, search, prefixes=True)(
        tf.constant(SOURCES), padded(PREFIXES)
    )
    for b, (source, prefix) in enumerate(zip(SOURCES, PREFIXES)):
        for i in range(beam_size):
            tokens = hypothesis(result, b, i)
            if not np.isfinite(result.scores[b, i]):
                continue  # an empty slot: fewer hypotheses than the beam
            assert tokens[: len(prefix)] == tuple(prefix)
            assert END not in tokens[:-1]
            log_probs, weights = double.numpy_steps(source, tokens)
            np.testing.assert_allclose(result.log_probs[b, i], log_probs.sum(), rtol=1e-5)
            np.testing.assert_allclose(
                result.scores[b, i],
                log_probs.sum() / ((5.0 + len(tokens)) / 6.0) ** alpha, rtol=1e-5,
            )
            np.testing.assert_array_equal(result.weights[b, i, : len(tokens)].numpy(), weights)
        assert np.isfinite(result.scores[b, 0])


def test_greedy_continues_a_prefix_with_the_most_probable_tokens():
    double = HistoryDecoder(seed=5)
    result = decoding.greedy_search(
        double, tf.constant(SOURCES), SearchConfig(max_length_ratio=0.0, max_length_offset=6),
        prefix_ids=padded(PREFIXES),
    )
    for b, (source, prefix) in enumerate(zip(SOURCES, PREFIXES)):
        tokens = list(prefix)
        while len(tokens) < 6 and (not tokens or tokens[-1] != END):
            candidates = [double.numpy_log_prob(source, tokens + [t]) for t in (1, 3, 4, 5)]
            tokens.append((1, 3, 4, 5)[int(np.argmax(candidates))])
        assert hypothesis(result, b, 0) == tuple(tokens)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_an_exhaustive_beam_finds_the_brute_force_n_best_of_those_with_the_prefix(alpha):
    double = HistoryDecoder(seed=1)
    max_length = 4
    search = SearchConfig(beam_size=128, n_best=None, alpha=alpha, max_length_ratio=0.0,
                          max_length_offset=max_length)
    result = decoding.beam_search(double, tf.constant(SOURCES), search,
                                  prefix_ids=padded(PREFIXES))
    for b, (source, prefix) in enumerate(zip(SOURCES, PREFIXES)):
        expected = [(score, tokens) for score, tokens in
                    brute_force(double, source, max_length, alpha)
                    if tokens[: len(prefix)] == tuple(prefix)]
        count = len(expected)
        # Words then end-of-sentence, or max_length words, beginning with the prefix.
        words = len(WORDS)
        assert count == sum(words ** (length - 1 - len(prefix))
                            for length in range(len(prefix) + 1, max_length + 1)
                            ) + words ** (max_length - len(prefix))
        found = [hypothesis(result, b, i) for i in range(count)]
        np.testing.assert_allclose(result.scores[b, :count].numpy(),
                                   [score for score, _ in expected], rtol=1e-5)
        assert found[0] == expected[0][1]
        assert set(found) == {tokens for _, tokens in expected}
        assert np.all(np.isneginf(result.scores[b, count:].numpy()))


def test_beam_of_one_equals_greedy_with_a_prefix():
    double = HistoryDecoder(seed=4)
    settings = SearchConfig(beam_size=1, alpha=0.6, max_length_ratio=2.0, max_length_offset=3)
    greedy = decoding.greedy_search(double, tf.constant(SOURCES), settings,
                                    prefix_ids=padded(PREFIXES))
    beam = decoding.beam_search(double, tf.constant(SOURCES), settings,
                                prefix_ids=padded(PREFIXES))
    for field in ("token_ids", "lengths", "weights"):
        np.testing.assert_array_equal(getattr(greedy, field), getattr(beam, field))
    np.testing.assert_allclose(greedy.scores, beam.scores, rtol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_sentence_and_its_prefix_give_the_same_result_alone_and_in_a_batch(beam_size):
    double = HistoryDecoder(seed=6)
    search = decoding.compile_search(double, SearchConfig(
        beam_size=beam_size, n_best=None, max_length_ratio=1.0, max_length_offset=3
    ), prefixes=True)
    batch = search(tf.constant(SOURCES), padded(PREFIXES, width=5))
    for b, (source, prefix) in enumerate(zip(SOURCES, PREFIXES)):
        length = int(np.sum(np.array(source) != 0))
        alone = search(tf.constant([source[:length]]), padded([prefix]))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        assert np.all(batch.token_ids[b, :, steps:].numpy() == PAD)
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-6)
    assert search.experimental_get_tracing_count() == 1


def test_no_prefix_is_the_search_without_prefixes():
    double = HistoryDecoder(seed=8)
    settings = SearchConfig(beam_size=3, n_best=None, max_length_ratio=1.0, max_length_offset=3)
    plain = decoding.compile_search(double, settings)(tf.constant(SOURCES))
    empty = decoding.compile_search(double, settings, prefixes=True)(
        tf.constant(SOURCES), tf.zeros([len(SOURCES), 0], tf.int32)
    )
    for field in ("token_ids", "lengths", "scores", "weights"):
        np.testing.assert_array_equal(getattr(plain, field), getattr(empty, field))


MODELS = {
    "luong": dict(decoder="luong", score="general"),
    "transformer": dict(encoder="self-attention", decoder="self-attention", encoder_layers=1,
                        decoder_layers=2, heads=2, score="scaled_dot"),
}
MODEL_SOURCES = [[5, 6, 7, 8, 9], [12, 13], [14, 15, 16]]
MODEL_PREFIXES = [[7, 8, 9], [], [11]]


@pytest.mark.parametrize("name, beam_size", [("luong", 1), ("transformer", 3)])
def test_prefix_and_continuation_agree_with_teacher_forcing_on_the_model(name, beam_size):
    tf.keras.utils.set_random_seed(sum(map(ord, name)))
    model = Seq2Seq(ModelConfig(source_vocab_size=30, target_vocab_size=25, embedding_dim=12,
                                units=16, **MODELS[name]))
    sources = padded(MODEL_SOURCES)
    result = decoding.compile_search(model, SearchConfig(
        beam_size=beam_size, n_best=None, max_length_ratio=1.0, max_length_offset=4,
    ), prefixes=True)(sources, padded(MODEL_PREFIXES))
    for i in range(beam_size):
        tokens = result.token_ids[:, i, :]
        target_in = tf.concat([tf.fill([len(MODEL_SOURCES), 1], START), tokens[:, :-1]], axis=1)
        logits = model((sources, target_in))
        log_probs = decoding.next_token_log_probs(logits).numpy()
        for b, prefix in enumerate(MODEL_PREFIXES):
            if not np.isfinite(result.scores[b, i]):
                continue
            length = int(result.lengths[b, i])
            emitted = tokens[b, :length].numpy()
            np.testing.assert_array_equal(emitted[: len(prefix)], prefix)
            expected = log_probs[b, np.arange(length), emitted].sum()
            np.testing.assert_allclose(result.log_probs[b, i], expected, rtol=1e-4, atol=1e-4)
            if beam_size == 1:
                # After the prefix, each token is the most probable one.
                np.testing.assert_array_equal(
                    emitted[len(prefix):],
                    np.argmax(log_probs[b, len(prefix):length], axis=-1),
                )

