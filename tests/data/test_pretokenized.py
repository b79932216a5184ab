"""`level: pretokenized`: the text's own pieces, split on whitespace and kept as they are,
joined into text again by the joiner's convention (`@@ `, `▁`, or spaces)."""

import io

import pytest
import sentencepiece
import tensorflow as tf
from shared_data import shared_data

from attncli.config.data import DataConfig
from attncli.config.schema import ConfigError, from_mapping
from attncli.data.readers import read_tsv
from attncli.data.sources import data_paths
from attncli.data.tokenization import Tokenizer, learn_tokenizer
from attncli.data.vocabulary import RESERVED_TOKENS, UNK
from attncli.errors import DataError
from attncli.search.evaluation import reference_form, reference_normaliser


def strings(tensor):
    return [value.decode("utf-8") for value in tensor.numpy()]


def pieces(ragged):
    return [[piece.decode("utf-8") for piece in row] for row in ragged.to_list()]


def learned(texts, joiner):
    tokenizer = Tokenizer("pretokenized", joiner=joiner)
    return tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts))


@pytest.fixture(scope="module")
def spa():
    return read_tsv(shared_data("spa-eng/spa.txt"), limit=4000)


def test_pieces_are_kept_exactly_as_given():
    line = "Mach@@ en  Sie ##x ▁Die ▁Kat ze @@ !"
    tokenizer = learned([line], "@@")
    assert pieces(tokenizer.tokenize(tf.constant([line]))) == [
        ["Mach@@", "en", "Sie", "##x", "▁Die", "▁Kat", "ze", "@@", "!"]
    ]
    assert tokenizer.vocabulary.tokens[:4] == list(RESERVED_TOKENS)
    assert {"Mach@@", "##x", "▁Die", "@@"} <= set(tokenizer.vocabulary.tokens)
    # The word level would have cut them: the reason the level exists.
    assert pieces(Tokenizer("word").tokenize(tf.constant(["Mach@@ en"]))) == [
        ["Mach", "@", "@", "en"]
    ]


@pytest.mark.parametrize(
    "joiner, given, text",
    [
        ("@@", "Mach@@ en Sie das Fenster@@ chen zu .", "Machen Sie das Fensterchen zu ."),
        ("@@", "ein Haus@@", "ein Haus"),
        ("@@", "Ein@@ kaufs@@ wagen", "Einkaufswagen"),
        ("\u2581", "\u2581Die \u2581Kat ze \u2581sitzt \u2581auf \u2581der \u2581Matte .",
         "Die Katze sitzt auf der Matte."),
        ("\u2581", "\u2581¿ Dónde \u2581está ?", "¿Dónde está?"),
        (None, "Mach@@ en Sie \u2581Die .", "Mach@@ en Sie \u2581Die ."),
    ],
)
def test_the_joiner_makes_the_written_text(joiner, given, text):
    tokenizer = learned([given], joiner)
    assert strings(tokenizer.detokenize(tokenizer.tokenize(tf.constant([given])))) == [text]
    assert strings(tokenizer.decode(tokenizer.encode(tf.constant([given])))) == [text]


def bpe_pieces(line):
    """`line` cut as subword-nmt writes it: words of more than 4 letters after the 3rd."""
    out = []
    for word in line.split():
        out += [word[:3] + "@@", word[3:]] if len(word) > 4 else [word]
    return " ".join(out)


def test_real_lines_cut_into_pieces_come_back(spa):
    lines = spa.targets[:2000]
    bpe = learned([bpe_pieces(line) for line in lines], "@@")
    cut = [bpe_pieces(line) for line in lines]
    assert strings(bpe.decode(bpe.encode(tf.constant(cut)))) == [" ".join(l.split()) for l in lines]

    stream = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=stream, vocab_size=400, minloglevel=2,
        normalization_rule_name="identity",
    )
    processor = sentencepiece.SentencePieceProcessor(model_proto=stream.getvalue())
    given = [" ".join(processor.encode(line, out_type=str)) for line in lines]
    spm = learned(given, "\u2581")
    assert UNK not in spm.encode(tf.constant(given)).flat_values.numpy()
    assert strings(spm.decode(spm.encode(tf.constant(given)))) == [
        processor.decode(processor.encode(line, out_type=str)) for line in lines
    ]


@pytest.mark.parametrize(
    "content",
    [
        "Mach@@ 120\nen 98\nSie 40\n",  # subword-nmt's vocabulary
        "Mach@@\t-3.2\nen\t-4.1\n\nSie\t-5.0\n",  # a SentencePiece .vocab
        "[PAD]\n[UNK]\n[START]\n[END]\nMach@@\nen\nSie\n",  # attncli's own
    ],
)
def test_a_vocabulary_file_is_read_instead_of_learning(tmp_path, content):
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "de.txt").write_text(content, "utf-8")
    config = from_mapping(DataConfig, {"source": {
        "level": "pretokenized", "joiner": "@@", "vocab_file": "vocab/de.txt",
    }}, "data")
    tokenizer = learn_tokenizer(config.source, ["ignored words"], base=tmp_path)
    assert tokenizer.vocabulary.tokens == list(RESERVED_TOKENS) + ["Mach@@", "en", "Sie"]
    assert tokenizer.encode(tf.constant(["Mach@@ en Sie nie"])).to_list() == [[4, 5, 6, UNK]]


def test_an_empty_or_missing_vocabulary_file_is_named(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n", "utf-8")
    with pytest.raises(DataError, match="empty.txt holds no token"):
        Tokenizer("pretokenized", vocab_file=tmp_path / "empty.txt").build_vocabulary([])
    (tmp_path / "pairs.tsv").write_text("a\tb\n", "utf-8")
    config = from_mapping(DataConfig, {"format": "tsv", "train": "pairs.tsv", "source": {
        "level": "pretokenized", "vocab_file": "de.vocab"}}, "data")
    with pytest.raises(DataError, match=r"data.source.vocab_file: no such file .*de.vocab"):
        data_paths(config, tmp_path)


@pytest.mark.parametrize(
    "side, message",
    [
        ({"level": "pretokenized", "lowercase": True}, "lowercase would change them"),
        ({"level": "pretokenized", "drop_pattern": "[0-9]"}, "drop_pattern would change them"),
        ({"level": "word", "joiner": "@@"}, "joiner is for level pretokenized"),
        ({"level": "pretokenized", "joiner": "##"}, "joiner must be one of @@, ▁"),
        ({"level": "subword", "vocab_file": "v.txt"}, "vocab_file is for level pretokenized"),
    ],
)
def test_settings_that_do_not_fit_are_refused_in_one_line(side, message):
    with pytest.raises(ConfigError, match=message) as error:
        from_mapping(DataConfig, {"source": side}, "data")
    assert "\n" not in str(error.value)


def test_references_are_scored_as_joined_text():
    tokenizer = learned(["Mach@@ en Sie"], "@@")
    assert reference_normaliser(tokenizer)(["Mach@@ en Sie das", "Haus@@ tür"]) == [
        "Machen Sie das", "Haustür",
    ]
    assert "pieces joined by @@" in reference_form(tokenizer)


def test_a_reserved_token_in_a_prefix_is_forced_as_unknown_not_read_as_padding():
    # The export's prefix inputs are not checked one by one: a pretokenized "[PAD]" keeps
    # its id 0 through the lookup, which the search reads as "nothing forced here".
    from types import SimpleNamespace

    from attncli.search.translation import Translator, _lookup_table

    tokenizer = learned(["a b c"], None)
    tokens = tokenizer.vocabulary.tokens
    stand_in = SimpleNamespace(target_tokenizer=tokenizer, target_table=_lookup_table(tokens))
    ids = Translator.prefix_ids(stand_in, tf.constant(["a [PAD] b", "[START] c [END]", ""]))
    a, b, c = (tokens.index(token) for token in "abc")
    assert ids.numpy().tolist() == [[a, UNK, b], [UNK, c, UNK], [0, 0, 0]]
