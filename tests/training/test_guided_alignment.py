"""Guided alignment training: the loss against NumPy, words moved onto pieces, links that
follow their pairs, the refusals, and training on the Hansards gold sentences."""

import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from typer.testing import CliRunner

from attncli.links import LinkError
from attncli.cli.app import app
from attncli.config.model import ModelSettings
from attncli.config.training import GuidedAlignment, TrainingConfig
from attncli.data.alignments import (
    gold_distributions, pair_links, piece_links, piece_words, read_alignments,
    read_pair_links,
)
from attncli.data.corpora import read_splits
from attncli.data.pipeline import encode_pairs, epoch_batches
from attncli.data.readers import Corpus, read_parallel
from attncli.data.tokenization import Tokenizer
from attncli.data.vocabulary import RESERVED_TOKENS, Vocabulary
from attncli.model.encoder_decoder import Seq2Seq
from attncli.training.guided import alignment_loss
from attncli.training.optimizer_setup import make_optimizer
from attncli.training.steps import make_train_step
from attncli.search.loading import load_model
from tests.cli_errors import one_line_error
from tests.attncli_runs import training_parts
from tests.guided_runs import trained_guided, write_gold_links  # noqa: F401 (a fixture)
from tests.shared_data import shared_data

# --- the loss, against the formula written in NumPy -------------------------------------


def numpy_alignment_loss(weights, gold):
    """Chen et al. 2016 / Garg et al. 2019: L = -(1/N) sum_t sum_s g_t(s) log a_t(s), over
    the N rows t with a link; log 0 read at the smallest normal float32."""
    linked = gold.sum(-1) > 0
    logs = np.log(np.maximum(weights, np.finfo(np.float32).tiny))
    return -(gold * logs).sum() / max(linked.sum(), 1), int(linked.sum())


def numpy_gradient_of_logits(weights, gold):
    """dL/dz of L above with a = softmax(z): row t with sum_s g_t(s) = 1 gives
    (a_t - g_t) / N, a row with no link 0 (masked positions have a = 0 and g = 0)."""
    linked = gold.sum(-1, keepdims=True) > 0
    return np.where(linked, weights - gold, 0.0) / max(linked.sum(), 1)


def gold_of(links, shape):
    """g from a dict `{(b, t): [s, ...]}`: 1/|P_t| on each linked s."""
    gold = np.zeros(shape, np.float32)
    for (b, t), sources in links.items():
        gold[b, t, sources] = 1.0 / len(sources)
    return gold


def test_the_loss_and_its_gradient_match_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 5)).astype(np.float32) * 3
    valid = np.ones((2, 4, 5), bool)
    valid[1, :, 3:] = False  # the second source has 3 pieces: weights 0 past them
    gold = gold_of({(0, 0): [0], (0, 1): [1, 2], (0, 3): [4], (1, 0): [2], (1, 2): [0, 1]},
                   logits.shape)
    z = tf.Variable(logits)
    with tf.GradientTape() as tape:
        weights = tf.nn.softmax(tf.where(valid, z, -np.inf), axis=-1)
        total, links = alignment_loss(weights, tf.constant(gold))
        loss = total / tf.cast(links, tf.float32)
    gradient = tape.gradient(loss, z)
    masked = np.where(valid, logits, -np.inf)
    a = np.exp(masked - masked.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    expected, expected_links = numpy_alignment_loss(a, gold)
    assert int(links) == expected_links == 5
    np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
    np.testing.assert_allclose(gradient.numpy(), numpy_gradient_of_logits(a, gold),
                               atol=1e-7)


def test_a_zero_weight_is_finite_and_a_small_one_unchanged():
    weights = np.array([[[0.0, 1e-30, 1.0 - 1e-30]]], np.float32)
    gold = gold_of({(0, 0): [0, 1]}, weights.shape)
    total, links = alignment_loss(tf.constant(weights), tf.constant(gold))
    tiny = np.finfo(np.float32).tiny
    expected = -(0.5 * np.log(np.float32(tiny)) + 0.5 * np.log(np.float32(1e-30)))
    assert int(links) == 1
    np.testing.assert_allclose(float(total), expected, rtol=1e-6)
    assert np.isfinite(float(total))


def test_half_precision_weights_are_read_in_float32():
    weights = np.array([[[0.25, 0.75]]], np.float32)
    gold = gold_of({(0, 0): [0]}, weights.shape)
    total, _ = alignment_loss(tf.constant(weights, tf.bfloat16), tf.constant(gold))
    assert total.dtype == tf.float32
    np.testing.assert_allclose(float(total), -np.log(0.25), rtol=1e-6)


# --- words onto pieces -------------------------------------------------------------------


def wordpiece(tokens):
    return Tokenizer("subword").with_vocabulary(Vocabulary([*RESERVED_TOKENS, *tokens]))


def test_wordpiece_pieces_follow_their_space_words():
    tokenizer = wordpiece(["un", "##believ", "##able", "hello", ",", "!", "it", "'", "s",
                           "world", "."])
    texts = ["unbelievable hello, it's world!", "hello ."]
    assert tokenizer.tokenize(tf.constant(texts)).to_list()[0] == [
        b"un", b"##believ", b"##able", b"hello", b",", b"it", b"'", b"s", b"world", b"!"]
    assert piece_words(texts, tokenizer) == [[0, 0, 0, 1, 1, 2, 2, 2, 3, 3], [0, 1]]


def test_char_level_spaces_belong_to_no_word():
    texts = ["ab c", "x"]
    tokenizer = Tokenizer("char")
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts))
    assert piece_words(texts, tokenizer) == [[0, 0, -1, 1], [0]]


def test_sentencepiece_pieces_spell_their_words():
    texts = ["the cat sat on the mat", "unbelievable story, told twice"] * 20
    tokenizer = Tokenizer("sentencepiece")
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, max_size=300))
    for text, tokens, owners in zip(texts, tokenizer.tokenize(tf.constant(texts[:2])).to_list(),
                                    piece_words(texts[:2], tokenizer)):
        spelt = [b"".join(token for token, owner in zip(tokens, owners) if owner == index)
                 for index in range(len(text.split()))]
        assert [word.decode().lstrip("\u2581") for word in spelt] == text.split()


def test_a_sentence_whose_words_do_not_make_its_pieces_is_unmatched():
    # Python splits on the no-break space; the char level keeps it as a character.
    tokenizer = Tokenizer("char")
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(["a b"]))
    assert piece_words(["a\u00a0b", "a b"], tokenizer) == [None, [0, -1, 1]]
    corpus = Corpus(["a\u00a0b", "a b"], ["a", "b"])
    links, unmatched = piece_links(corpus, [{(0, 0)}, {(1, 0)}], tokenizer, tokenizer)
    assert unmatched == 1
    assert links.to_list() == [[], [[0, 2]]]


def test_links_move_onto_every_piece_of_both_words():
    source = wordpiece(["un", "##believ", "##able", "story", "."])
    target = wordpiece(["in", "##croy", "##able", "histoire", "."])
    corpus = Corpus(["unbelievable story.", "story"], ["histoire incroyable.", "histoire"])
    links, unmatched = piece_links(corpus, [{(0, 1), (1, 0)}, set()], source, target)
    assert unmatched == 0
    # source pieces: un ##believ ##able story . ; target: histoire in ##croy ##able .
    # word 1 of the target (`incroyable.`) has pieces 1..4, word 0 of the source 0..2.
    assert links.to_list() == [
        [[0, 3], [0, 4]] + [[t, s] for t in (1, 2, 3, 4) for s in (0, 1, 2)], []]
    gold = gold_distributions(links, 6, 5).numpy()  # padded T (with [END]) and S
    np.testing.assert_allclose(gold[0, 0], [0, 0, 0, 0.5, 0.5])
    np.testing.assert_allclose(gold[0, 2], [1 / 3, 1 / 3, 1 / 3, 0, 0])
    assert not gold[0, 5].any() and not gold[1].any()


# --- links follow their pairs -----------------------------------------------------------


def test_links_follow_their_lines_past_bad_lines_carving_and_max_length(tmp_path):
    lines = ["a b\tx y", "", "no tab here", "c\tz", "d e f g h\tu v w", "e\tq"]
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "links.txt").write_text("0-1 1-0\n\n0-0\n0-0\n4-2\n0-0\n")
    splits = read_splits(tmp_path / "pairs.tsv", valid_size=1, seed=0)
    train = splits.train
    links = read_pair_links(tmp_path / "links.txt", train)
    by_line = dict(zip(train.lines, links))
    expected = {1: {(0, 1), (1, 0)}, 4: {(0, 0)}, 5: {(4, 2)}, 6: {(0, 0)}}
    assert set(by_line) | set(splits.valid.lines) == set(expected)
    assert all(by_line[line] == expected[line] for line in by_line)

    tokenizer = Tokenizer("word")
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(
        [text for pair in zip(train.sources, train.targets) for text in pair]))
    pieces, _ = piece_links(train, links, tokenizer, tokenizer)
    encoded = encode_pairs(train, tokenizer, tokenizer, max_length=3, links=pieces)
    kept = [line for line, source in zip(train.lines, train.sources)
            if len(source.split()) <= 3]
    assert encoded.links.to_list() == [
        [[j, i] for i, j in sorted(expected[line], key=lambda link: link[::-1])]
        for line in kept]


# --- the refusals: one line naming the file and line -------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("0-0\n", r"links\.txt has 1 lines and the training file 2: line n of data\.alignments"),
    ("0-0\n0-0\n0-0\n", "has 3 lines and the training file 2"),
    ("0-0\n0:1\n", r"links\.txt, line 2: '0:1' is not a link"),
    ("0-0\n1-0 0-3\n", r"links\.txt, line 2: link 0-3 \(counted from 0\) is past the sentence "
                       "pair of 2 source and 2 target words"),
])
def test_a_bad_alignments_file_is_one_line_naming_its_line(tmp_path, text, message):
    corpus = Corpus(["a", "b c"], ["x", "y z"], lines=[1, 2])
    (tmp_path / "links.txt").write_text(text)
    with pytest.raises(LinkError, match=message) as error:
        pair_links(corpus, read_alignments(tmp_path / "links.txt", 2), tmp_path / "links.txt")
    assert "\n" not in str(error.value)


def test_the_command_refuses_a_short_alignments_file_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.tsv").write_text("".join(f"a{n} b\tx{n} y\n" for n in range(30)))
    (tmp_path / "links.txt").write_text("0-0\n" * 29)
    config = {"data": {"format": "tsv", "train": "pairs.tsv", "valid_size": 5,
                       "alignments": "links.txt"},
              "model": {"embedding_dim": 8, "units": 8},
              "training": {"epochs": 1, "guided_alignment": {"weight": 1.0}}}
    (tmp_path / "guided.yaml").write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["train", "guided.yaml", "--run-dir", "run"])
    line = one_line_error(result)
    assert line.endswith("links.txt has 29 lines and the training file 30: line n of "
                         "data.alignments holds the links of line n of the training file")
    assert not (tmp_path / "run").exists()


# --- the supervised attention ----------------------------------------------------------


def test_a_self_attention_decoder_returns_the_supervised_head():
    settings = ModelSettings(encoder="self-attention", decoder="self-attention",
                             embedding_dim=16, units=16, heads=4, decoder_layers=3,
                             feed_forward_dim=32)
    model = Seq2Seq(settings.sized(20, 20))
    source = tf.constant([[5, 6, 7, 0], [8, 9, 0, 0]])
    target_in = tf.constant([[2, 5, 6], [2, 7, 0]])
    maps = model.attention_maps(source, target_in)
    layer, head = GuidedAlignment(weight=1.0).supervised(settings)
    assert (layer, head) == (2, 1)
    for layer, head in ((layer, head), (3, 4)):
        _, weights = model.features((source, target_in), cross_attention=(layer, head))
        np.testing.assert_allclose(weights.numpy(), maps["cross"][layer - 1][:, head - 1])


# --- training on the Hansards gold sentences ----------------------------------------------


def mean_alignment_loss(model, batches):
    total, links = 0.0, 0
    for inputs, (_, gold) in batches:
        _, weights = model.features(inputs, cross_attention=(1, 1))
        batch_total, batch_links = alignment_loss(weights, gold)
        total, links = total + float(batch_total), links + int(batch_links)
    return total / links


@pytest.mark.slow
def test_guided_training_moves_the_attention_toward_the_gold_links(tmp_path):
    corpus = read_parallel(shared_data("hansards-en-fr/test.en"),
                           shared_data("hansards-en-fr/test.fr"))
    word_links = read_pair_links(write_gold_links(tmp_path / "gold.txt"), corpus)
    tokenizers = []
    for texts in (corpus.sources, corpus.targets):
        tokenizer = Tokenizer("subword")
        tokenizers.append(tokenizer.with_vocabulary(
            tokenizer.build_vocabulary(texts, max_size=1000)))
    links, unmatched = piece_links(corpus, word_links, *tokenizers)
    assert unmatched == 0
    encoded = encode_pairs(corpus, *tokenizers, max_length=40, links=links)
    batches = list(epoch_batches(encoded, 0, batch_size=64, bucketing=False, shuffle=False))
    settings = ModelSettings(embedding_dim=32, units=32, decoder="luong", score="general",
                             merge_mode="concat").sized(*(len(t.vocabulary) for t in tokenizers))
    losses = {}
    for guided in (None, GuidedAlignment(weight=1.0)):
        keras.utils.set_random_seed(0)
        model = Seq2Seq(settings)
        config = TrainingConfig(learning_rate=0.01, guided_alignment=guided)
        train_step = make_train_step(model, make_optimizer(config), config)
        before = mean_alignment_loss(model, batches)
        for epoch in range(3):
            # Unbucketed: a few batch shapes, so little time goes into tracing.
            for inputs, labels in epoch_batches(encoded, epoch, batch_size=32,
                                                bucketing=False):
                train_step(inputs, labels if guided else labels[0])
        losses[guided is not None] = (before, mean_alignment_loss(model, batches))
    (start, guided_end), (_, unguided_end) = losses[True], losses[False]
    assert losses[True][0] == pytest.approx(losses[False][0])  # the same model at first
    assert guided_end < 0.8 * start
    assert guided_end < 0.8 * unguided_end


@pytest.mark.slow
def test_a_guided_run_resumes_and_fine_tunes(trained_guided, tmp_path, monkeypatch):  # noqa: F811
    """`attncli train` of a guided run (`guided_runs.trained_guided`, trained in the test's
    process), resumed and fine-tuned. Its export is test_alignment_layer's: the aligner
    exported there is a guided run too (guided_alignment and data.alignments in its
    configuration), with the alignment layer besides; the export reads neither setting."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(trained_guided / "run", tmp_path / "run")
    shutil.copyfile(trained_guided / "guided.yaml", tmp_path / "guided.yaml")
    [record] = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert record["train_alignment_loss"] > 0

    # Resumed, the run restores guided alignment's running sums with the rest.
    parts, said = training_parts(None, "run", resume=True, overrides=["training.epochs=2"])
    assert any(message.startswith("resuming from") for message in said)
    position = parts.position
    mean = float(position.epoch_alignment_sum.numpy()) / int(position.epoch_links.numpy())
    assert mean == pytest.approx(record["train_alignment_loss"])
    assert parts.encoded.links is not None

    # Fine-tuned with guided alignment on, the new run starts from the kept weights.
    parts, said = training_parts("guided.yaml", "ft", init_from="run")
    assert any(message.startswith("initialised from") for message in said)
    kept = load_model(tmp_path / "run" / "model").model
    for ours, theirs in zip(parts.model.weights, kept.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert int(parts.position.epoch_links.numpy()) == 0
