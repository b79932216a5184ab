"""Word alignments from attention weights (`attncli.search.alignments`), on weights built
by hand where the answer is known, and against a NumPy reference of the rule:

    A[j, i] = mean over the pieces t of target word j of (sum over the pieces s of
              source word i of W[t, s]);   link of target word j = argmax_i A[j, i]
"""

import numpy as np
import pytest

from attncli.search.alignments import (
    align,
    align_translation,
    replace_unknown_words,
    text_words,
    word_weights,
    words,
)
from attncli.search.translation import Hypothesis, Translation


def reference_word_weights(weights, source_groups, target_groups):
    """The rule written out with loops: `groups` are lists of token positions."""
    result = np.zeros((len(target_groups), len(source_groups)))
    for j, target_positions in enumerate(target_groups):
        for i, source_positions in enumerate(source_groups):
            total = 0.0
            for t in target_positions:
                for s in source_positions:
                    total += weights[t][s]
            result[j, i] = total / len(target_positions)
    return result


def test_words_of_each_level():
    assert [(w.text, w.positions) for w in words(["hola", ",", "tom", "[END]"], "word")] == [
        ("hola", [0]), (",", [1]), ("tom", [2])]
    pieces = ["un", "##believ", "##able", "cat", "##s", ".", "[END]"]
    assert [(w.text, w.positions) for w in words(pieces, "subword")] == [
        ("unbelievable", [0, 1, 2]), ("cats", [3, 4]), (".", [5])]
    chars = ["h", "i", "▁", "y", "o", "u", "[END]"]
    assert [(w.text, w.positions) for w in words(chars, "char")] == [
        ("hi", [0, 1]), ("you", [3, 4, 5])]
    # [UNK] is a word; a continuation piece after the end token starts a word.
    assert [w.text for w in words(["[UNK]", "x", "[END]", "##y"], "subword")] == [
        "[UNK]", "x", "##y"]


def test_word_weights_match_the_reference_on_random_pieces():
    rng = np.random.default_rng(0)
    source = ["das", "Ha", "##us", "ist", "kl", "##e", "##in", ".", "[END]"]
    target = ["the", "ho", "##use", "is", "small", ".", "[END]"]
    weights = rng.dirichlet(np.ones(len(source)), size=len(target))
    source_words, target_words = words(source, "subword"), words(target, "subword")
    expected = reference_word_weights(
        weights, [[0], [1, 2], [3], [4, 5, 6], [7]], [[0], [1, 2], [3], [4], [5]])
    np.testing.assert_allclose(word_weights(weights, source_words, target_words), expected,
                               rtol=1e-12)


def test_hand_checked_subword_sentence():
    # Source words: das(0) Haus(1: Ha ##us) ist(2) klein(3); [END] is no word.
    source = ["das", "Ha", "##us", "ist", "klein", "[END]"]
    # Target words: the(0) house(1: ho ##use) is(2) small(3).
    target = ["the", "ho", "##use", "is", "small", "[END]"]
    weights = np.array([
        # das  Ha    ##us  ist   klein [END]
        [0.40, 0.30, 0.30, 0.00, 0.00, 0.00],  # the: token argmax das, word argmax Haus
        [0.45, 0.35, 0.20, 0.00, 0.00, 0.00],  # ho  } averaged: das 0.45, Haus 0.55
        [0.45, 0.10, 0.45, 0.00, 0.00, 0.00],  # ##use}
        [0.00, 0.00, 0.00, 0.30, 0.20, 0.50],  # is: [END] left out, ist wins
        [0.00, 0.00, 0.00, 0.50, 0.50, 0.00],  # small: a tie goes to the lower index
        [0.00, 0.00, 0.00, 0.00, 0.00, 1.00],  # [END] row: no word
    ])
    alignment = align(source, target, weights, "subword", "subword")
    assert [w.text for w in alignment.source_words] == ["das", "Haus", "ist", "klein"]
    assert [w.text for w in alignment.target_words] == ["the", "house", "is", "small"]
    assert alignment.links == [(1, 0), (1, 1), (2, 2), (2, 3)]
    assert alignment.pharaoh() == "1-0 1-1 2-2 2-3"


def test_an_empty_source_has_no_links():
    alignment = align([], ["a", "[END]"], np.zeros((2, 0)), "word", "word")
    assert alignment.links == [] and alignment.pharaoh() == ""


def test_replace_unknown_words_copies_the_most_attended_source_word():
    source = ["ich", "sah", "zaphod", "und", "trillian", "."]
    target = ["i", "saw", "[UNK]", "and", "[UNK]", ".", "[END]"]
    weights = np.full((7, 6), 0.02)
    for t, s in enumerate([0, 1, 2, 3, 4, 5, 5]):
        weights[t, s] = 0.9
    alignment = align(source, target, weights, "word", "word")
    assert replace_unknown_words(target, alignment) == [
        "i", "saw", "zaphod", "and", "trillian", ".", "[END]"]

    hypothesis = Hypothesis("i saw [UNK] and [UNK].", target, -1.0, weights)
    translation = Translation("Ich sah Zaphod und Trillian.", source, [hypothesis])
    replaced, [alignment] = align_translation(
        translation, "word", "word",
        detokenize=lambda tokens: " ".join(tokens).replace(" .", "."))
    assert replaced.hypotheses[0].text == "i saw zaphod and trillian."
    # The words of the text as printed: the full stop is part of the last one.
    assert [w.text for w in alignment.target_words] == [
        "i", "saw", "zaphod", "and", "trillian."]
    assert alignment.pharaoh() == "0-0 1-1 2-2 3-3 4-4"
    # Without detokenize the [UNK]s stay.
    kept, _ = align_translation(translation, "word", "word")
    assert kept.hypotheses[0].text == "i saw [UNK] and [UNK]."


def test_a_subword_source_word_is_copied_whole():
    source = ["zap", "##hod", "!"]
    target = ["[UNK]", "!", "[END]"]
    weights = np.array([[0.3, 0.3, 0.4], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    alignment = align(source, target, weights, "subword", "word")
    assert replace_unknown_words(target, alignment) == ["zaphod", "!", "[END]"]


@pytest.mark.parametrize("level", ["word", "subword", "char"])
def test_every_target_word_gets_one_link_in_range(level):
    rng = np.random.default_rng(1)
    tokens = {"word": ["a", "b", ",", "c"], "subword": ["a", "##b", "c", "##d"],
              "char": ["a", "▁", "b", "c"]}[level]
    weights = rng.dirichlet(np.ones(4), size=5)
    alignment = align(tokens, tokens + ["[END]"], weights, level, level)
    count = len(words(tokens, level))
    assert [j for _, j in alignment.links] == list(range(count))
    assert all(0 <= i < count for i, _ in alignment.links)


def test_target_words_are_the_printed_texts_words():
    # "I'm hungry." detokenized from the word-level tokens I ' m hungry . [END]
    source = ["tengo", "hambre", ".", "[END]"]
    target = ["I", "'", "m", "hungry", ".", "[END]"]
    weights = np.array([
        # tengo hambre  .     [END]
        [0.70, 0.10, 0.10, 0.10],  # I      } I'm: I and m vote (tengo 0.60),
        [0.10, 0.10, 0.70, 0.10],  # '      } the apostrophe does not
        [0.50, 0.30, 0.10, 0.10],  # m      }
        [0.10, 0.60, 0.20, 0.10],  # hungry } hungry.: hungry votes (hambre 0.60),
        [0.10, 0.10, 0.70, 0.10],  # .      } the full stop does not
        [0.00, 0.00, 0.00, 1.00],  # [END]: no word
    ])
    alignment = align(source, target, weights, "word", "word", text="I'm hungry.")
    assert [(w.text, w.positions) for w in alignment.target_words] == [
        ("I'm", [0, 2]), ("hungry.", [3])]
    assert alignment.pharaoh() == "0-0 1-1"
    # A word of punctuation alone keeps its own pieces.
    alignment = align(source, target, weights, "word", "word", text="I'm hungry .")
    assert [w.positions for w in alignment.target_words] == [[0, 2], [3], [4]]
    assert alignment.pharaoh() == "0-0 1-1 2-2"


@pytest.mark.parametrize("level, tokens, text, positions", [
    ("subword", ["¿", "Dó", "##nde", "está", "?"], "¿Dónde está?", [[1, 2], [3]]),
    ("word", ["don", "'", "t", "go", "-", "now", "[UNK]", "!"], "don't go - now [UNK]!",
     [[0, 2], [3], [4], [5], [6]]),
    # At the character level a word is one token word, its marks included.
    ("char", ["o", "k", "▁", "y", "e", "s", "."], "ok yes.", [[0, 1], [3, 4, 5, 6]]),
])
def test_text_words_hold_the_tokens_that_spell_them(level, tokens, text, positions):
    found = text_words(text, words(tokens, level))
    assert [word.text for word in found] == text.split()
    assert [word.positions for word in found] == positions
