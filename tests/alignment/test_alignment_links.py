"""Links read off the attention over a given translation (`attncli.alignment.extraction`),
against a NumPy reference written from the rule (Luong et al. 2015's argmax; Chen et al.
2020's shift), on hand-built piece matrices; and forced attention over a model's own
search output equal to the search's.
"""

import numpy as np
import pytest
from attncli_runs import trained  # noqa: F401 (a fixture)

from attncli.alignment.extraction import (
    EXTRACTIONS, AttentionChoice, ChoiceError, Extraction, FoldingError, forced_links,
    token_weights, word_attention,
)
from attncli.search.forced import Forced

# A subword pair: the source ends with [END] (source_end), "house ." keeps its "." a word
# of its own (a space before it), "maison." does not ("." is glued: it does not vote).
SOURCE = "the little house ."
SOURCE_TOKENS = ["the", "lit", "##tle", "hou", "##se", ".", "[END]"]
SOURCE_PIECES = [[0], [1, 2], [3, 4], [5]]  # each word's tokens, by hand
TARGET = "la petite maison."
TARGET_TOKENS = ["la", "pe", "##tite", "mai", "##son", ".", "[END]"]
TARGET_PIECES = [[0], [1, 2], [3, 4]]


def attention(rng, layers, heads, rows, columns):
    """Cross-attention per layer `(heads, rows, columns)`, each row a distribution."""
    result = []
    for _ in range(layers):
        scores = rng.normal(size=(heads, rows, columns)) * 2
        weights = np.exp(scores)
        result.append(weights / weights.sum(axis=-1, keepdims=True))
    return result


def forced(source, source_tokens, target, target_tokens, layers):
    return Forced(source, source_tokens, target, target_tokens,
                  np.zeros(len(target_tokens)), 0.0, {"cross": layers})


@pytest.fixture
def pair():
    rng = np.random.default_rng(43)
    layers = attention(rng, 2, 3, len(TARGET_TOKENS), len(SOURCE_TOKENS))
    return forced(SOURCE, SOURCE_TOKENS, TARGET, TARGET_TOKENS, layers)


def reference_words(layers, layer, head, shift, source_pieces, target_pieces):
    """A[j, i] = mean_{t in T_j} sum_{s in S_i} W[t, s], W the chosen (and shifted)
    attention, written with loops from the rule."""
    chosen = layers[-1 if layer is None else layer - 1]
    token = chosen.mean(axis=0) if head is None else chosen[head - 1]
    result = np.zeros((len(target_pieces), len(source_pieces)))
    for j, target_tokens in enumerate(target_pieces):
        for i, source_tokens in enumerate(source_pieces):
            total = 0.0
            for t in target_tokens:
                row = t + 1 if shift else t  # the step whose decoder input is token t
                total += sum(token[row, s] for s in source_tokens)
            result[j, i] = total / len(target_tokens)
    return result


def reference_argmax(weights):
    links = set()
    for j, row in enumerate(weights):
        best = 0
        for i in range(1, len(row)):
            if row[i] > row[best]:  # strictly: the lowest index keeps a tie
                best = i
        links.add((best, j))
    return links


def reference_mutual_argmax(weights):
    # Jalili Sabet et al. 2020: a link where each word is the other's best, row and column.
    links = set()
    for i, j in reference_argmax(weights):
        best = 0
        for row in range(1, weights.shape[0]):
            if weights[row, i] > weights[best, i]:
                best = row
        if best == j:
            links.add((i, j))
    return links


def reference_threshold(weights, threshold):
    return {(i, j) for j in range(weights.shape[0]) for i in range(weights.shape[1])
            if weights[j, i] >= threshold}


CHOICES = [AttentionChoice(), AttentionChoice(1, 2), AttentionChoice(2, 1),
           AttentionChoice(shift=True), AttentionChoice(1, 3, shift=True)]


@pytest.mark.parametrize("choice", CHOICES)
def test_word_weights_fold_the_chosen_attention_as_the_rule_says(pair, choice):
    found = word_attention(pair, ("subword", "subword"), choice)
    assert [word.text for word in found.source_words] == SOURCE.split()
    assert [word.text for word in found.target_words] == TARGET.split()
    expected = reference_words(pair.attentions["cross"], choice.layer, choice.head,
                               choice.shift, SOURCE_PIECES, TARGET_PIECES)
    np.testing.assert_allclose(found.weights, expected, rtol=1e-12)


@pytest.mark.parametrize("choice", CHOICES)
def test_links_are_the_reference_argmax_and_threshold(pair, choice):
    expected = reference_words(pair.attentions["cross"], choice.layer, choice.head,
                               choice.shift, SOURCE_PIECES, TARGET_PIECES)
    _, links = forced_links(pair, ("subword", "subword"), choice, Extraction())
    assert links == reference_argmax(expected)
    _, links = forced_links(pair, ("subword", "subword"), choice, Extraction("mutual-argmax"))
    assert links == reference_mutual_argmax(expected)
    for threshold in (0.05, 0.3, 0.6):
        _, links = forced_links(pair, ("subword", "subword"), choice,
                                Extraction("threshold", threshold))
        assert links == reference_threshold(expected, threshold)


def test_the_shift_reads_the_end_row_for_the_last_token(pair):
    shifted = token_weights(pair, AttentionChoice(shift=True))
    last = pair.attentions["cross"][-1].mean(axis=0)
    np.testing.assert_array_equal(shifted[:-1], last[1:])
    np.testing.assert_array_equal(shifted[len(TARGET_TOKENS) - 2], last[-1])


def test_argmax_takes_the_lowest_source_word_on_a_tie():
    weights = np.array([[0.25, 0.5, 0.25, 0.0],
                        [0.4, 0.1, 0.4, 0.1],
                        [0.0, 0.0, 0.5, 0.5]])
    assert Extraction().links(weights) == {(1, 0), (0, 1), (2, 2)}
    assert Extraction("threshold", 0.4).links(weights) == {
        (1, 0), (0, 1), (2, 1), (2, 2), (3, 2)}


def test_mutual_argmax_keeps_the_links_each_word_agrees_on():
    # Rows are target words. Target 0's best is source 1, whose best target is 0: kept.
    # Target 1's best is source 0 (0.6), but source 0's best is target 2 (0.7): dropped.
    # Target 2's best is source 0, and source 0's best is target 2: kept. Source 2 and
    # target 1 stay unaligned; a column tie (source 3) goes to the lowest target.
    weights = np.array([[0.1, 0.8, 0.05, 0.05],
                        [0.6, 0.1, 0.2, 0.1],
                        [0.7, 0.05, 0.2, 0.05]])
    assert Extraction("mutual-argmax").links(weights) == {(1, 0), (0, 2)}
    ties = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    assert Extraction("mutual-argmax").links(ties) == {(3, 0)}
    assert Extraction("mutual-argmax").links(np.zeros((0, 3))) == frozenset()
    assert Extraction("mutual-argmax").links(np.zeros((2, 0))) == frozenset()


def test_a_target_word_can_have_no_link_or_several_under_a_threshold():
    weights = np.array([[0.3, 0.3, 0.4], [0.9, 0.05, 0.05]])
    assert Extraction("threshold", 0.5).links(weights) == {(0, 1)}
    assert Extraction("threshold", 0.3).links(weights) == {(0, 0), (1, 0), (2, 0), (0, 1)}


def test_sentencepiece_pieces_fold_into_the_words_given():
    source_tokens = ["▁a", "▁b", "c", "▁d"]
    target_tokens = ["▁x", "y", "▁z", "[END]"]
    layers = attention(np.random.default_rng(1), 1, 1, 4, 4)
    pair = forced("a bc d", source_tokens, "xy z", target_tokens, layers)
    found = word_attention(pair, ("sentencepiece", "sentencepiece"))
    expected = reference_words(layers, None, None, False, [[0], [1, 2], [3]], [[0, 1], [2]])
    np.testing.assert_allclose(found.weights, expected, rtol=1e-12)


def test_case_folding_keeps_the_words_but_an_unknown_word_does_not():
    layers = attention(np.random.default_rng(2), 1, 1, 3, 2)
    folded = forced("The Cat", ["the", "cat"], "Le chat", ["le", "chat", "[END]"], layers)
    words = word_attention(folded, ("word", "word")).source_words
    assert [(word.text, word.positions) for word in words] == [("The", [0]), ("Cat", [1])]
    unknown = forced("The Cat", ["the", "[UNK]"], "Le chat", ["le", "chat", "[END]"], layers)
    with pytest.raises(FoldingError, match="source's word 'Cat'"):
        word_attention(unknown, ("subword", "subword"))
    # Case folding that adds a character ("İ": "i" and a combining dot) past the end.
    longer = forced("Le İ", ["le", "i\u0307"], "Le chat", ["le", "chat", "[END]"], layers)
    with pytest.raises(FoldingError, match="source's word 'İ'"):
        word_attention(longer, ("word", "word"))


@pytest.mark.parametrize("choice, message", [
    (AttentionChoice(layer=3), r"^layer 3 is out of range: .* has 2 layers \(1\.\.2\)$"),
    (AttentionChoice(head=4), r"^head 4 is out of range: .* has 3 heads \(1\.\.3\)$"),
    (AttentionChoice(layer=1, head=0), r"^head 0 is out of range"),
])
def test_a_layer_or_head_the_model_lacks_is_refused(pair, choice, message):
    with pytest.raises(ChoiceError, match=message):
        word_attention(pair, ("subword", "subword"), choice)


@pytest.mark.parametrize("method, threshold", [
    ("threshold", None), ("argmax", 0.5), ("mutual-argmax", 0.5), ("threshold", 0.0),
    ("threshold", 1.5), ("softmax", None),
])
def test_an_extraction_is_checked(method, threshold):
    with pytest.raises(ValueError):
        Extraction(method, threshold)


def test_the_registry_names_the_extractions():
    assert list(EXTRACTIONS) == ["argmax", "mutual-argmax", "threshold"]


@pytest.fixture(scope="module")
def tiny(trained):  # noqa: F811 (the fixture)
    """The session's tiny run (word level, recurrent), loaded in this process."""
    from attncli.search.loading import load_model

    return load_model(trained / "model")


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 2])
def test_forced_attention_over_the_search_output_is_the_search_s(tiny, beam):
    """Forced over its own translations, the model gives the search's weights, and the
    links of `translate --alignments`."""
    from attncli.search.alignments import align
    from attncli.search.forced import force

    translator = tiny.translator(tiny.search.adjusted(beam_size=beam, n_best=1))
    # Punctuation spaced off: the words given are then the tokenizer's words, which
    # `translate --alignments` counts on the source side.
    sources = ["Tengo hambre .", "¿ Dónde está el baño ?", "Tom no vino a la escuela hoy .",
               "Hace frío .", "Estoy cansado .", "Él es mi amigo ."]
    hypotheses = [result.hypotheses[0] for result in translator.translate(sources)]
    # A text with [UNK] is not the tokens the search emitted: "[UNK]" reads as "[", "unk", "]".
    kept = [(source, hypothesis) for source, hypothesis in zip(sources, hypotheses)
            if "[UNK]" not in hypothesis.tokens]
    assert len(kept) >= 3, hypotheses
    levels = tiny.source_tokenizer.level, tiny.target_tokenizer.level
    results = force(translator, [source for source, _ in kept],
                    [hypothesis.text for _, hypothesis in kept])
    for (source, hypothesis), result in zip(kept, results):
        assert result.tokens == hypothesis.tokens
        np.testing.assert_allclose(result.weights, hypothesis.weights, atol=1e-6)
        _, links = forced_links(result, levels, AttentionChoice(), Extraction())
        searched = align(result.source_tokens, hypothesis.tokens, hypothesis.weights,
                         *levels, hypothesis.text)
        assert links == set(searched.links)
