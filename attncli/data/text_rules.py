"""The strings and patterns a tokenizer's text follows, written once for both of attncli's
tokenizers: `attncli.data.tokenization.Tokenizer`'s levels run them with tensorflow-text (RE2),
`attncli.export.plain_tokenizer.PlainTokenizer` with the `regex` module, without
TensorFlow (an exported model's). Nothing here imports TensorFlow.

    RESERVED_TOKENS     the first four tokens of every vocabulary, ids 0 to 3
    SPACE_TOKEN         a space at the `char` level; starts a SentencePiece piece
    SUFFIX_INDICATOR    a WordPiece piece continuing the previous one
    WORD_DELIMITERS     where words split (RE2 syntax); KEPT_DELIMITERS those kept as words
    DETOKENIZE_RULES    (pattern, rewrite) applied in order to the space-joined tokens:
                        no space before closing punctuation or after opening, none inside
                        "don't", "3.5", quotes, or between Han and kana characters
"""

PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN = "[PAD]", "[UNK]", "[START]", "[END]"
RESERVED_TOKENS = (PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN)

#: Stands for a space at the `char` level, and starts a SentencePiece piece after a space.
SPACE_TOKEN = "\u2581"
#: Marks a WordPiece piece that continues the previous one.
SUFFIX_INDICATOR = "##"

KANA_HAN = r"\p{Han}\p{Hiragana}\p{Katakana}"
WORD_DELIMITERS = rf"\s+|[\p{{P}}\p{{S}}]|[{KANA_HAN}]"
KEPT_DELIMITERS = rf"[\p{{P}}\p{{S}}]|[{KANA_HAN}]"
_CLOSING = r".,!?;:%)\]}»…。，、！？；：）」』"
_OPENING = r"¿¡(\[{«（「『$£€"
_CJK_PUNCTUATION = r"。，、！？；：）」』（「『"

DETOKENIZE_RULES = (
    (rf" ([{_CLOSING}])", r"\1"),
    (rf"([{_OPENING}]) ", r"\1"),
    (r"([\pL\pN]) ([-'’/]) ([\pL\pN])", r"\1\2\3"),
    (r"(\d)([.,:]) (\d)", r"\1\2\3"),
    (r'"\s([^"]*?)\s"', r'"\1"'),
    (r"“\s([^”]*?)\s”", r"“\1”"),
    (r"„\s([^“]*?)\s“", r"„\1“"),
    (rf"([{KANA_HAN}{_CJK_PUNCTUATION}]) ", r"\1"),
    (rf" ([{KANA_HAN}{_CJK_PUNCTUATION}])", r"\1"),
)
