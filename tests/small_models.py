"""Small untrained models the model and search tests share: three padded sentences run
teacher-forced and step by step (`small_model`), and the decoder kinds the search tests
search with (`make_model` of `CONFIGS`)."""

import keras
import numpy as np
import tensorflow as tf

from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.data.vocabulary import PAD
from attncli.model.encoder_decoder import Seq2Seq

SOURCE = np.array([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 0, 0, 0, 0]], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 9, 0], [2, 10, 11, 12]], dtype="int32")
# Teacher-forced outputs are defined at the real target positions only.
REAL = TARGET_IN != 0


def small_model(**options):
    """A fresh small model (test_model's `variant_model` shares one per variant)."""
    keras.utils.set_random_seed(1)
    config = ModelConfig(
        source_vocab_size=20, target_vocab_size=15, embedding_dim=6, units=8,
        attention_units=5, window=2, **options,
    )
    return Seq2Seq(config)


def as_numpy(tensor):
    return keras.ops.convert_to_numpy(tensor)


def teacher_forced(model, source=SOURCE, target_in=TARGET_IN):
    logits, weights = model((source, target_in), return_attention_scores=True)
    return as_numpy(logits), as_numpy(weights)


def step_by_step(model, source=SOURCE, target_in=TARGET_IN):
    memory, state = model.encode(source)
    logits, weights = [], []
    for t in range(target_in.shape[1]):
        step_logits, state, step_weights = model.decode_step(target_in[:, t], state, memory)
        logits.append(as_numpy(step_logits))
        weights.append(as_numpy(step_weights))
    return np.stack(logits, axis=1), np.stack(weights, axis=1)


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


def searching(beam_size):
    """The search of these tests: a beam of `beam_size`, every hypothesis of it returned."""
    return SearchConfig(
        beam_size=beam_size, n_best=None, alpha=0.6, max_length_ratio=1.0, max_length_offset=3
    )
