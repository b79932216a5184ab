"""A run's tokenizer files read and run without TensorFlow, for exported models.

`attncli.data.tokenization.Tokenizer` normalises and splits text with tensorflow-text
ops; importing TensorFlow takes seconds, longer than a CTranslate2 model takes to load and
translate a sentence. `PlainTokenizer` reads the same `NAME.tokenizer.json`,
`NAME.vocab.txt` (and `NAME.sentencepiece.model`) and does the same steps in Python:

    case folding       text.case_fold_utf8 (ICU's NFKC_Casefold): NFKC, full case
                       folding, default-ignorable code points removed, NFKC again
    strip_accents      NFKD, then every \\p{Mn} removed
    normalization      unicodedata.normalize
    drop_pattern       the same pattern, run by the `regex` module (RE2's syntax for the
                       classes attncli's configs use; an export checks the tokens agree)
    spaces             runs of [\\t\\n\\f\\r ] (RE2's \\s) to one space, ASCII ends stripped
    word split         the same delimiters and kept delimiters as `Tokenizer.split_words`
    subword            WordPiece greedy longest-match-first (`##` continues a word, a word
                       with no split or longer than 100 bytes is [UNK]), as
                       FastWordpieceTokenizer gives
    sentencepiece      the `sentencepiece` library on the same model
    detokenization     the same rewrite rules, in the same order

Unicode tables differ between Python's `unicodedata` and the ICU inside tensorflow-text for
characters newer than either, so the export checks that both tokenizers give the same
tokens on its sample sentences, and tests check it on the validation sentences of real
corpora.
"""

import json
import unicodedata
from pathlib import Path

import regex

from attncli.config.data import BPE_JOINER
from attncli.data.sentencepiece_models import sentencepiece_file
from attncli.data.text_rules import (
    DETOKENIZE_RULES, KEPT_DELIMITERS, SPACE_TOKEN, SUFFIX_INDICATOR, UNK_TOKEN,
    WORD_DELIMITERS,
)
from attncli.errors import DataError

MAX_BYTES_PER_WORD = 100  # FastWordpieceTokenizer's default: a longer word is [UNK]

# RE2's \s, and the whitespace tf.strings.strip and tf.strings.split take.
_RE2_SPACE = r"[\t\n\f\r ]"
_ASCII_SPACE = " \t\n\v\f\r"
# `attncli.data.text_rules`' patterns, with RE2's ASCII \s spelt out.
_WORD_DELIMITERS = regex.compile(WORD_DELIMITERS.replace(r"\s", _RE2_SPACE))
_KEPT_DELIMITERS = regex.compile(KEPT_DELIMITERS)
_DETOKENIZE_RULES = tuple((regex.compile(pattern.replace(r"\s", _RE2_SPACE)), rewrite)
                          for pattern, rewrite in DETOKENIZE_RULES)
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
_MARKS = regex.compile(r"\p{Mn}")
_SPACES = regex.compile(rf"{_RE2_SPACE}+")


def case_fold(text):
    """ICU's NFKC_Casefold, as `text.case_fold_utf8` applies it."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return unicodedata.normalize("NFKC", _IGNORABLE.sub("", folded))


class PlainTokenizer:
    """The tokenizer saved as `NAME.tokenizer.json` and `NAME.vocab.txt` in a directory,
    in Python without TensorFlow: what `Tokenizer.tokenize` and `Tokenizer.detokenize`
    give, one sentence at a time (see the module).

    Args:
        config: the dict of `NAME.tokenizer.json` (`Tokenizer.get_config()`).
        tokens: the vocabulary, in id order.
        sentencepiece_model: bytes of the SentencePiece model (that level only), or None.
    """

    def __init__(self, config, tokens, sentencepiece_model=None):
        self.level = config["level"]
        self.normalization = config["normalization"]
        self.lowercase = config["lowercase"]
        self.strip_accents = config["strip_accents"]
        self.joiner = config.get("joiner")
        self.drop_pattern = (None if config["drop_pattern"] is None
                             else regex.compile(config["drop_pattern"]))
        self.tokens = list(tokens)
        self.vocabulary = set(self.tokens)
        self._sentencepiece = None
        if self.level == "sentencepiece":
            import sentencepiece

            self._sentencepiece = sentencepiece.SentencePieceProcessor(
                model_proto=sentencepiece_model)

    @classmethod
    def load(cls, directory, name):
        """Reads `NAME.tokenizer.json`, `NAME.vocab.txt` (and the SentencePiece model)."""
        directory = Path(directory)
        try:
            config = json.loads((directory / f"{name}.tokenizer.json").read_text("utf-8"))
            content = (directory / f"{name}.vocab.txt").read_text("utf-8")
            model = None
            if config.get("level") == "sentencepiece":
                model = (directory / sentencepiece_file(name)).read_bytes()
        except (OSError, ValueError) as error:
            raise DataError(f"cannot read the {name} tokenizer of {directory} ({error}); "
                            "export the run again") from None
        tokens = content.split("\n")[:-1] if content.endswith("\n") else content.split("\n")
        return cls(config, tokens, model)

    def normalize(self, text):
        """The normalised text, as `Tokenizer.normalize`."""
        if self.lowercase:
            text = case_fold(text)
        if self.strip_accents:
            text = _MARKS.sub("", unicodedata.normalize("NFKD", text))
        if self.normalization is not None:
            text = unicodedata.normalize(self.normalization, text)
        if self.drop_pattern is not None:
            text = self.drop_pattern.sub("", text)
        if self.level != "sentencepiece":
            text = _SPACES.sub(" ", text)
        return text.strip(_ASCII_SPACE)

    def tokenize(self, text):
        """The tokens of one sentence, a list of strings."""
        normalized = self.normalize(text)
        if self.level == "char":
            return list(normalized.replace(" ", SPACE_TOKEN))
        if self.level == "pretokenized":
            return normalized.split()
        if self.level == "sentencepiece":
            return self._sentencepiece.encode(normalized, out_type=str)
        words = split_words(normalized)
        if self.level == "word":
            return words
        return [piece for word in words for piece in self.wordpieces(word)]

    def wordpieces(self, word):
        """WordPiece's greedy longest-match-first pieces of one word (Wu et al. 2016;
        Devlin et al. 2019), `[UNK]` alone when the word cannot be cut into pieces of
        the vocabulary."""
        if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
            return [UNK_TOKEN]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else SUFFIX_INDICATOR + word[start:end]
                if piece in self.vocabulary:
                    break
                end -= 1
            if end == start:
                return [UNK_TOKEN]
            pieces.append(piece)
            start = end
        return pieces

    def detokenize(self, tokens):
        """Readable text from a list of tokens, as `Tokenizer.detokenize`."""
        if self.level == "char":
            return "".join(tokens).replace(SPACE_TOKEN, " ")
        if self.level == "sentencepiece":
            return self._sentencepiece.decode_pieces(list(tokens))
        if self.level == "pretokenized":
            return join_pieces(tokens, self.joiner)
        joined = " ".join(tokens)
        if self.level == "subword":
            joined = joined.replace(" " + SUFFIX_INDICATOR, "")
        for pattern, rewrite in _DETOKENIZE_RULES:
            joined = pattern.sub(rewrite, joined)
        return joined


def split_words(normalized):
    """`text.regex_split` with `Tokenizer`'s delimiters: split at whitespace, every
    punctuation mark or symbol and every Han, Hiragana and Katakana character, keeping
    the latter two as tokens."""
    words, start = [], 0
    for match in _WORD_DELIMITERS.finditer(normalized):
        if match.start() > start:
            words.append(normalized[start : match.start()])
        if _KEPT_DELIMITERS.fullmatch(match.group()):
            words.append(match.group())
        start = match.end()
    if start < len(normalized):
        words.append(normalized[start:])
    return words


def join_pieces(pieces, joiner):
    """Text of `pretokenized` pieces, by `joiner`'s convention (`attncli.data.levels.PretokenizedLevel.join`)."""
    if joiner == SPACE_TOKEN:
        return "".join(pieces).replace(SPACE_TOKEN, " ").removeprefix(" ")
    joined = " ".join(pieces)
    if joiner == BPE_JOINER:
        joined = regex.sub("@@ |@@$", "", joined)
    return joined
