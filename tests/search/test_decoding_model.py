"""Greedy and beam search on the real `Seq2Seq`: consistency with teacher forcing, and
independence of a sentence from the rest of its batch."""

import numpy as np
import pytest
import tensorflow as tf

from attncli.search import decoding
from attncli.data.vocabulary import PAD, START
from small_models import CONFIGS, SOURCES, make_model, padded, searching


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    return make_model(request.param)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_search_agrees_with_teacher_forcing(model, beam_size):
    sources = padded(SOURCES)
    result = decoding.compile_search(model, searching(beam_size))(sources)
    n = result.token_ids.shape[1]
    for i in range(n):
        tokens = result.token_ids[:, i, :]
        target_in = tf.concat([tf.fill([len(SOURCES), 1], START), tokens[:, :-1]], axis=1)
        logits, weights = model((sources, target_in), return_attention_scores=True)
        log_probs = decoding.next_token_log_probs(logits).numpy()
        for b in range(len(SOURCES)):
            length = int(result.lengths[b, i])
            emitted = tokens[b, :length].numpy()
            expected = log_probs[b, np.arange(length), emitted].sum()
            np.testing.assert_allclose(result.log_probs[b, i], expected, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(
                result.weights[b, i, :length], weights[b, :length], rtol=1e-4, atol=1e-5
            )
            if beam_size == 1:
                np.testing.assert_array_equal(
                    emitted, np.argmax(log_probs[b, :length], axis=-1)
                )


def test_beam_of_one_equals_greedy_on_the_model(model):
    sources = padded(SOURCES)
    greedy = decoding.compile_search(model, searching(1))(sources)
    beam = decoding.beam_search(model, sources, searching(1))
    np.testing.assert_array_equal(greedy.token_ids, beam.token_ids)
    np.testing.assert_allclose(greedy.scores, beam.scores, rtol=1e-5)
    np.testing.assert_allclose(greedy.weights, beam.weights, atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_alone_and_in_a_batch_gives_the_same_result(model, beam_size):
    search = decoding.compile_search(model, searching(beam_size))
    batch = search(padded(SOURCES))
    for b, source in enumerate(SOURCES):
        alone = search(tf.constant([source]))
        steps = alone.token_ids.shape[2]
        np.testing.assert_array_equal(batch.token_ids[b, :, :steps], alone.token_ids[0])
        assert np.all(batch.token_ids[b, :, steps:].numpy() == PAD)
        np.testing.assert_array_equal(batch.lengths[b], alone.lengths[0])
        np.testing.assert_allclose(batch.scores[b], alone.scores[0], rtol=1e-5)
        real = len(source)
        np.testing.assert_allclose(
            batch.weights[b, :, :steps, :real], alone.weights[0], rtol=1e-5, atol=1e-6
        )
        assert np.all(batch.weights[b, :, :, real:].numpy() == 0)
