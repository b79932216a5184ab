"""`data.shared_vocab` and `model.tie_embeddings`: one vocabulary, one embedding matrix.

A tied model is checked against the untied one given equal matrices: it computes the
same logits, `logits = features E^T + b` (Press & Wolf 2017), and the gradient of its
one matrix is the sum, computed here in NumPy, of the untied model's gradients of the
source embedding, the target embedding and the output kernel (transposed).
"""

import math
import types
from collections import Counter
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.model import ModelConfig
from attncli.config.run import load_run_config
from attncli.data.tokenization import Tokenizer
from attncli.data.vocabulary import RESERVED_TOKENS, Vocabulary
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.saving import save_model
from attncli.search.loading import load_model
from attncli.training.run_tokenizers import prepare_tokenizers

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-test.yaml"
VOCAB, DIM = 23, 8
# (encoder, decoder): each decoder, after each kind of encoder.
CASES = [
    ("rnn", "bahdanau"), ("rnn", "luong"), ("rnn", "self-attention"),
    ("self-attention", "luong"), ("self-attention", "self-attention"),
]
SOURCE = np.array([[5, 9, 4, 3], [7, 3, 0, 0]])
TARGET_IN = np.array([[2, 11, 6, 8, 17], [2, 19, 22, 0, 0]])


def make_model(encoder, decoder, tie):
    keras.utils.set_random_seed(1)
    return Seq2Seq(ModelConfig(
        source_vocab_size=VOCAB, target_vocab_size=VOCAB, embedding_dim=DIM, units=DIM,
        heads=2, encoder=encoder, decoder=decoder, tie_embeddings=tie,
    ))


def token_embedding(side):
    """The `keras.layers.Embedding` an encoder or decoder reads its ids with."""
    embedding = side.embedding
    return getattr(embedding, "token_embedding", embedding)


def relative(variable):
    return variable.path.split("/", 1)[1]


def sinusoids(length, depth):
    """PE(t, 2i) = sin(t / 10000^(2i/d)), PE(t, 2i+1) = cos(...) (Vaswani et al. 3.5)."""
    table = np.zeros((length, depth))
    for t in range(length):
        for j in range(depth):
            angle = t / 10000 ** (2 * (j // 2) / depth)
            table[t, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


@pytest.mark.parametrize("encoder, decoder", CASES)
def test_tied_matrices_are_one_variable_counted_once(encoder, decoder):
    untied = make_model(encoder, decoder, "none")
    target = make_model(encoder, decoder, "target")
    tied = make_model(encoder, decoder, "all")
    count = len(untied.trainable_variables)

    matrix = token_embedding(target.decoder).embeddings
    assert target.decoder.output_layer.embedding.embeddings is matrix
    assert token_embedding(target.encoder).embeddings is not matrix
    assert len(target.trainable_variables) == count - 1  # the output kernel is gone
    assert untied.count_params() - target.count_params() == VOCAB * DIM

    shared = tied.shared_embedding.embeddings
    for side in (tied.encoder, tied.decoder, tied.decoder.output_layer):
        assert token_embedding(side).embeddings is shared
    assert len(tied.trainable_variables) == count - 2  # and the source embedding
    assert [variable is shared for variable in tied.trainable_variables].count(True) == 1
    assert untied.count_params() - tied.count_params() == 2 * VOCAB * DIM
    paths = [variable.path for variable in tied.weights]
    assert len(paths) == len(set(paths)) and relative(shared) == "shared_embedding/embeddings"


def untied_copy(tied, encoder, decoder):
    """The untied model with the tied one's weights: E as both embeddings, E^T as kernel."""
    untied = make_model(encoder, decoder, "none")
    matrix = tied.shared_embedding.embeddings.numpy()
    own = {relative(variable): variable for variable in tied.weights}
    for variable in untied.weights:
        if variable is untied.decoder.output_layer.kernel:
            variable.assign(matrix.T)
        elif variable.path.endswith("embedding/embeddings"):
            variable.assign(matrix)
        else:
            variable.assign(own.pop(relative(variable)))
    assert list(own) == ["shared_embedding/embeddings"]
    return untied


@pytest.mark.parametrize("encoder, decoder", CASES)
def test_tied_model_sums_the_gradients_of_every_use(encoder, decoder):
    tied = make_model(encoder, decoder, "all")
    untied = untied_copy(tied, encoder, decoder)
    upstream = np.random.default_rng(0).normal(size=TARGET_IN.shape + (VOCAB,))

    def logits_and_gradients(model, variables):
        with tf.GradientTape() as tape:
            logits = model((SOURCE, TARGET_IN))
            loss = tf.reduce_sum(logits * upstream)
        gradients = tape.gradient(loss, variables)
        return logits.numpy(), [tf.convert_to_tensor(g).numpy() for g in gradients]

    shared = tied.shared_embedding.embeddings
    logits, (gradient,) = logits_and_gradients(tied, [shared])
    uses = [token_embedding(untied.encoder).embeddings,
            token_embedding(untied.decoder).embeddings, untied.decoder.output_layer.kernel]
    untied_logits, (source, target, kernel) = logits_and_gradients(untied, uses)
    np.testing.assert_allclose(logits, untied_logits, rtol=1e-5, atol=1e-6)
    # Every use contributes: the source and target lookups and the output projection.
    assert min(np.abs(g).max() for g in (source, target, kernel)) > 0
    np.testing.assert_allclose(gradient, source + target + kernel.T, rtol=1e-5, atol=1e-6)

    # logits = features E^T + b, features from the decoder's last layer.
    features, _ = tied.features((SOURCE, TARGET_IN))
    expected = features.numpy() @ shared.numpy().T + tied.decoder.output_layer.bias.numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)

    # One step of gradient descent moves the matrix every use reads.
    before = shared.numpy()
    keras.optimizers.SGD(learning_rate=0.5).apply_gradients([(tf.constant(gradient), shared)])
    np.testing.assert_allclose(shared.numpy(), before - 0.5 * gradient, rtol=1e-6, atol=1e-6)
    ids = np.array([[5, 7]])
    for side in (tied.encoder, tied.decoder):
        np.testing.assert_allclose(token_embedding(side)(ids).numpy()[0], shared.numpy()[[5, 7]])


def test_the_transformer_scales_the_tied_matrix_on_input_only():
    tied = make_model("self-attention", "self-attention", "target")
    matrix = token_embedding(tied.decoder).embeddings.numpy()
    ids = np.array([[4, 9, 13]])
    embedded = tied.decoder.embedding(ids).numpy()[0]
    np.testing.assert_allclose(
        embedded, math.sqrt(DIM) * matrix[[4, 9, 13]] + sinusoids(3, DIM), rtol=1e-5, atol=1e-5
    )
    features = np.random.default_rng(1).normal(size=(2, DIM)).astype("float32")
    np.testing.assert_allclose(
        tied.decoder.output_layer(features).numpy(),
        features @ matrix.T + tied.decoder.output_layer.bias.numpy(), rtol=1e-5, atol=1e-5,
    )


@pytest.mark.parametrize("encoder, decoder, tie", [
    ("rnn", "luong", "all"), ("self-attention", "self-attention", "target"),
    ("rnn", "bahdanau", "target"),
])
def test_a_saved_tied_model_loads_tied_and_gives_the_same_outputs(tmp_path, encoder, decoder,
                                                                  tie):
    model = make_model(encoder, decoder, tie)
    for variable in model.trainable_variables:  # not the initial values: trained ones
        variable.assign(np.random.default_rng(2).normal(size=variable.shape) * 0.3)
    words = [f"w{index}" for index in range(VOCAB - len(RESERVED_TOKENS))]
    tokenizer = Tokenizer("word").with_vocabulary(Vocabulary(list(RESERVED_TOKENS) + words))
    save_model(tmp_path / "model", model, tokenizer, tokenizer)
    model.save(tmp_path / "model.keras")
    for loaded in (load_model(tmp_path / "model").model,
                   keras.saving.load_model(tmp_path / "model.keras")):
        assert loaded.config.tie_embeddings == tie
        np.testing.assert_allclose(loaded((SOURCE, TARGET_IN)).numpy(),
                                   model((SOURCE, TARGET_IN)).numpy(), rtol=1e-6)
        matrix = token_embedding(loaded.decoder).embeddings
        assert loaded.decoder.output_layer.embedding.embeddings is matrix
        assert (token_embedding(loaded.encoder).embeddings is matrix) == (tie == "all")


def test_tie_all_needs_one_vocabulary_size_and_rnn_ties_need_units_equal_to_embedding_dim():
    with pytest.raises(ValueError, match="needs one vocabulary .* Received: "
                                         "source_vocab_size=30, target_vocab_size=40"):
        ModelConfig(source_vocab_size=30, target_vocab_size=40, tie_embeddings="all")
    with pytest.raises(ValueError, match="make units and embedding_dim equal. "
                                         "Received: units=64, embedding_dim=32"):
        ModelConfig(source_vocab_size=30, target_vocab_size=30, units=64, embedding_dim=32,
                    tie_embeddings="target")
    # The self-attention decoder's features are embedding_dim wide whatever units is.
    ModelConfig(source_vocab_size=30, target_vocab_size=30, units=64, embedding_dim=32,
                decoder="self-attention", tie_embeddings="target")


def shared_tokenizers(tmp_path, level, sources, targets, vocab_size):
    config = load_run_config(TINY, [
        "data.shared_vocab=true", f"data.source.level={level}", f"data.target.level={level}",
        f"data.source.vocab_size={vocab_size}", f"data.target.vocab_size={vocab_size}",
    ])
    splits = types.SimpleNamespace(train=types.SimpleNamespace(sources=sources, targets=targets))
    run = types.SimpleNamespace(path=tmp_path)
    return prepare_tokenizers(config, run, splits, resume=False)


def test_a_shared_word_vocabulary_counts_both_sides_together(tmp_path):
    sources = ["perro gato", "perro", "gato azul"]
    targets = ["perro dog", "dog", "cat"]
    counts = Counter(word for line in sources + targets for word in line.split())
    source, target = shared_tokenizers(tmp_path, "word", sources, targets, vocab_size=6)
    # Two kept, by their counts on both sides together: 'perro' (2 + 1), then 'dog'
    # (2, before 'gato' by its text); the sources alone keep 'gato' and 'perro'.
    kept = sorted(counts, key=lambda word: (-counts[word], word))[:2]
    assert kept == ["perro", "dog"]
    assert source.vocabulary.tokens == list(RESERVED_TOKENS) + kept == target.vocabulary.tokens
    assert ((tmp_path / "source.vocab.txt").read_text()
            == (tmp_path / "target.vocab.txt").read_text())


def test_a_shared_wordpiece_vocabulary_spells_both_sides(tmp_path):
    sources = ["der Hund läuft schnell", "die Katze schläft"] * 20
    targets = ["the dog runs fast", "the cat sleeps"] * 20
    source, target = shared_tokenizers(tmp_path, "subword", sources, targets, vocab_size=120)
    assert source.vocabulary == target.vocabulary
    for texts in (sources, targets):
        ids = source.encode(tf.constant(texts)).flat_values.numpy()
        assert 1 not in ids  # no [UNK]: every character of both sides is in it


def train_error(monkeypatch, tmp_path, *overrides):
    monkeypatch.chdir(tmp_path)
    arguments = ["train", str(TINY), "--run-dir", str(tmp_path / "run")]
    for override in overrides:
        arguments += ["--set", override]
    message = one_line_error(CliRunner().invoke(app, arguments))
    assert not (tmp_path / "run").exists()
    return message


@pytest.mark.parametrize("overrides, expected", [
    (["data.shared_vocab=maybe"],
     "data.shared_vocab must be true or false. Received: data.shared_vocab='maybe'"),
    (["model.tie_embeddings=true"],
     "model.tie_embeddings must be one of none, target, all. "
     "Received: model.tie_embeddings=True"),
    (["model.tie_embeddings=decoder"],
     "model.tie_embeddings must be one of none, target, all. "
     "Received: model.tie_embeddings='decoder'"),
    (["model.tie_embeddings=all"],
     "model.tie_embeddings: 'all' gives the source and target one embedding matrix, which "
     "needs one vocabulary for both sides: set data.shared_vocab: true"),
    (["data.shared_vocab=true", "data.target.lowercase=false", "data.target.vocab_size=900"],
     "make lowercase, vocab_size the same on both sides. Received: source.lowercase=True, "
     "target.lowercase=False, source.vocab_size=400, target.vocab_size=900"),
    (["model.tie_embeddings=target", "model.units=64"],
     "make units and embedding_dim equal. Received: units=64, embedding_dim=32"),
])
def test_bad_values_of_the_new_keys_are_one_line(monkeypatch, tmp_path, overrides, expected):
    assert expected in train_error(monkeypatch, tmp_path, *overrides)
