"""A Transformer and a hybrid (self-attention encoder, Luong decoder) learn a few hundred
real Tatoeba pairs by heart: greedy and beam search then give back every target."""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from spa_eng_parts import spa_eng_pairs

from attncli.config.model import ModelConfig
from attncli.config.search import SearchConfig
from attncli.config.training import TrainingConfig
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer
from attncli.data.vocabulary import END, START
from attncli.model.encoder_decoder import Seq2Seq
from attncli.search import decoding
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.steps import make_train_step

PAIRS = 300
MODELS = {
    "transformer": dict(encoder="self-attention", decoder="self-attention", encoder_layers=2,
                        decoder_layers=2, heads=4, feed_forward_dim=128, score="scaled_dot"),
    "hybrid": dict(encoder="self-attention", decoder="luong", encoder_layers=2, heads=4,
                   feed_forward_dim=128, score="general"),
}


def real_pairs():
    """The first `PAIRS` Tatoeba pairs whose sources are distinct as the model reads them
    (a source with two translations cannot be learned by heart), as ragged ids."""
    pairs = spa_eng_pairs(3000)
    ids = []
    for side in (0, 1):
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        texts = [pair[side] for pair in pairs]
        tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, max_size=3000))
        ids.append(tokenizer.encode(tf.constant(texts)).to_list())
    kept, seen = [], set()
    for source, target in zip(*ids):
        if tuple(source) not in seen:
            seen.add(tuple(source))
            kept.append((source, target))
        if len(kept) == PAIRS:
            break
    return (tf.ragged.constant([pair[side] for pair in kept], tf.int32) for side in (0, 1))


def padded(ragged):
    return ragged.to_tensor(0).numpy().astype("int32")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_greedy_and_beam_give_back_every_learned_target(name):
    sources, targets = real_pairs()
    source_ids = padded(sources)
    rows = targets.nrows()
    target_in = padded(tf.concat([tf.fill([rows, 1], START), targets], axis=1))
    target_out = padded(tf.concat([targets, tf.fill([rows, 1], END)], axis=1))
    expected = [list(row) + [END] for row in targets.to_list()]
    keras.utils.set_random_seed(0)
    vocab_sizes = int(source_ids.max()) + 1, int(target_out.max()) + 1
    model = Seq2Seq(ModelConfig(
        source_vocab_size=max(vocab_sizes[0], 5), target_vocab_size=max(vocab_sizes[1], 5),
        embedding_dim=64, units=64, **MODELS[name],
    ))
    config = TrainingConfig(learning_rate=3e-3, label_smoothing=0.0, clip_norm=1.0)
    train_step = make_train_step(model, make_optimizer(config), config)
    greedy = decoding.compile_search(model, SearchConfig(beam_size=1, max_length_offset=5))
    beam = decoding.compile_search(model, SearchConfig(beam_size=3, max_length_offset=5))

    def emitted(result):
        return [row[:length].tolist() for row, length in
                zip(result.token_ids[:, 0].numpy(), result.lengths[:, 0].numpy())]

    order = np.random.default_rng(0).permutation(PAIRS)
    start = time.monotonic()
    for epoch in range(150):
        for batch in np.array_split(order, 3):
            train_step((tf.constant(source_ids[batch]), tf.constant(target_in[batch])),
                       tf.constant(target_out[batch]))
        # Until both searches give every target back: once greedy does, beam can still
        # find a likelier (shorter) path for a target that is not yet learned firmly.
        if (epoch % 10 == 9 and emitted(greedy(source_ids)) == expected
                and emitted(beam(source_ids)) == expected):
            break
    print(f"{name}: {epoch + 1} epochs in {time.monotonic() - start:.0f} s")
    assert emitted(greedy(source_ids)) == expected
    assert emitted(beam(source_ids)) == expected
