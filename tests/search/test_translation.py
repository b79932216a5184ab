"""Translator: strings to n-best translations, with tokens and weights that line up."""

import numpy as np
import pytest
import tensorflow as tf
from spa_eng_parts import SENTENCES, model_and_tokenizers

from attncli.config.search import SearchConfig
from attncli.search.translation import Translator
from attncli.data.vocabulary import END_TOKEN

SEARCH = SearchConfig(beam_size=3, n_best=3, max_length_ratio=1.0, max_length_offset=4)


@pytest.fixture(scope="module")
def parts():
    return model_and_tokenizers()


@pytest.mark.parametrize("source_end", [False, True])
def test_hypotheses_line_up_with_their_tokens_and_source(parts, source_end):
    model, source_tokenizer, target_tokenizer = parts
    translator = Translator(model, source_tokenizer, target_tokenizer, SEARCH, source_end)
    for source, translation in zip(SENTENCES, translator.translate(SENTENCES)):
        assert translation.source == source
        expected_tokens = [
            token.decode("utf-8")
            for token in source_tokenizer.tokenize(tf.constant([source]))[0].numpy()
        ] + ([END_TOKEN] if source_end else [])
        assert translation.source_tokens == expected_tokens
        scores = [hypothesis.score for hypothesis in translation.hypotheses]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        for hypothesis in translation.hypotheses:
            assert hypothesis.weights.shape == (len(hypothesis.tokens), len(expected_tokens))
            np.testing.assert_allclose(hypothesis.weights.sum(axis=1), 1.0, rtol=1e-5)
            words = [token for token in hypothesis.tokens if token != END_TOKEN]
            assert END_TOKEN not in hypothesis.tokens[:-1]
            detokenized = target_tokenizer.detokenize(tf.ragged.constant([words]))[0]
            assert hypothesis.text == detokenized.numpy().decode("utf-8")


def test_results_do_not_depend_on_batching_or_order(parts):
    translator = Translator(*parts, SEARCH)
    texts = SENTENCES + ["Tom.", "Me gusta mucho leer libros en la biblioteca."]
    one_batch = translator.translate(texts, batch_size=64)
    small_batches = translator.translate(list(reversed(texts)), batch_size=2)[::-1]
    for whole, pieces in zip(one_batch, small_batches):
        assert whole.source == pieces.source
        for a, b in zip(whole.hypotheses, pieces.hypotheses):
            assert (a.text, a.tokens) == (b.text, b.tokens)
            np.testing.assert_allclose(a.score, b.score, rtol=1e-5)
            np.testing.assert_allclose(a.weights, b.weights, rtol=1e-5, atol=1e-6)


def test_a_translator_without_weights_gives_the_same_translations(parts):
    texts = SENTENCES + ["", "Me gusta mucho leer libros en la biblioteca."]
    plain = Translator(*parts, SEARCH, attention_weights=False).translate(texts)
    full = Translator(*parts, SEARCH).translate(texts)
    for a, b in zip(plain, full):
        assert (a.source, a.source_tokens) == (b.source, b.source_tokens)
        for hypothesis, reference in zip(a.hypotheses, b.hypotheses):
            assert hypothesis.weights is None
            assert hypothesis._replace(weights=None) == reference._replace(weights=None)


def test_the_graph_is_traced_once_for_batches_of_every_shape(parts):
    translator = Translator(*parts, SEARCH, attention_weights=False)
    translator.translate(SENTENCES, batch_size=3)
    translator.translate(["Hola.", "", "Me gusta mucho leer libros en la biblioteca."] * 3,
                         batch_size=2)
    assert translator.translate_graph.experimental_get_tracing_count() == 1
    assert translator.search.experimental_get_tracing_count() == 1


def test_a_bad_batch_size_is_rejected_with_its_value(parts):
    with pytest.raises(ValueError, match="batch_size=0"):
        Translator(*parts).translate(SENTENCES, batch_size=0)


def test_empty_sentences_are_translated_too(parts):
    translator = Translator(*parts, SEARCH)
    [alone] = translator.translate([""])
    with_others = translator.translate(["", "Hola."])[0]
    assert alone.source_tokens == [] and len(alone.hypotheses) == 3
    assert [h.text for h in alone.hypotheses] == [h.text for h in with_others.hypotheses]
