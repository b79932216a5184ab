"""Word alignments from attention weights, and unknown words replaced by source words.

`attncli translate --alignments` prints, for each translation, one link `i-j` per target
word (the Pharaoh format of fast_align and OpenNMT-py's `-report_align`): source word
`i` and target word `j`, both counted from 0, over WORDS, not over the model's tokens.

Words. A translation's words are the whitespace-separated words of its text as printed
(detokenized: `Don't`, `hungry.`), so `j` counts what a user sees. A source's words,
and the pieces of each target word, are its tokens grouped as its tokenizer made them:

- `word` level: every token is a word (punctuation marks are words of their own, as the
  tokenizer splits them).
- `subword` level: a WordPiece piece marked `##` continues the word before it.
- `char` level: the space token `▁` separates words and belongs to none.
- `sentencepiece` and `pretokenized` levels: a piece that begins with `▁` begins a word
  (a piece `▁` alone is a space and belongs to none), and in a sentence written with
  `▁` marks the other pieces continue the word before them; a piece that ends with `@@`
  (subword-nmt) is continued by the next. Byte pieces (`<0xE6>`) spell their character.

`[END]` (and the other reserved tokens but `[UNK]`) belong to no word: the attention of
the end-of-sentence step and the attention paid to a source's end token are left out.
A word of the text is made of the tokenizer's words it holds (`Don't` of `Don`, `'`,
`t`): the detokenizer only removes spaces, so these words, read in order, spell the
text's words (`text_words`). Its pieces are those of them with a letter or digit
(`Don`, `t`; `hungry` of `hungry.`), so a punctuation mark glued to a word does not
pull its link to the source's punctuation; a word of punctuation alone keeps its own.

The rule. With `W` the attention weights `(target tokens, source tokens)` of one
translation, target word `j` made of the pieces `T_j` and source word `i` of the pieces
`S_i`, the word weights are

    A[j, i] = (1 / |T_j|) * sum_{t in T_j} sum_{s in S_i} W[t, s]

(summed over the source pieces of a word: the weight the word received; averaged over
the target pieces: each piece of a word votes alike), and target word `j` is linked to
`argmax_i A[j, i]` (the lowest `i` on a tie). Each target word gets exactly one link;
the links are listed in target order.

The weights are those the search kept for each emitted token (`Hypothesis.weights`): the
recurrent decoders' attention, and for a self-attention decoder its last block's
cross-attention averaged over the heads.

`replace_unknown_words` is the copy step of Luong et al. 2015 ("Addressing the rare word
problem in neural machine translation"): each `[UNK]` the model emitted becomes the
source word it is linked to. It applies to word-level targets, where `[UNK]` stands for
a whole word.
"""

import re
from typing import NamedTuple

import numpy as np

from attncli.config.data import BPE_JOINER
from attncli.data.text_rules import RESERVED_TOKENS, SPACE_TOKEN, SUFFIX_INDICATOR, UNK_TOKEN

#: Tokens that belong to no word ([UNK] is a word the model could not name).
_NOT_WORDS = frozenset(RESERVED_TOKENS) - {UNK_TOKEN}


class Word(NamedTuple):
    """A word of a sentence: its text and the positions of its tokens."""

    text: str
    positions: list


class WordAlignment(NamedTuple):
    """The hard word alignment of one translation.

    Attributes:
        source_words: list of `Word` of the source, as the model read it.
        target_words: list of `Word` of the translation.
        links: list of `(i, j)`: source word `i` for target word `j`, in target order.
    """

    source_words: list
    target_words: list
    links: list

    def pharaoh(self):
        """The links as `"i-j i-j ..."` (source first, 0-based)."""
        return " ".join(f"{i}-{j}" for i, j in self.links)


def words(tokens, level):
    """The words of `tokens` (a list of str) at tokenizer level `level`, in order.

    Args:
        tokens: the tokens of a sentence, as the tokenizer gave them.
        level: `"word"`, `"subword"`, `"char"`, `"sentencepiece"` or `"pretokenized"`.

    Returns:
        list of `Word`: each word's text (pieces glued, `##` dropped) and its token
        positions. Reserved tokens but `[UNK]`, and `▁` at the char level, are in none.
    """
    if level in ("sentencepiece", "pretokenized"):
        return _piece_words(tokens)
    result = []
    joins = False  # whether the next token may continue the last word
    for position, token in enumerate(tokens):
        if token in _NOT_WORDS or (level == "char" and token == SPACE_TOKEN):
            joins = False
            continue
        continues = joins and (
            level == "char"
            or (level == "subword" and token.startswith(SUFFIX_INDICATOR))
        )
        if continues:
            text, positions = result[-1]
            result[-1] = Word(text + token.removeprefix(SUFFIX_INDICATOR), positions + [position])
        else:
            result.append(Word(token, [position]))
        joins = level in ("char", "subword")
    return result


def _piece_words(tokens):
    """`words` of SentencePiece or pretokenized pieces (see the module)."""
    marked = any(token.startswith(SPACE_TOKEN) for token in tokens)
    spelt, result = [], []  # each word's bytes, and the word with its positions
    joins = False  # whether the next piece continues the last word
    for position, token in enumerate(tokens):
        if token in _NOT_WORDS or token == SPACE_TOKEN:
            joins = False
            continue
        byte = re.fullmatch(r"<0x([0-9A-F]{2})>", token)
        piece = (bytes([int(byte.group(1), 16)]) if byte
                 else token.removeprefix(SPACE_TOKEN).removesuffix(BPE_JOINER).encode())
        if joins and not token.startswith(SPACE_TOKEN):
            spelt[-1] += piece
            result[-1].positions.append(position)
        else:
            spelt.append(piece)
            result.append(Word("", [position]))
        joins = marked or token.endswith(BPE_JOINER)
    return [Word(text.decode("utf-8", "replace"), word.positions)
            for text, word in zip(spelt, result)]


def text_words(text, token_words):
    """The whitespace-separated words of `text`, each with the token positions of the
    `token_words` (list of `Word`, in order) whose characters it holds: of those with a
    letter or digit when it has any, else of all.

    The detokenizer only removes spaces, so the token words spell the text's words in
    order: each token word belongs to the text word in which its first character falls.
    """
    spans, end = [], 0
    for word in text.split():
        end += len(word)
        spans.append((word, end))
    result = [Word(word, []) for word, _ in spans]
    if not result:
        return result
    held = [[] for _ in result]
    start, m = 0, 0
    for token_word in token_words:
        while m < len(spans) - 1 and start >= spans[m][1]:
            m += 1
        held[m].append(token_word)
        start += len(token_word.text)
    for word, token_words_in_it in zip(result, held):
        voting = [w for w in token_words_in_it if any(map(str.isalnum, w.text))]
        for token_word in voting or token_words_in_it:
            word.positions.extend(token_word.positions)
    # A word the tokens did not reach (were text and tokens to disagree) keeps no
    # position, and gets no link.
    return result


def word_weights(weights, source_words, target_words):
    """The word-level weights `A` `(len(target_words), len(source_words))` of token
    weights `(target tokens, source tokens)`: summed over each source word's pieces,
    averaged over each target word's pieces (the rule of the module).

    As matrices, `A = M_t W M_s`, with `M_s[s, i] = 1` if token `s` is in source word
    `i` and `M_t[j, t] = 1 / |T_j|` if token `t` is in target word `j`.
    """
    weights = np.asarray(weights, dtype="float64")
    sums = np.zeros((weights.shape[1], len(source_words)))
    for i, word in enumerate(source_words):
        sums[word.positions, i] = 1.0
    means = np.zeros((len(target_words), weights.shape[0]))
    for j, word in enumerate(target_words):
        if word.positions:
            means[j, word.positions] = 1.0 / len(word.positions)
    return means @ weights @ sums


def align(source_tokens, target_tokens, weights, source_level, target_level, text=None):
    """The `WordAlignment` of one translation.

    Args:
        source_tokens: list of str, the source as the model read it.
        target_tokens: list of str, the emitted tokens (`[END]` last if emitted).
        weights: array `(len(target_tokens), len(source_tokens))`, the attention over
            the source when each target token was emitted.
        source_level, target_level: the tokenizer levels of the two sides.
        text: str or None, the translation as printed; its whitespace-separated words
            are the target words (`text_words`). None: the tokenizer's words.
    """
    source_words = words(source_tokens, source_level)
    target_words = words(target_tokens, target_level)
    if text is not None:
        target_words = text_words(text, target_words)
    links = []
    if source_words:
        scores = word_weights(weights, source_words, target_words)
        links = [(int(np.argmax(row)), j) for j, row in enumerate(scores)
                 if target_words[j].positions]
    return WordAlignment(source_words, target_words, links)


def replace_unknown_words(target_tokens, alignment):
    """`target_tokens` with each `[UNK]` replaced by the text of the source word its
    target word is linked to (unchanged where it has no link: an empty source).

    Meant for word-level targets, where `[UNK]` is a word of its own.
    """
    source_of = dict((j, i) for i, j in alignment.links)
    tokens = list(target_tokens)
    for j, word in enumerate(alignment.target_words):
        if word.text == UNK_TOKEN and j in source_of:
            [position] = word.positions
            tokens[position] = alignment.source_words[source_of[j]].text
    return tokens


def align_translation(translation, source_level, target_level, detokenize=None):
    """The alignment of each hypothesis of a `Translation`, `[UNK]`s replaced if asked.

    Args:
        translation: an `attncli.search.translation.Translation` whose hypotheses carry
            their attention weights.
        source_level, target_level: the tokenizer levels of the two sides.
        detokenize: None, or a function from a list of target tokens to text; then each
            `[UNK]` is replaced (`replace_unknown_words`) and the text made again.

    Returns:
        `(translation, alignments)`: the translation (its hypotheses' tokens and text
        with the replacements), and one `WordAlignment` per hypothesis.
    """
    hypotheses, alignments = [], []
    for hypothesis in translation.hypotheses:
        if detokenize is not None and UNK_TOKEN in hypothesis.tokens:
            # Replaced on the tokenizer's words, where an [UNK] is a word of its own.
            by_token = align(translation.source_tokens, hypothesis.tokens,
                             hypothesis.weights, source_level, target_level)
            tokens = replace_unknown_words(hypothesis.tokens, by_token)
            shown = [token for token in tokens if token not in _NOT_WORDS]
            hypothesis = hypothesis._replace(tokens=tokens, text=detokenize(shown))
        # Over the words of the text as printed (with the replacements, if any).
        alignment = align(translation.source_tokens, hypothesis.tokens, hypothesis.weights,
                          source_level, target_level, hypothesis.text)
        hypotheses.append(hypothesis)
        alignments.append(alignment)
    return translation._replace(hypotheses=hypotheses), alignments
