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


def test_translation_scores_reject_misaligned_input():
    with pytest.raises(ValueError, match="line-aligned"):
        translation_scores(["one"], ["one", "two"])
