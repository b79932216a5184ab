"""The self-attention encoder and decoder: blocks against a NumPy reference written from
Vaswani et al. 2017, causality, cached decoding against teacher forcing, the search
without the cache, configuration checks and `.keras` files."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from numpy_transformer import decoder_block, encoder_block
from small_models import searching

from attncli.config.model import ModelConfig
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.transformer_decoder import DecoderBlock
from attncli.model.transformer_encoder import EncoderBlock
from attncli.search import decoding
from attncli.search.growing_state import PrefixRecomputingModel

SOURCE_MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)


def randomised(block, seed=0):
    """Every weight drawn at random, norms' gains and offsets and biases included, so
    that each term of the formulas shows in the output."""
    rng = np.random.default_rng(seed)
    for weight in block.weights:
        weight.assign(rng.normal(scale=0.4, size=weight.shape).astype("float32"))
    return block


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_encoder_block_matches_numpy(norm, activation):
    block = EncoderBlock(12, 3, 20, norm=norm, activation=activation, name="block")
    block.build()
    randomised(block)
    x = np.random.default_rng(1).normal(size=(2, 5, 12)).astype("float32")
    got = block(x, SOURCE_MASK).numpy()
    expected = encoder_block(block, x, SOURCE_MASK, norm, activation)
    # Padded positions are never read (their keys are masked); compare the real ones.
    np.testing.assert_allclose(got[SOURCE_MASK], expected[SOURCE_MASK], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("score", ["scaled_dot", "general"])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_block_matches_numpy(norm, score):
    block = DecoderBlock(8, 2, 16, memory_dim=6, score=score, norm=norm, name="block")
    block.build()
    randomised(block, seed=2)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    cross_keys, cross_values = block.cross_attention.project_key_value(memory)
    got, _, cross_weights = block(x, np.ones((2, 4), bool), cross_keys, cross_values,
                                  SOURCE_MASK)
    expected = decoder_block(block, x, memory, SOURCE_MASK, norm, score)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-4)
    assert np.all(cross_weights.numpy()[1, :, :, 3:] == 0)


# Every model with a self-attention side; small, seeded.
CONFIGS = {
    "transformer-pre": dict(encoder="self-attention", decoder="self-attention",
                            encoder_layers=2, decoder_layers=2, score="scaled_dot"),
    "transformer-post-learned": dict(
        encoder="self-attention", decoder="self-attention", decoder_layers=2, norm="post",
        position_encoding="learned", max_positions=12, score="general",
    ),
    "rnn-encoder-self-attention-decoder": dict(decoder="self-attention", score="additive"),
    "hybrid-luong": dict(encoder="self-attention", decoder="luong", score="general"),
    "hybrid-bahdanau-lstm": dict(encoder="self-attention", decoder="bahdanau", cell="lstm",
                                 score="additive"),
}
SELF_ATTENTION_DECODERS = [name for name, c in CONFIGS.items()
                           if c["decoder"] == "self-attention"]


def make_model(name):
    keras.utils.set_random_seed(sum(map(ord, name)))
    return Seq2Seq(ModelConfig(source_vocab_size=30, target_vocab_size=25, embedding_dim=16,
                               units=16, heads=2, **CONFIGS[name]))


SOURCES = tf.constant([[5, 6, 7, 8, 9], [10, 11, 0, 0, 0]])
TARGETS = tf.constant([[2, 5, 6, 7, 8, 9], [2, 12, 13, 14, 0, 0]])


@pytest.mark.parametrize("name", SELF_ATTENTION_DECODERS)
def test_the_decoder_at_step_t_does_not_see_later_target_tokens(name):
    model = make_model(name)
    before = model((SOURCES, TARGETS)).numpy()
    changed = TARGETS.numpy().copy()
    changed[:, 3:] = [[20, 21, 22], [23, 0, 0]]
    after = model((SOURCES, tf.constant(changed))).numpy()
    np.testing.assert_allclose(after[:, :3], before[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(after[0, 3:], before[0, 3:])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_step_by_step_decoding_equals_the_teacher_forced_call(name):
    model = make_model(name)
    logits, weights = model((SOURCES, TARGETS), return_attention_scores=True)
    memory, state = model.encode(SOURCES)
    for t in range(TARGETS.shape[1]):
        step_logits, state, step_weights = model.decode_step(TARGETS[:, t], state, memory)
        real = TARGETS[:, t].numpy() != 0
        np.testing.assert_allclose(step_logits.numpy()[real], logits.numpy()[real, t],
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(step_weights.numpy()[real], weights.numpy()[real, t],
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_source_padding_changes_nothing(name):
    model = make_model(name)
    wider = tf.pad(SOURCES, [[0, 0], [0, 3]])
    logits, weights = model((SOURCES, TARGETS), return_attention_scores=True)
    wide_logits, wide_weights = model((wider, TARGETS), return_attention_scores=True)
    np.testing.assert_allclose(wide_logits, logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wide_weights[:, :, :5], weights, rtol=1e-5, atol=1e-6)
    assert np.all(wide_weights.numpy()[:, :, 5:] == 0)


def test_the_hybrid_decoder_starts_from_the_mean_of_the_encoder_outputs():
    model = make_model("hybrid-luong")
    outputs, (summary,), mask = model.encoder(SOURCES)
    real = mask.numpy()[:, :, None]
    expected = (outputs.numpy() * real).sum(axis=1) / real.sum(axis=1)
    np.testing.assert_allclose(summary, expected, rtol=1e-5, atol=1e-6)
    _, (state,) = model.encode(SOURCES)
    kernel, bias = (weight.numpy() for weight in model.bridge_layers[0].weights)
    np.testing.assert_allclose(state, np.tanh(expected @ kernel + bias), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_cached_search_equals_the_search_that_recomputes_the_prefix(beam_size):
    model = make_model("transformer-post-learned")
    cached = decoding.compile_search(model, searching(beam_size))(SOURCES)
    recomputed = decoding.compile_search(PrefixRecomputingModel(model), searching(beam_size))(
        SOURCES
    )
    np.testing.assert_array_equal(cached.token_ids, recomputed.token_ids)
    np.testing.assert_allclose(cached.scores, recomputed.scores, rtol=1e-5)
    np.testing.assert_allclose(cached.weights, recomputed.weights, atol=1e-6)


def test_every_block_s_attention_weights_are_returned():
    model = make_model("transformer-pre")
    maps = model.attention_maps(SOURCES, TARGETS)
    assert [tuple(w.shape) for w in maps["encoder"]] == [(2, 2, 5, 5)] * 2
    assert [tuple(w.shape) for w in maps["decoder"]] == [(2, 2, 6, 6)] * 2
    assert [tuple(w.shape) for w in maps["cross"]] == [(2, 2, 6, 5)] * 2
    _, weights = model((SOURCES, TARGETS), return_attention_scores=True)
    np.testing.assert_allclose(np.mean(maps["cross"][-1], axis=1), weights, atol=1e-6)
    assert np.all(np.triu(maps["decoder"][0].numpy()[0, 0], k=1) == 0)


def test_a_keras_file_round_trip_gives_the_same_logits(tmp_path):
    model = make_model("transformer-post-learned")
    model.save(tmp_path / "transformer.keras")
    reloaded = keras.saving.load_model(tmp_path / "transformer.keras")
    np.testing.assert_array_equal(reloaded((SOURCES, TARGETS)), model((SOURCES, TARGETS)))


@pytest.mark.parametrize("fields, message", [
    (dict(decoder="self-attention", embedding_dim=30, heads=4), "heads must divide"),
    (dict(encoder="self-attention", embedding_dim=30, heads=4), "heads must divide"),
    (dict(decoder="luong", decoder_layers=2), "decoder_layers applies"),
    (dict(decoder="self-attention", alignment="local-m"), "cross-attention is global"),
    (dict(encoder="self-attention", embedding_dim=32, units=16, score="dot"),
     "same size"),
    (dict(decoder="self-attention", attention_dropout=1.0), "attention_dropout"),
    (dict(decoder="self-attention", feed_forward_dim=0), "feed_forward_dim"),
    (dict(encoder="self-attention", heads=0), "heads"),
])
def test_inconsistent_self_attention_settings_are_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(source_vocab_size=10, target_vocab_size=10, **fields)


def test_the_self_attention_sizes():
    config = ModelConfig(source_vocab_size=10, target_vocab_size=10, embedding_dim=32,
                         units=16, encoder="self-attention", decoder="self-attention",
                         score="dot")
    assert (config.model_dim, config.memory_dim, config.inner_dim) == (32, 32, 128)
    assert ModelConfig(source_vocab_size=10, target_vocab_size=10,
                       feed_forward_dim=100).inner_dim == 100


@pytest.mark.parametrize("method", [EncoderBlock.sublayer_output, EncoderBlock.feed_forward,
                                    DecoderBlock._cross_and_feed_forward])
def test_the_blocks_helpers_take_training_by_keyword_only(method):
    # Keras's Layer.__call__ passes `training` by keyword: a helper that took it
    # positionally would fail with "got multiple values for argument 'training'" the
    # day it became a layer called that way.
    import inspect

    parameter = inspect.signature(method).parameters["training"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
