"""Greedy and beam search on the real `Seq2Seq`: consistency with teacher forcing, and
independence of a sentence from the rest of its batch."""

import numpy as np
import pytest
import tensorflow as tf

from attncli.search import decoding
from attncli.model.encoder_decoder import Seq2Seq
from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.data.vocabulary import PAD, START

CONFIGS = {
    "luong-input-feeding": dict(decoder="luong", score="dot", input_feeding=True),
    "luong-local-p": dict(decoder="luong", score="general", alignment="local-p", window=2),
    "luong-local-m": dict(decoder="luong", score="concat", alignment="local-m", window=2),
    "bahdanau-lstm": dict(decoder="bahdanau", score="additive", cell="lstm"),
    # Self-attention decoders (their keys and values cached in the search) and the
    # hybrid: a self-attention encoder under an RNN decoder.
    "transformer-pre": dict(
        encoder="self-attention", decoder="self-attention", encoder_layers=2,
        decoder_layers=2, heads=2, score="scaled_dot",
    ),
    "transformer-post-concat": dict(
        encoder="self-attention", decoder="self-attention", decoder_layers=2, heads=3,
        norm="post", score="concat", position_encoding="learned", max_positions=8,
    ),
    "rnn-encoder-self-attention-decoder": dict(decoder="self-attention", score="additive"),
    "hybrid-luong": dict(encoder="self-attention", decoder="luong", score="general"),
}

# Source sentences of different lengths: each is padded differently in the batch.
SOURCES = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17], [18]]


def make_model(name):
    keras_seed = sum(map(ord, name))
    tf.keras.utils.set_random_seed(keras_seed)
    config = ModelConfig(
        source_vocab_size=30, target_vocab_size=25, embedding_dim=12, units=16,
        **CONFIGS[name],
    )
    return Seq2Seq(config)


def padded(sources):
    width = max(map(len, sources))
    return tf.constant([source + [PAD] * (width - len(source)) for source in sources])


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request):
    return make_model(request.param)


def searching(beam_size):
    """The search of these tests: a beam of `beam_size`, every hypothesis of it returned."""
    return SearchConfig(
        beam_size=beam_size, n_best=None, alpha=0.6, max_length_ratio=1.0, max_length_offset=3
    )


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
