"""Scoring a split: sources grouped with every reference, the same figures as sacreBLEU."""

import pytest
import sacrebleu

from attncli.data.readers import Corpus
from attncli.search.evaluation import evaluate_corpus, score_outputs


class EchoTranslator:
    """Stands in for a `Translator`: the output of a source is given by a table."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = []

    def translate(self, texts, batch_size=64):
        self.calls.append(list(texts))

        class Hypothesis:
            def __init__(self, text):
                self.text = text

        class Result:
            def __init__(self, text):
                self.hypotheses = [Hypothesis(text)]

        return [Result(self.outputs[text]) for text in texts]


def test_translation_figures_equal_sacrebleu_with_several_references():
    outputs = ["The cat sat on the mat .", "A dog runs ."]
    references = [["the cat sat on the mat .", "There is a cat on the mat ."], ["A dog runs ."]]
    figures = score_outputs("translation", outputs, references)
    streams = [["the cat sat on the mat .", "A dog runs ."],
               ["There is a cat on the mat .", "A dog runs ."]]
    assert figures["bleu"] == sacrebleu.corpus_bleu(outputs, streams).score
    lowercase = sacrebleu.corpus_bleu(outputs, streams, lowercase=True)
    assert figures["bleu_lowercase"] == lowercase.score
    assert figures["chrf"] == sacrebleu.corpus_chrf(outputs, streams).score
    assert figures["bleu_lowercase"] > figures["bleu"]
    cased_only = score_outputs("translation", outputs, references, lowercase_bleu=False)
    assert "bleu_lowercase" not in cased_only
    assert cased_only == {key: figures[key] for key in ("bleu", "chrf", "bleu_signature")}


def test_a_repeated_source_is_decoded_once_and_right_if_it_matches_any_reference():
    corpus = Corpus(
        ["read", "cat", "read", "dog"],
        ["R IY D", "K AE T", "R EH D", "D AO G"],
    )
    translator = EchoTranslator({"read": "R EH D", "cat": "K AE T S", "dog": "D AO G"})
    figures, outputs = evaluate_corpus(translator, corpus, "pronunciation")
    assert translator.calls == [["read", "cat", "dog"]]
    assert outputs == ["R EH D", "K AE T S", "D AO G"]
    # read: 0 edits (second reference); cat: 1 insertion over 3; dog: exact.
    assert figures["words"] == figures["sentences"] == 3
    assert figures["wer"] == 100.0 / 3
    assert figures["per"] == 100.0 * 1 / 9


def test_count_and_normalise_apply_before_scoring():
    corpus = Corpus(["uno", "dos"], ["One of the five cats .", "Two ."])
    translator = EchoTranslator({"uno": "one of the five cats .", "dos": "two ."})
    figures, outputs = evaluate_corpus(
        translator, corpus, "translation", count=1,
        normalise=lambda texts: [text.lower() for text in texts],
    )
    assert outputs == ["one of the five cats ."] and figures["sentences"] == 1
    assert figures["bleu"] == pytest.approx(100.0)


def test_references_are_normalised_in_one_call_and_stay_with_their_sources():
    # The normaliser runs a tokenizer: one call for every reference, not one per source.
    corpus = Corpus(["uno", "dos", "uno"], ["One .", "Two !", "A one ."])
    translator = EchoTranslator({"uno": "a one .", "dos": "two !"})
    calls = []

    def normalise(texts):
        calls.append(list(texts))
        return [text.lower() for text in texts]

    figures, outputs = evaluate_corpus(translator, corpus, "translation", normalise=normalise)
    assert len(calls) == 1 and sorted(calls[0]) == ["A one .", "One .", "Two !"]
    expected = score_outputs("translation", outputs, [["one .", "a one ."], ["two !"]])
    assert figures["bleu"] == pytest.approx(expected["bleu"])
    assert figures["chrf"] == pytest.approx(expected["chrf"])
