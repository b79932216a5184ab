"""`level: sentencepiece`: a SentencePiece model learned from the training side, or a
`.model` file given, run in the graph by tensorflow-text; text comes back exactly."""

import io
import unicodedata

import pytest
import sentencepiece
import tensorflow as tf
import tensorflow_text as text
from cli_errors import one_line_error
from shared_data import shared_data

from attncli.config.data import DataConfig
from attncli.config.schema import ConfigError, from_mapping
from attncli.data.readers import read_parallel, read_tsv
from attncli.data.sources import data_paths
from attncli.data.tokenization import Tokenizer, learn_tokenizer
from attncli.data.vocabulary import END, PAD, RESERVED_TOKENS, START, UNK
from attncli.errors import DataError


def strings(tensor):
    return [value.decode("utf-8") for value in tensor.numpy()]


def pieces(ragged):
    return [[piece.decode("utf-8") for piece in row] for row in ragged.to_list()]


@pytest.fixture(scope="module")
def spa():
    return read_tsv(shared_data("spa-eng/spa.txt"))


@pytest.fixture(scope="module")
def multi30k():
    return {
        name: read_parallel(shared_data(f"multi30k/{name}.de"), shared_data(f"multi30k/{name}.en"))
        for name in ("train", "val", "test_2016_flickr")
    }


def learned(texts, size=700, kind="unigram"):
    tokenizer = Tokenizer("sentencepiece", sentencepiece_type=kind)
    return tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, size))


# Lines that a normalising tokenizer would change: two spaces, a no-break space before
# a space, characters never seen in training (spelt by their UTF-8 bytes).
AWKWARD = [
    "En vez de comer verduras, él las\xa0 pone en la licuadora.",
    "Ein Paar,  das bei einer Zusammenkunft unterwegs ist.",
    "他说：“我爱你。” 🙂 naïve café — ½ ﬁ",
    "Tom said \"Hi.\" and $30 , ok ?",
]


def sample(lines, count=400, stride=97):
    return [lines[(index * stride) % len(lines)] for index in range(count)]


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
def test_every_line_comes_back_unchanged_through_the_ids(spa, multi30k, kind):
    english, spanish = learned(spa.sources[:3000], kind=kind), learned(spa.targets[:3000], kind=kind)
    german = learned(multi30k["train"].sources[:3000], kind=kind)
    english_m30k = learned(multi30k["train"].targets[:3000], kind=kind)
    cases = [
        (english, sample(spa.sources) + AWKWARD),
        (spanish, sample(spa.targets) + AWKWARD),
        (german, sample(multi30k["val"].sources) + sample(multi30k["test_2016_flickr"].sources)
         + AWKWARD),
        (english_m30k, sample(multi30k["val"].targets) + AWKWARD),
    ]
    for tokenizer, lines in cases:
        assert all(unicodedata.is_normalized("NFC", line) for line in lines)
        restored = strings(tokenizer.decode(tokenizer.encode(tf.constant(lines))))
        assert [line for line, back in zip(lines, restored) if line != back] == []
        # Nothing unknown: a character never seen is spelt by its bytes.
        assert UNK not in tokenizer.encode(tf.constant(lines)).flat_values.numpy()


def test_pieces_and_text_are_those_of_the_sentencepiece_library(spa):
    tokenizer = learned(spa.sources[:3000])
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.sentencepiece_model)
    lines = sample(spa.sources, 200) + AWKWARD
    expected = [processor.encode(line, out_type=str) for line in lines]
    assert pieces(tokenizer.tokenize(tf.constant(lines))) == expected
    assert strings(tokenizer.detokenize(tf.ragged.constant(expected))) == [
        processor.decode(row) for row in expected
    ]
    # The learned model's own ids are the vocabulary's: the reserved tokens at 0-3.
    assert tokenizer.vocabulary.tokens[:4] == list(RESERVED_TOKENS)
    assert [processor.piece_to_id(token) for token in RESERVED_TOKENS] == [PAD, UNK, START, END]
    direct = text.SentencepieceTokenizer(tokenizer.sentencepiece_model)
    assert tokenizer.encode(tf.constant(lines)).to_list() == direct.tokenize(lines).to_list()


def test_the_vocabulary_is_at_most_vocab_size_and_learned_again_alike(spa):
    first, second = learned(spa.targets[:2000], 600), learned(spa.targets[:2000], 600)
    assert len(first.vocabulary) <= 600
    assert first.vocabulary == second.vocabulary
    # A corpus too small for the size asked gives a smaller vocabulary, not an error.
    assert len(learned(["hola", "adiós"], 600).vocabulary) < 300


def test_normalisation_keys_run_before_the_model(spa):
    tokenizer = Tokenizer("sentencepiece", lowercase=True, strip_accents=True)
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(spa.targets[:2000], 600))
    assert strings(tokenizer.decode(tokenizer.encode(tf.constant(["¿Dónde  ESTÁ?"])))) == [
        "¿donde  esta?"
    ]
    assert "Á" not in "".join(tokenizer.vocabulary.tokens)


def test_a_given_model_file_is_used_with_its_own_ids_mapped(tmp_path, spa):
    # A model as the library writes it by default: nmt_nfkc, <unk> 0, <s> 1, </s> 2.
    stream = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(spa.sources[:2000]), model_writer=stream, vocab_size=300,
        minloglevel=2,
    )
    path = tmp_path / "en.model"
    path.write_bytes(stream.getvalue())
    config = from_mapping(DataConfig, {"source": {
        "level": "sentencepiece", "sentencepiece_model": "en.model", "normalization": None,
    }}, "data")
    tokenizer = learn_tokenizer(config.source, ["ignored"], base=tmp_path)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    own = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
           if not (processor.is_control(i) or processor.is_unknown(i))]
    assert tokenizer.vocabulary.tokens == list(RESERVED_TOKENS) + own
    lines = ["Tom is here.", "Ｆｕｌｌ width…"]
    assert pieces(tokenizer.tokenize(tf.constant(lines))) == [
        processor.encode(line, out_type=str) for line in lines
    ]
    # Its nmt_nfkc rule rewrites what it reads: its text, not the line, comes back.
    assert strings(tokenizer.decode(tokenizer.encode(tf.constant(lines)))) == [
        processor.decode(processor.encode(line)) for line in lines
    ]


def test_saved_beside_the_vocabulary_and_read_back(tmp_path, spa):
    tokenizer = learned(spa.sources[:2000], 500)
    tokenizer.save(tmp_path, "source")
    model_file = tmp_path / "source.sentencepiece.model"
    assert model_file.read_bytes() == tokenizer.sentencepiece_model
    again = Tokenizer.load(tmp_path, "source")
    lines = tf.constant(sample(spa.sources, 50))
    assert again.encode(lines).to_list() == tokenizer.encode(lines).to_list()

    model_file.write_bytes(b"not a model")
    with pytest.raises(DataError, match="source.sentencepiece.model is not a SentencePiece model"):
        Tokenizer.load(tmp_path, "source")
    learned(spa.targets[:2000], 500).save(tmp_path, "target")
    model_file.write_bytes((tmp_path / "target.sentencepiece.model").read_bytes())
    with pytest.raises(DataError, match="do not belong together"):
        Tokenizer.load(tmp_path, "source")
    model_file.unlink()
    with pytest.raises(DataError, match="source.sentencepiece.model is missing"):
        Tokenizer.load(tmp_path, "source")


@pytest.mark.parametrize(
    "side, message",
    [
        ({"level": "word", "sentencepiece_type": "bpe"}, "sentencepiece_type is for level sentencepiece"),
        ({"level": "sentencepiece", "sentencepiece_model": "a.model",
          "sentencepiece_type": "bpe"}, "has its own: remove sentencepiece_type"),
        ({"level": "sentencepiece", "vocab_size": None}, "give vocab_size"),
        ({"level": "subword", "sentencepiece_model": "a.model"}, "is for level sentencepiece"),
        ({"level": "sentencepiece", "sentencepiece_type": "wordpiece"}, "must be one of unigram, bpe"),
        ({"level": "sentencepiece", "joiner": "@@"}, "joiner is for level pretokenized"),
    ],
)
def test_settings_that_do_not_fit_are_refused_in_one_line(side, message):
    with pytest.raises(ConfigError, match=message) as error:
        from_mapping(DataConfig, {"source": side}, "data")
    assert "\n" not in str(error.value)


def test_a_missing_or_damaged_model_file_is_named(tmp_path):
    config = from_mapping(DataConfig, {
        "format": "tsv", "train": "pairs.tsv",
        "target": {"level": "sentencepiece", "sentencepiece_model": "models/en.model"},
    }, "data")
    (tmp_path / "pairs.tsv").write_text("a\tb\n", "utf-8")
    with pytest.raises(DataError, match=r"data.target.sentencepiece_model: no such file .*models/en.model"):
        data_paths(config, tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "en.model").write_bytes(b"\x00garbage")
    with pytest.raises(DataError, match=r"en.model is not a SentencePiece model.*data.target"):
        data_paths(config, tmp_path)


def test_a_vocabulary_below_sentencepieces_floor_says_how_many_pieces_it_needs():
    texts = ["hola que tal", "adiós amigo", "una casa grande"] * 50
    # Every character of the text a piece (the space as "▁"), beside the 256 byte pieces
    # of byte_fallback and the 4 reserved tokens.
    floor = len(set("".join(texts))) + 256 + 4
    with pytest.raises(DataError) as error:
        learned(texts, 100)
    assert str(error.value) == (
        "SentencePiece cannot learn a unigram model of vocab_size=100 from this text: it "
        f"needs at least {floor} pieces here (its 256 byte pieces, the 4 reserved tokens and "
        f"every character of the text); raise vocab_size to {floor} or more"
    )


def test_a_tokenizer_without_its_model_says_so():
    with pytest.raises(DataError, match="needs its model and vocabulary to tokenize"):
        Tokenizer("sentencepiece").tokenize(tf.constant(["hola"]))


def test_too_small_a_vocabulary_is_a_user_error(spa):
    with pytest.raises(DataError, match="SentencePiece cannot learn a unigram model of vocab_size=100"):
        learned(spa.sources[:500], 100)


def test_the_words_alignments_link_are_made_of_whole_pieces():
    from attncli.search.alignments import text_words, words

    def listed(found):
        return [(word.text, word.positions) for word in found]

    # "Die Katze 我." where 我 was never seen: a space piece, then its three UTF-8 bytes.
    tokens = ["\u2581Die", "\u2581Kat", "ze", "\u2581", "<0xE6>", "<0x88>", "<0x91>", ".", "[END]"]
    found = words(tokens, "sentencepiece")
    assert listed(found) == [("Die", [0]), ("Katze", [1, 2]), ("我.", [4, 5, 6, 7])]
    assert listed(text_words("Die Katze 我.", found)) == listed(found)
    bpe = ["Mach@@", "en", "Sie", "Haus@@", "tür", "[END]"]
    assert listed(words(bpe, "pretokenized")) == [
        ("Machen", [0, 1]), ("Sie", [2]), ("Haustür", [3, 4])
    ]


@pytest.mark.slow
def test_a_saved_model_runs_each_side_with_its_own_model(tmp_path, spa):
    import sys

    import process_watch

    source, target = learned(spa.sources[:2000], 400), learned(spa.targets[:2000], 400)
    module = tf.Module()
    module.trackables = source.trackables + target.trackables
    module.pieces = tf.function(
        lambda texts: (source.tokenize(texts).to_tensor(), target.tokenize(texts).to_tensor()),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    line = "¿Dónde está el baño? Where is the bathroom?"
    # A fresh process, as a server loads an export: tensorflow-text's own resources
    # were restored under one name there, and both sides ran the source's model.
    code = (
        "import sys, json, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "a, b = m.pieces(tf.constant([sys.argv[2]]))\n"
        "print(json.dumps([[p.decode() for p in t[0] if p] for t in (a.numpy(), b.numpy())]))\n"
    )
    result = process_watch.run([sys.executable, "-c", code, str(tmp_path / "saved"), line])
    assert result.returncode == 0, result.stderr
    import json

    expected = [
        sentencepiece.SentencePieceProcessor(model_proto=side.sentencepiece_model).encode(
            line, out_type=str) for side in (source, target)
    ]
    assert expected[0] != expected[1]
    assert json.loads(result.stdout.splitlines()[-1]) == expected


@pytest.mark.slow
def test_a_sentencepiece_run_trains_translates_and_refuses_a_missing_model(tmp_path, spa):
    from attncli_runs import TINY, attncli, succeeds

    overrides = []
    for side in ("source", "target"):
        overrides += ["--set", f"data.{side}.level=sentencepiece",
                      "--set", f"data.{side}.lowercase=false",
                      "--set", f"data.{side}.vocab_size=500"]
    succeeds(attncli("train", TINY, "--run-dir", "run", "--set", "training.epochs=1",
                     *overrides, cwd=tmp_path))
    run = tmp_path / "run"
    for directory in (run, run / "model"):
        for side in ("source", "target"):
            assert (directory / f"{side}.sentencepiece.model").is_file()
    lines = "Hola.\n¿Dónde  está el baño? 你好\n"
    result = succeeds(attncli("translate", "run", cwd=tmp_path, stdin=lines))
    assert len(result.stdout.splitlines()) == 2

    missing = attncli("train", TINY, "--run-dir", "other",
                      "--set", "data.target.level=sentencepiece",
                      "--set", "data.target.lowercase=false",
                      "--set", "data.target.sentencepiece_model=nowhere/en.model", cwd=tmp_path)
    assert "data.target.sentencepiece_model: no such file" in one_line_error(missing)
    assert "nowhere/en.model" in one_line_error(missing)

    # A resumed run names its own missing model as it names a missing vocabulary.
    (run / "source.sentencepiece.model").unlink()
    resumed = attncli("train", "--run-dir", "run", "--resume", "--set", "training.epochs=2",
                      cwd=tmp_path)
    error = one_line_error(resumed)
    assert "source.sentencepiece.model is missing" in error
    assert "cannot go on without the vocabularies it trained with" in error
