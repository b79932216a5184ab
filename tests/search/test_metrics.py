import pytest

from attncli.search.metrics import edit_distance, pronunciation_scores, translation_scores


@pytest.mark.parametrize(
    "hypothesis, reference, distance",
    [
        ("kitten", "sitting", 3),
        ("", "abc", 3),
        ("abc", "", 3),
        ("flaw", "lawn", 2),
        ("same", "same", 0),
    ],
)
def test_edit_distance_known_values(hypothesis, reference, distance):
    assert edit_distance(list(hypothesis), list(reference)) == distance


def test_pronunciation_scores_use_the_closest_reference():
    # "read" has two pronunciations; the output matches the second exactly.
    hypotheses = [["R", "EH", "D"], ["K", "AE", "T"], ["D", "AO"]]
    references = [
        [["R", "IY", "D"], ["R", "EH", "D"]],
        [["K", "AE", "T", "S"]],
        [["D", "AO", "G"], ["D", "AA", "G"]],
    ]
    scores = pronunciation_scores(hypotheses, references)
    # Edits: 0 (second ref), 1 (missing S, ref length 4), 1 (missing G, ref length 3).
    assert scores.phoneme_errors == 2
    assert scores.reference_phonemes == 3 + 4 + 3
    assert scores.per == pytest.approx(20.0)
    assert scores.wer == pytest.approx(100.0 * 2 / 3)


@pytest.mark.parametrize("order", [1, -1])
def test_per_takes_the_longer_of_two_equally_close_references(order):
    # "A B" is one edit from "A" (delete B) and from "A B C" (insert C): the tie goes
    # to the longer reference, 1 error in 3 phonemes, not 1 in 1.
    options = [["A"], ["A", "B", "C"]][::order]
    scores = pronunciation_scores([["A", "B"]], [options])
    assert (scores.phoneme_errors, scores.reference_phonemes) == (1, 3)
    assert scores.per == pytest.approx(100.0 / 3)
    assert scores.wer == 100.0


def test_pronunciation_scores_reject_misaligned_input():
    with pytest.raises(ValueError, match="aligned word by word"):
        pronunciation_scores([["A"]], [])
    with pytest.raises(ValueError, match="at least one reference"):
        pronunciation_scores([["A"]], [[]])


def test_translation_scores_strict_and_lowercased():
    hypotheses = ["The cat sat on the mat .", "A dog runs in the park ."]
    references = ["the cat sat on the mat .", "A dog runs in the park ."]
    strict = translation_scores(hypotheses, references)
    lowered = translation_scores(hypotheses, references, lowercase=True)
    assert lowered.bleu == pytest.approx(100.0)
    assert strict.bleu < lowered.bleu
    assert "case:mixed" in strict.bleu_signature
    assert "case:lc" in lowered.bleu_signature
    assert 0.0 < strict.chrf <= 100.0


@pytest.mark.parametrize("several_references", [False, True])
def test_translation_scores_equal_sacrebleu_itself(several_references):
    from sacrebleu.metrics import BLEU, CHRF

    hypotheses = ["The cat sat on the mat.", "A dog is running in a park!"]
    references = [["The cat is on the mat.", "the dog runs in the park."]]
    if several_references:
        references.append(["There is a cat on the mat.", "A dog is running in the park."])
    scores = translation_scores(
        hypotheses, references if several_references else references[0]
    )
    assert scores.chrf == CHRF().corpus_score(hypotheses, references).score
    assert scores.bleu == BLEU().corpus_score(hypotheses, references).score
    assert 0.0 < scores.chrf < 100.0


def test_translation_scores_reject_misaligned_input():
    with pytest.raises(ValueError, match="line-aligned"):
        translation_scores(["one"], ["one", "two"])
