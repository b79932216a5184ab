import hashlib
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from shared_data import shared_data

from attncli.config.data import LEVELS
from attncli.data.levels import Level, registered, split_words
from attncli.data.readers import read_parallel, read_pronunciations, read_tsv
from attncli.errors import AttncliError
from attncli.data.text_rules import SPACE_TOKEN
from attncli.data.tokenization import LEVEL_CLASSES, TUTORIAL_NORMALIZATION, Tokenizer
from attncli.data.vocabulary import END, PAD, START, UNK

#: What each level gave before the levels became classes (`recorded_levels`).
LEVELS_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizer_levels.json"
#: Tokenizers read from files an earlier attncli wrote.
SAVED = {
    "demo": Path(__file__).resolve().parents[2] / "attncli" / "resources" / "models" / "demo",
    "run-0.1.0": Path(__file__).resolve().parents[1] / "fixtures" / "run-0.1.0" / "model",
}


def strings(tensor):
    return [value.decode("utf-8") for value in tensor.numpy()]


def token_lists(ragged):
    return [[token.decode("utf-8") for token in row] for row in ragged.to_list()]


@pytest.fixture(scope="module")
def spa():
    return read_tsv(shared_data("spa-eng/spa.txt"), limit=3000)


@pytest.fixture(scope="module")
def chinese():
    return read_tsv(shared_data("cmn-eng/cmn.txt"), limit=800).targets


def test_word_tokens_of_accented_spanish():
    tokens = Tokenizer("word").tokenize(tf.constant(["¿Dónde está el baño?", "¡Qué día!"]))
    assert token_lists(tokens) == [
        ["¿", "Dónde", "está", "el", "baño", "?"],
        ["¡", "Qué", "día", "!"],
    ]


def test_normalisation_options():
    decomposed = "Ca\u0301mara ÉL"  # "Cámara" with a combining acute accent
    texts = tf.constant([decomposed])
    assert strings(Tokenizer("word").normalize(texts)) == ["Cámara ÉL"]  # NFC composes
    assert strings(Tokenizer("word", normalization="NFD").normalize(texts)) == [
        unicodedata.normalize("NFD", decomposed)
    ]
    assert strings(Tokenizer("word", lowercase=True).normalize(texts)) == ["cámara él"]
    assert strings(Tokenizer("word", strip_accents=True).normalize(texts)) == ["Camara EL"]
    assert strings(Tokenizer("word", lowercase=True).normalize(tf.constant(["STRASSE ß"]))) == [
        "strasse ss"
    ]


def tutorial_reference(sentence):
    """The tutorial's steps, in Python: NFKD, lower case, keep a-z .?!,¿, split."""
    sentence = unicodedata.normalize("NFKD", sentence).lower()
    sentence = re.sub(r"[^ a-z.?!,¿]", "", sentence)
    return re.sub(r"([.?!,¿])", r" \1 ", sentence).split()


def test_tutorial_normalisation_matches_the_tutorial(spa):
    tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
    for texts in (spa.sources, spa.targets):
        tokens = token_lists(tokenizer.tokenize(tf.constant(texts)))
        assert tokens == [tutorial_reference(sentence) for sentence in texts]


def test_chinese_words_are_characters(chinese):
    tokens = token_lists(Tokenizer("word").tokenize(tf.constant(chinese)))
    for sentence, row in zip(chinese, tokens):
        han = [c for c in sentence if "\u4e00" <= c <= "\u9fff"]
        assert [t for t in row if "\u4e00" <= t[0] <= "\u9fff"] == han
        assert all(len(t) == 1 for t in row if "\u4e00" <= t[0] <= "\u9fff")


def test_char_level_has_one_token_per_character(spa, chinese):
    tokenizer = Tokenizer("char")
    texts = spa.targets[-200:] + chinese[:200]
    normalized = strings(tokenizer.normalize(tf.constant(texts)))
    tokens = token_lists(tokenizer.tokenize(tf.constant(texts)))
    assert tokens == [list(text.replace(" ", SPACE_TOKEN)) for text in normalized]
    assert strings(tokenizer.detokenize(tokenizer.tokenize(tf.constant(texts)))) == normalized


@pytest.mark.parametrize(
    "tokens, text",
    [
        ("hello , world .", "hello, world."),
        ("¿ dónde está ?", "¿dónde está?"),
        ("¡ qué bien !", "¡qué bien!"),
        ('he said , " hi . "', 'he said, "hi."'),
        ("i don ' t know", "i don't know"),
        ("it ' s 3 : 30 .", "it's 3:30."),
        ("it cost $ 30 .", "it cost $30."),
        ("a well - known ( old ) song", "a well-known (old) song"),
        ("我 爱 你 。", "我爱你。"),
        ("汤姆 是 DJ 吗 ？", "汤姆是DJ吗？"),
    ],
)
def test_detokenization_restores_written_spacing(tokens, text):
    ragged = tf.ragged.constant([tokens.split(" ")])
    assert strings(Tokenizer("word").detokenize(ragged)) == [text]


def round_trip_rate(tokenizer, texts):
    normalized = strings(tokenizer.normalize(tf.constant(texts)))
    restored = strings(tokenizer.detokenize(tokenizer.tokenize(tf.constant(texts))))
    return np.mean([a == b for a, b in zip(normalized, restored)])


def test_word_round_trips_on_real_text(spa, chinese):
    multi30k = read_parallel(
        shared_data("multi30k/train.de"), shared_data("multi30k/train.en"), limit=1000
    )
    tokenizer = Tokenizer("word")
    assert round_trip_rate(tokenizer, spa.sources) == 1.0
    assert round_trip_rate(tokenizer, spa.targets) == 1.0
    # The rest of these corpora: a few sentences have spaces before punctuation, or
    # none after a quote, that no rule can know about.
    assert round_trip_rate(tokenizer, chinese) >= 0.99
    assert round_trip_rate(tokenizer, multi30k.sources) >= 0.99
    assert round_trip_rate(tokenizer, multi30k.targets) >= 0.99


@pytest.fixture(scope="module")
def subword(spa):
    tokenizer = Tokenizer("subword", lowercase=True)
    return tokenizer.with_vocabulary(tokenizer.build_vocabulary(spa.targets[:1000], 400))


def test_subword_pieces_rebuild_the_words(subword, spa):
    texts = spa.targets[1000:1200]
    tokens = token_lists(subword.tokenize(tf.constant(texts)))
    words = token_lists(Tokenizer("word", lowercase=True).tokenize(tf.constant(texts)))
    assert any(token.startswith("##") for row in tokens for token in row)
    unknown = 0
    for row, word_row in zip(tokens, words):
        glued = " ".join(row).replace(" ##", "").split(" ")
        assert len(glued) == len(word_row)
        for piece_word, word in zip(glued, word_row):
            assert piece_word in (word, "[UNK]")  # a word with an unseen letter is unknown
            unknown += piece_word == "[UNK]"
    assert unknown == 0  # every character of the training text is in the vocabulary
    assert round_trip_rate(subword, texts) >= 0.98


def test_subword_vocabulary_is_deterministic_and_limited(subword, spa):
    again = Tokenizer("subword", lowercase=True).build_vocabulary(spa.targets[:1000], 400)
    assert again == subword.vocabulary
    assert len(subword.vocabulary) <= 400
    assert subword.vocabulary.tokens[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"]


def test_subword_on_chinese(chinese):
    tokenizer = Tokenizer("subword")
    vocabulary = tokenizer.build_vocabulary(chinese, 700)
    assert len(vocabulary) <= 700
    han_continuations = [
        token for token in vocabulary.tokens
        if token.startswith("##") and "\u4e00" <= token[2] <= "\u9fff"
    ]
    assert han_continuations == []  # a Chinese character is a word of its own
    tokenizer = tokenizer.with_vocabulary(vocabulary)
    ids = tokenizer.encode(tf.constant(chinese[:100]))
    assert round_trip_rate(tokenizer, chinese[:100]) >= 0.97
    assert strings(tokenizer.decode(ids)) == strings(
        tokenizer.detokenize(tokenizer.tokenize(tf.constant(chinese[:100])))
    )


def test_encode_decode_with_special_ids(spa):
    tokenizer = Tokenizer("word", lowercase=True)
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(spa.targets))
    ids = tokenizer.encode(tf.constant(["Hola, Tom.", "¿Qué zyxwv?"]))
    assert ids.dtype == tf.int32
    hola, coma, tom, punto = (tokenizer.vocabulary.id_of(t) for t in ("hola", ",", "tom", "."))
    assert ids.to_list()[0] == [hola, coma, tom, punto]
    assert ids.to_list()[1][2] == UNK
    dense = tf.constant([[START, hola, coma, tom, punto, END, tom, PAD], [hola, END, PAD, PAD,
                                                                         PAD, PAD, PAD, PAD]])
    assert strings(tokenizer.decode(dense)) == ["hola, tom.", "hola"]
    assert strings(tokenizer.decode(ids)) == ["hola, tom.", "¿qué [UNK]?"]


def test_grapheme_to_phoneme_levels():
    corpus = read_pronunciations(shared_data("cmudict/g014b2b.train"), limit=50)
    letters = Tokenizer("char").tokenize(tf.constant(corpus.sources))
    phonemes = Tokenizer("word").tokenize(tf.constant(corpus.targets))
    assert token_lists(letters) == [list(word) for word in corpus.sources]
    assert token_lists(phonemes) == [target.split(" ") for target in corpus.targets]


def test_save_and_load(tmp_path, spa):
    tokenizer = Tokenizer("word", normalization="NFKC", lowercase=True, strip_accents=True)
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(spa.sources, 300))
    tokenizer.save(tmp_path, "source")
    loaded = Tokenizer.load(tmp_path, "source")
    assert loaded.get_config() == tokenizer.get_config()
    assert loaded.vocabulary == tokenizer.vocabulary
    texts = tf.constant(spa.sources[:50])
    assert loaded.encode(texts).to_list() == tokenizer.encode(texts).to_list()


def test_tokenize_inside_tf_function(spa):
    tokenizer = Tokenizer("word")
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(spa.sources))
    encode = tf.function(lambda texts: tokenizer.encode(texts).to_tensor())
    assert encode(tf.constant(spa.sources[:5])).numpy().tolist() == (
        tokenizer.encode(tf.constant(spa.sources[:5])).to_tensor().numpy().tolist()
    )


def test_errors_are_user_errors():
    with pytest.raises(AttncliError, match="level"):
        Tokenizer("sentence")
    with pytest.raises(AttncliError, match="normalization"):
        Tokenizer("word", normalization="NFX")
    with pytest.raises(AttncliError, match="vocabulary"):
        Tokenizer("word").encode(tf.constant(["a"]))
    with pytest.raises(AttncliError, match="vocabulary"):
        Tokenizer("subword").tokenize(tf.constant(["a"]))
    with pytest.raises(AttncliError, match="max_size"):
        Tokenizer("subword").build_vocabulary(["a b"])


def test_small_subword_vocabulary_keeps_the_most_frequent_characters(chinese):
    tokenizer = Tokenizer("subword")
    vocabulary = tokenizer.build_vocabulary(chinese, 100)
    assert len(vocabulary) == 100
    counts = Counter(c for sentence in chinese for c in sentence if "\u4e00" <= c <= "\u9fff")
    kept = [c for c in counts if c in vocabulary.tokens]
    dropped = [c for c in counts if c not in vocabulary.tokens]
    assert kept and dropped
    assert min(counts[c] for c in kept) >= max(counts[c] for c in dropped)


def test_the_levels_registry_has_every_level_of_the_settings():
    assert sorted(LEVEL_CLASSES) == sorted(LEVELS)
    for name, level in LEVEL_CLASSES.items():
        assert issubclass(level, Level) and level.name == name


def test_a_new_level_is_one_registered_class():
    """docs/architecture.md: a level is a class marked `@registered` (and its name in
    `LEVELS` for configurations); the tokenizer finds it by name, nothing else changes."""

    @registered
    class ShoutedWordLevel(Level):
        name = "shouted-word"

        def split(self, normalized):
            return split_words(tf.strings.upper(normalized))

        def join(self, tokens):
            return tf.strings.reduce_join(tokens, axis=-1, separator=" ")

    try:
        tokenizer = Tokenizer("shouted-word")
        tokens = tokenizer.tokenize(tf.constant(["hola, mundo."]))
        assert tokens.to_list() == [[b"HOLA", b",", b"MUNDO", b"."]]
        assert tokenizer.detokenize(tokens).numpy().tolist() == [b"HOLA , MUNDO ."]
        with pytest.raises(ValueError, match="has a class already"):
            registered(type("Other", (Level,), {"name": "shouted-word"}))
    finally:
        del LEVEL_CLASSES["shouted-word"]
    with pytest.raises(AttncliError, match="tokenizer level must be one of"):
        Tokenizer("shouted-word")


def subword_nmt(tokenizer, texts):
    """The WordPiece pieces of `texts` written as subword-nmt's BPE (`Mach@@ en`)."""
    return [" ".join(row).replace(" ##", "@@ ") for row in token_lists(tokenizer.tokenize(
        tf.constant(texts)))]


@pytest.fixture(scope="module")
def levels(spa, chinese, subword):
    """A tokenizer of each level with the vocabulary it learned from real text (the
    `pretokenized` one from the subword tokenizer's pieces written as subword-nmt's),
    and held-out sentences: Hansards French and English, Tatoeba, Chinese, odd ones."""
    def learned(tokenizer, texts, size):
        return tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, max_size=size))

    sources, targets = list(spa.sources[:600]), list(spa.targets[:600])
    tokenizers = {
        "char": learned(Tokenizer("char"), sources + chinese[:150], 300),
        "word": learned(Tokenizer("word", lowercase=True), sources + targets + chinese[:150],
                        3000),
        "subword": subword,
        "sentencepiece": learned(Tokenizer("sentencepiece", sentencepiece_type="bpe"),
                                 sources, 500),
        "pretokenized": learned(Tokenizer("pretokenized", joiner="@@"),
                                subword_nmt(subword, spa.targets[:1000]), 1000),
    }
    held_out = []
    for name in ("test.fr", "test.en"):
        with open(shared_data(f"hansards-en-fr/{name}"), encoding="utf-8") as file:
            held_out += file.read().splitlines()[8:14]
    held_out += (list(spa.sources[2900:2906]) + list(spa.targets[2900:2906]) + chinese[700:706]
                 + ["", "  Ça  va ?\tOui. ", "ＡＢＣ ﬁ", "l'homme « qui » dit: 3:30 $30 don't",
                    "日本語のテキスト。", "\u00a0nbsp\u00a0here ", "e\u0301te\u0301"])
    return tokenizers, {level: subword_nmt(subword, held_out) if level == "pretokenized"
                        else held_out for level in tokenizers}


def ids_and_text(tokenizer, texts):
    ids = tokenizer.encode(tf.constant(texts))
    return {"ids": ids.to_list(), "text": strings(tokenizer.decode(ids))}


def recorded_levels(tokenizers, held_out, directory):
    """What each learned tokenizer (saved into `directory`: its vocabulary and settings)
    and each tokenizer of `SAVED` does with the held-out sentences. It wrote
    `LEVELS_FIXTURE` at commit 50f99ad, when one `Tokenizer` class switched on its level."""
    result = {}
    for level, tokenizer in tokenizers.items():
        tokenizer.save(directory, level)
        tokens = "\n".join(tokenizer.vocabulary.tokens)
        result[level] = {
            "vocabulary": hashlib.sha256(tokens.encode("utf-8")).hexdigest(),
            "settings": (directory / f"{level}.tokenizer.json").read_text("utf-8"),
            **ids_and_text(tokenizer, held_out[level]),
        }
    for name, saved in SAVED.items():
        for side in ("source", "target"):
            result[f"{name}/{side}"] = ids_and_text(Tokenizer.load(saved, side), held_out["word"])
    return result


def test_every_level_gives_the_ids_text_and_files_it_gave(levels, tmp_path):
    tokenizers, held_out = levels
    recorded = json.loads(LEVELS_FIXTURE.read_text("utf-8"))
    assert recorded_levels(tokenizers, held_out, tmp_path) == recorded
    for level, tokenizer in tokenizers.items():
        again = Tokenizer.load(tmp_path, level)
        assert again.get_config() == tokenizer.get_config()
        assert ids_and_text(again, held_out[level]) == {
            key: recorded[level][key] for key in ("ids", "text")}
    assert (tmp_path / "sentencepiece.sentencepiece.model").read_bytes() == (
        tokenizers["sentencepiece"].sentencepiece_model)
