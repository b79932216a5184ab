"""`inspect_sentence`: a translated sentence's attention view, and its step records."""

import json

import numpy as np
import pytest
from spa_eng_parts import model_and_tokenizers

from attncli.config.search import SearchConfig
from attncli.search.inspection import inspect_sentence
from attncli.search.sentence_view import SelectionError
from attncli.search.loading import LoadedModel

TEXT = "¿Dónde está el baño?"
MODELS = {
    "transformer": dict(encoder="self-attention", decoder="self-attention",
                        encoder_layers=2, decoder_layers=2, heads=2, norm="pre",
                        score="scaled_dot"),
    "luong": dict(decoder="luong", score="general"),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def view(request):
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**MODELS[request.param])
    loaded = LoadedModel(model, source_tokenizer, target_tokenizer, False, {})
    translator = loaded.translator(SearchConfig(beam_size=2, n_best=2, max_length_offset=4))
    [translation] = translator.translate([TEXT])
    return inspect_sentence(loaded, translator, translation, hypothesis=1)


def test_the_view_has_every_attention_layer_and_head_with_rows_summing_to_one(view):
    document = json.loads(json.dumps(view.to_dict()))
    assert document["source"] == TEXT and document["shown"] == 1
    assert len(document["hypotheses"]) == 2
    names = [entry["attention"] for entry in document["attentions"]]
    transformer = view.model.self_attention_decoder
    assert names == (["cross", "encoder", "decoder"] if transformer else ["cross"])
    for entry in document["attentions"]:
        assert len(entry["layers"]) == (2 if transformer else 1)
        for layer in entry["layers"]:
            assert len(layer["heads"]) == (2 if transformer else 1)
            for head in layer["heads"]:
                weights = np.array(head)
                assert weights.shape == (len(entry["rows"]), len(entry["columns"]))
                np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    cross = document["attentions"][0]
    assert cross["rows"] == document["hypotheses"][1]["tokens"]
    assert cross["columns"] == document["source_tokens"]


def test_a_step_record_is_the_views_row_and_its_context_the_weighted_values(view):
    for name, matrices in view.attentions.items():
        for layer, weights in enumerate(matrices.layers, start=1):
            for head in range(1, weights.shape[0] + 1):
                step = len(matrices.rows)
                chosen = view.step(name, layer, head, step)
                assert chosen.query_token == matrices.rows[step - 1]
                assert chosen.key_tokens == matrices.columns
                # A recurrent decoder's row is what the search returned; its record is
                # the decoder's own teacher-forced pass over the same tokens.
                record = chosen.record
                np.testing.assert_allclose(record.weights, weights[head - 1, step - 1],
                                           rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(
                    record.context, np.einsum("s,sd->d", record.weights, record.values),
                    rtol=1e-5, atol=1e-6)


def test_every_step_is_offered_as_json(view):
    steps = json.loads(json.dumps(view.steps(width=4)))
    expected = sum(weights.shape[0] * len(matrices.rows)
                   for matrices in view.attentions.values() for weights in matrices.layers)
    assert len(steps) == expected
    first = steps["cross/1/1/1"]
    assert first["shown"] == 4 and len(first["values"][0]) == 4


@pytest.mark.parametrize("arguments, message", [
    (("encoder", None, None, 1), None),
    (("cross", 3, None, 1), "layer 3 is out of range"),
    (("cross", None, 7, 1), "head 7 is out of range"),
    (("cross", None, None, 99), "step 99 is out of range"),
    (("both", None, None, 1), "attention both: choose cross, encoder, decoder or alignment"),
])
def test_what_the_view_does_not_have_is_refused_in_words(view, arguments, message):
    if message is None:
        if view.model.config.encoder == "self-attention":
            assert view.step(*arguments).attention == "encoder"
            return
        message = "this model's encoder is recurrent"
    with pytest.raises(SelectionError, match=message):
        view.step(*arguments)
