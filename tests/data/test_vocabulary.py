from collections import Counter

import pytest
import tensorflow as tf
from shared_data import shared_data

from attncli.data.readers import read_tsv
from attncli.errors import AttncliError
from attncli.data.tokenization import Tokenizer
from attncli.data.vocabulary import END, PAD, RESERVED_TOKENS, START, UNK, Vocabulary


def test_reserved_ids():
    assert (PAD, UNK, START, END) == (0, 1, 2, 3)
    vocabulary = Vocabulary.from_counts({"a": 2})
    assert vocabulary.tokens == ["[PAD]", "[UNK]", "[START]", "[END]", "a"]
    assert [vocabulary.id_of(token) for token in RESERVED_TOKENS] == [0, 1, 2, 3]


def test_order_by_count_then_text():
    counts = {"b": 5, "a": 5, "c": 9, "d": 1, "é": 5}
    assert Vocabulary.from_counts(counts).tokens[4:] == ["c", "a", "b", "é", "d"]
    shuffled = dict(reversed(list(counts.items())))
    assert Vocabulary.from_counts(shuffled) == Vocabulary.from_counts(counts)


def test_size_and_minimum_count():
    counts = {"c": 9, "a": 5, "b": 5, "d": 1}
    assert Vocabulary.from_counts(counts, max_size=6).tokens[4:] == ["c", "a"]
    assert Vocabulary.from_counts(counts, min_count=5).tokens[4:] == ["c", "a", "b"]
    assert len(Vocabulary.from_counts(counts, max_size=100)) == 8


@pytest.fixture(scope="module")
def english():
    return read_tsv(shared_data("spa-eng/spa.txt"), limit=4000).sources


def test_limits_on_a_real_corpus(english):
    tokenizer = Tokenizer("word", lowercase=True)
    counts = Counter(
        token.decode("utf-8")
        for token in tokenizer.tokenize(tf.constant(english)).flat_values.numpy()
    )
    limited = tokenizer.build_vocabulary(english, max_size=500, min_count=1)
    assert len(limited) == 500
    expected = sorted(counts, key=lambda token: (-counts[token], token))[:496]
    assert limited.tokens[4:] == expected
    frequent = tokenizer.build_vocabulary(english, min_count=3)
    assert set(frequent.tokens[4:]) == {token for token, n in counts.items() if n >= 3}
    assert tokenizer.build_vocabulary(english, max_size=500, chunk_size=700) == limited


def test_save_load_plain_text(tmp_path, english):
    vocabulary = Tokenizer("char").build_vocabulary(english)
    path = tmp_path / "vocab.txt"
    vocabulary.save(path)
    lines = path.read_text("utf-8").split("\n")
    assert lines[:4] == list(RESERVED_TOKENS) and lines[-1] == ""
    assert "▁" in lines  # the char level's space
    assert Vocabulary.load(path) == vocabulary


@pytest.mark.parametrize(
    "content, problem",
    [
        ("[PAD]\n[UNK]\n[END]\n[START]\n", "must start with"),
        ("[PAD]\n[UNK]\n[START]\n[END]\na\na\n", "twice"),
        ("[PAD]\n[UNK]\n[START]\n[END]\n\nb\n", "empty"),
    ],
)
def test_bad_vocabulary_files(tmp_path, content, problem):
    path = tmp_path / "vocab.txt"
    path.write_text(content, "utf-8")
    with pytest.raises(AttncliError, match=problem):
        Vocabulary.load(path)


def test_missing_vocabulary_file(tmp_path):
    with pytest.raises(AttncliError, match="cannot read vocabulary"):
        Vocabulary.load(tmp_path / "none.txt")


def test_lookup_and_back_in_graph_mode():
    vocabulary = Vocabulary.from_counts({"hola": 3, "tom": 2})
    tokens = tf.ragged.constant([["hola", "tom"], ["adiós"]])

    @tf.function
    def round_trip(tokens):
        ids = vocabulary.lookup(tokens)
        return ids, vocabulary.tokens_of(ids)

    ids, back = round_trip(tokens)
    assert ids.dtype == tf.int32
    assert ids.to_list() == [[4, 5], [UNK]]
    assert back.to_list() == [[b"hola", b"tom"], [b"[UNK]"]]
    assert vocabulary.lookup(tf.constant(["tom", "x"])).numpy().tolist() == [5, UNK]


def test_rejects_impossible_limits():
    with pytest.raises(AttncliError, match="max_size"):
        Vocabulary.from_counts({"a": 1}, max_size=4)
    with pytest.raises(AttncliError, match="min_count"):
        Vocabulary.from_counts({"a": 1}, min_count=0)
