"""The sentences `attncli export` checks its SavedModel on when no --sample is given."""

import shutil
from pathlib import Path
from types import SimpleNamespace

from attncli.cli.export_check import sample_sentences, validation_sentences, vocabulary_sentences
from attncli.config.run import load_run_config
from attncli.data.sources import read_splits

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-test.yaml"
RESERVED = ["[PAD]", "[UNK]", "[START]", "[END]"]


def tokenizer(level, tokens):
    return SimpleNamespace(level=level, vocabulary=SimpleNamespace(tokens=RESERVED + tokens))


def test_a_subword_vocabulary_gives_words_not_its_letters():
    # A WordPiece vocabulary starts with its characters, then its most frequent pieces.
    pieces = list("!.0123abcdeé¿") + ["de", "##s", "que", "Tom", "la", "##n", "en", "el", "no",
                                       "es", "un"]
    assert vocabulary_sentences(tokenizer("subword", pieces)) == [
        "de que Tom", "la en el no es un"]


def test_a_word_vocabulary_keeps_its_one_letter_words():
    words = [".", "i", "you", "the", "a", "to", "is", "?", "it", "that"]
    assert vocabulary_sentences(tokenizer("word", words)) == [
        "i you the", "a to is it that"]


def test_a_run_is_checked_on_its_validation_sentences(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TINY, run / "config.yaml")
    expected = read_splits(load_run_config(TINY).data).valid.sources[:2]
    assert validation_sentences(run) == expected
    assert sample_sentences(tokenizer("word", ["x"]), run) == expected
    assert len(expected) == 2 and all(expected)


def test_a_model_directory_or_unreadable_data_falls_back_to_the_vocabulary(tmp_path):
    assert validation_sentences(tmp_path) == []
    (tmp_path / "config.yaml").write_text(
        "data: {format: tsv, train: missing.tsv}\n", encoding="utf-8")
    assert validation_sentences(tmp_path) == []
    assert sample_sentences(tokenizer("word", ["hola", "mundo"]), tmp_path) == ["hola mundo"]
