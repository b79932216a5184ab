"""Greedy and beam search against a decoder whose every sequence probability is known
(`history_decoder.HistoryDecoder`), the best hypotheses enumerated by brute force."""

import math

import numpy as np
import pytest
import tensorflow as tf

from attncli.config.search import SearchConfig
from attncli.search import decoding
from attncli.data.vocabulary import END, PAD, START
from history_decoder import (
    EMITTED, NUM_TABLES, SOURCES, VOCAB_SIZE, HistoryDecoder, brute_force, numpy_length_penalty,
)

def hypothesis(result, b, i):
    length = int(result.lengths[b, i])
    return tuple(int(t) for t in result.token_ids[b, i, :length])


def test_length_penalty_matches_numpy():
    lengths = np.array([0, 1, 7, 30])
    for alpha in (0.0, 0.6, 1.0):
        np.testing.assert_allclose(
            decoding.length_penalty(lengths, alpha).numpy(),
            numpy_length_penalty(lengths, alpha),
            rtol=1e-6,
        )


def test_max_target_lengths_count_valid_source_tokens():
    source = tf.constant([[5, 6, 7, 0, 0], [5, 0, 0, 0, 0]])
    np.testing.assert_array_equal(
        decoding.max_target_lengths(source, 1.5, 2).numpy(), [math.ceil(4.5) + 2, 2 + 2]
    )


def test_padding_and_start_are_never_emitted():
    logits = tf.constant([[9.0, 0.0, 9.0, 1.0, 2.0]])
    log_probs = decoding.next_token_log_probs(logits).numpy()
    assert np.all(np.isneginf(log_probs[0, [PAD, START]]))
    np.testing.assert_allclose(np.exp(log_probs).sum(), 1.0, rtol=1e-6)


def test_top_next_tokens_match_a_numpy_log_softmax():
    logits = np.random.default_rng(0).normal(size=(3, 9)).astype(np.float32)
    log_probs, ids = decoding.top_next_tokens(tf.constant(logits), 4)
    masked = logits.astype(np.float64)
    masked[:, [PAD, START]] = -np.inf
    shift = masked.max(axis=1, keepdims=True)
    reference = masked - shift - np.log(np.exp(masked - shift).sum(axis=1, keepdims=True))
    expected_ids = np.argsort(-reference, axis=1)[:, :4]
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(
        log_probs, np.take_along_axis(reference, expected_ids, axis=1), rtol=1e-5
    )
    np.testing.assert_allclose(
        decoding.next_token_log_probs(tf.constant(logits)), reference, rtol=1e-5
    )


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_exhaustive_beam_finds_the_brute_force_n_best(alpha):
    double = HistoryDecoder(seed=1)
    max_length = 4
    # 3 + 9 + 27 + 81 + 1 = 121 hypotheses: a beam of 128 prunes nothing.
    search = decoding.compile_search(double, SearchConfig(
        beam_size=128, n_best=None, alpha=alpha, max_length_ratio=0.0,
        max_length_offset=max_length,
    ))
    result = search(tf.constant(SOURCES))
    for b, source in enumerate(SOURCES):
        expected = brute_force(double, source, max_length, alpha)
        assert len(expected) == 121
        found = [hypothesis(result, b, i) for i in range(121)]
        np.testing.assert_allclose(
            result.scores[b, :121].numpy(), [score for score, _ in expected], rtol=1e-5
        )
        # Ties aside, the order is the brute force's order.
        assert found[0] == expected[0][1]
        assert set(found) == {tokens for _, tokens in expected}
        assert np.all(np.isneginf(result.scores[b, 121:].numpy()))


def test_a_small_beam_beats_greedy_and_never_beats_the_optimum():
    double = HistoryDecoder(seed=3)
    sources = tf.constant(SOURCES)
    settings = dict(alpha=0.6, max_length_ratio=0.0, max_length_offset=5)
    greedy = decoding.compile_search(double, SearchConfig(beam_size=1, **settings))(sources)
    beam = decoding.compile_search(double, SearchConfig(beam_size=4, **settings))(sources)
    best = [brute_force(double, source, 5, 0.6)[0][0] for source in SOURCES]
    assert np.all(beam.scores[:, 0].numpy() >= greedy.scores[:, 0].numpy() - 1e-6)
    assert np.all(beam.scores[:, 0].numpy() <= np.array(best) + 1e-5)
    # The double is chosen so that search matters: greedy misses the optimum somewhere.
    assert np.any(greedy.scores[:, 0].numpy() < np.array(best) - 1e-4)


@pytest.mark.parametrize("beam_size", [2, 3, 5])
def test_scores_log_probs_and_weights_are_those_of_the_returned_tokens(beam_size):
    double = HistoryDecoder(seed=3)
    alpha = 0.6
    result = decoding.beam_search(
        double,
        tf.constant(SOURCES),
        SearchConfig(beam_size=beam_size, n_best=None, alpha=alpha, max_length_ratio=1.0,
                     max_length_offset=2),
    )
    steps = result.token_ids.shape[2]
    for b, source in enumerate(SOURCES):
        scores = result.scores[b].numpy()
        assert np.all(np.diff(scores) <= 0), scores
        for i in range(beam_size):
            tokens = hypothesis(result, b, i)
            assert PAD not in tokens and START not in tokens
            assert END not in tokens[:-1]
            max_length = math.ceil(np.sum(np.array(source) != 0)) + 2
            assert tokens[-1] == END or len(tokens) == max_length
            # Nothing after the end: padding tokens and zero weights.
            assert np.all(result.token_ids[b, i, len(tokens):].numpy() == PAD)
            assert np.all(result.weights[b, i, len(tokens):].numpy() == 0)
            log_probs, weights = double.numpy_steps(source, tokens)
            np.testing.assert_allclose(result.log_probs[b, i], log_probs.sum(), rtol=1e-5)
            np.testing.assert_allclose(
                scores[i], log_probs.sum() / numpy_length_penalty(len(tokens), alpha), rtol=1e-5
            )
            np.testing.assert_array_equal(result.weights[b, i, : len(tokens)].numpy(), weights)
        assert steps <= max(math.ceil(np.sum(np.array(s) != 0)) + 2 for s in SOURCES)


def test_beam_of_one_equals_greedy_exactly():
    double = HistoryDecoder(seed=4)
    sources = tf.constant(SOURCES)
    settings = SearchConfig(beam_size=1, alpha=0.6, max_length_ratio=2.0, max_length_offset=3)
    greedy = decoding.greedy_search(double, sources, settings)
    beam = decoding.beam_search(double, sources, settings)
    for field in ("token_ids", "lengths", "weights"):
        np.testing.assert_array_equal(getattr(greedy, field), getattr(beam, field))
    np.testing.assert_allclose(greedy.log_probs, beam.log_probs, rtol=1e-6)
    np.testing.assert_allclose(greedy.scores, beam.scores, rtol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_search_without_weights_finds_the_same_hypotheses(beam_size):
    double = HistoryDecoder(seed=8)
    settings = SearchConfig(
        beam_size=beam_size, n_best=None, max_length_ratio=1.0, max_length_offset=2
    )
    plain = decoding.compile_search(double, settings, attention_weights=False)(
        tf.constant(SOURCES)
    )
    assert plain.weights is None
    for b, source in enumerate(SOURCES):
        for i in range(beam_size):
            tokens = hypothesis(plain, b, i)
            log_probs, _ = double.numpy_steps(source, tokens)
            np.testing.assert_allclose(plain.log_probs[b, i], log_probs.sum(), rtol=1e-5)
    with_weights = decoding.compile_search(double, settings)(tf.constant(SOURCES))
    np.testing.assert_array_equal(plain.token_ids, with_weights.token_ids)
    np.testing.assert_array_equal(plain.scores, with_weights.scores)


def test_greedy_matches_a_numpy_argmax_loop():
    double = HistoryDecoder(seed=5)
    result = decoding.greedy_search(
        double, tf.constant(SOURCES), SearchConfig(max_length_ratio=0.0, max_length_offset=6)
    )
    for b, source in enumerate(SOURCES):
        tokens = []
        while len(tokens) < 6 and (not tokens or tokens[-1] != END):
            candidates = [double.numpy_log_prob(source, tokens + [t]) for t in EMITTED]
            tokens.append(EMITTED[int(np.argmax(candidates))])
        assert hypothesis(result, b, 0) == tuple(tokens)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_sentence_alone_and_in_a_batch_gives_the_same_result(beam_size):
    double = HistoryDecoder(seed=6)
    search = decoding.compile_search(double, SearchConfig(
        beam_size=beam_size, n_best=None, max_length_ratio=1.0, max_length_offset=2
    ))
    batch = search(tf.constant(SOURCES))
    for b, source in enumerate(SOURCES):
        length = int(np.sum(np.array(source) != 0))
        alone = search(tf.constant([source[:length]]))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        assert np.all(batch.token_ids[b, :, steps:].numpy() == PAD)
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-6)
        np.testing.assert_array_equal(
            batch.weights[b, :, :steps, :length], alone.weights[0, :, :, :length]
        )
        assert np.all(batch.weights[b, :, :, length:].numpy() == 0)


def test_search_stops_when_every_hypothesis_has_finished():
    double = HistoryDecoder(seed=7)
    double.transitions_tf = tf.tensor_scatter_nd_update(
        double.transitions_tf,
        [[t, p, END] for t in range(NUM_TABLES) for p in range(VOCAB_SIZE)],
        tf.fill([NUM_TABLES * VOCAB_SIZE], 50.0),
    )
    result = decoding.compile_search(
        double, SearchConfig(beam_size=3, n_best=None, max_length_offset=40)
    )(tf.constant(SOURCES))
    # The best hypotheses are [eos]; the others end one word later.
    assert result.token_ids.shape[2] == 2
    np.testing.assert_array_equal(result.lengths[:, 0], 1)


def test_a_search_returns_the_n_best_of_its_settings_and_greedy_keeps_one():
    double = HistoryDecoder()
    sources = tf.constant(SOURCES)
    # SearchConfig's rule: n_best is 1 unless set, whatever the beam; None is the beam.
    for n_best, returned in (("unset", 1), (None, 4), (2, 2)):
        settings = SearchConfig(beam_size=4, **({} if n_best == "unset" else {"n_best": n_best}))
        assert settings.returned == returned
        result = decoding.compile_search(double, settings)(sources)
        assert result.token_ids.shape[1] == returned
    with pytest.raises(ValueError, match="beam_size=4"):
        decoding.greedy_search(double, sources, SearchConfig(beam_size=4))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_sentence_settles_once_its_n_best_cannot_change(alpha):
    double = HistoryDecoder(seed=8)
    sources = tf.constant(SOURCES)
    settings = dict(beam_size=4, alpha=alpha, max_length_ratio=0.0, max_length_offset=12)
    whole_beam = decoding.beam_search(double, sources, SearchConfig(n_best=None, **settings))
    for n_best in (1, 2):
        early = decoding.beam_search(double, sources, SearchConfig(n_best=n_best, **settings))
        # The n best are those of the search that ran until every hypothesis ended ...
        steps = early.token_ids.shape[2]
        np.testing.assert_array_equal(early.token_ids, whole_beam.token_ids[:, :n_best, :steps])
        np.testing.assert_array_equal(early.scores, whole_beam.scores[:, :n_best])
        assert np.all(whole_beam.token_ids[:, :n_best, steps:].numpy() == PAD)
        # ... found in no more steps (fewer, for the single best, with this double).
        assert steps <= whole_beam.token_ids.shape[2]
        if n_best == 1:
            assert steps < whole_beam.token_ids.shape[2]


class RowCounting(HistoryDecoder):
    """`HistoryDecoder` recording how many rows each `decode_step` is given."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows = []

    def decode_step(self, token_ids, state, memory, training=False):
        self.rows.append(int(tf.shape(token_ids)[0]))
        return super().decode_step(token_ids, state, memory, training=training)


def test_the_decoder_runs_on_the_hypotheses_still_translating_only():
    double = RowCounting(seed=3)
    # Eager: the loop runs in Python, one `decode_step` call per step.
    result = decoding.greedy_search(double, tf.constant(SOURCES), SearchConfig(),
                                    attention_weights=False)
    lengths = result.lengths[:, 0].numpy()
    assert len(set(lengths)) > 1  # sentences finish at different steps
    # Step t decodes the sentences whose translation is longer than t tokens.
    assert double.rows == [int(np.sum(lengths > t)) for t in range(lengths.max())]
