"""`Seq2Seq.trace`: one attention step's query, keys, values, scores, weights and
context, against what the search computed and against NumPy."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from spa_eng_parts import model_and_tokenizers

from attncli.config.search import SearchConfig
from attncli.data.vocabulary import START
from attncli.search.loading import LoadedModel
from attncli.model.trace import trace_attention

TEXT = "¿Dónde está el baño?"
SEARCH = SearchConfig(beam_size=2, n_best=1, max_length_offset=4)
TRANSFORMER = dict(encoder="self-attention", decoder="self-attention", encoder_layers=2,
                   decoder_layers=2, heads=2, norm="pre", score="scaled_dot")
MODELS = {
    "luong-general-local-p": dict(decoder="luong", score="general", alignment="local-p",
                                  window=1),
    "bahdanau-dot-local-m": dict(decoder="bahdanau", score="dot", alignment="local-m",
                                 window=1, cell="lstm"),
    "transformer-general": {**TRANSFORMER, "score": "general"},
    "hybrid-additive": dict(encoder="self-attention", encoder_layers=2, heads=2,
                            decoder="bahdanau", score="additive"),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def translated(request):
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**MODELS[request.param])
    loaded = LoadedModel(model, source_tokenizer, target_tokenizer, False, {})
    translator = loaded.translator(SEARCH)
    [translation] = translator.translate([TEXT])
    hypothesis = translation.hypotheses[0]
    _, source_ids = translator.source_ids(tf.constant([TEXT]))
    vocabulary = target_tokenizer.vocabulary
    emitted = [vocabulary.id_of(token) for token in hypothesis.tokens]
    target_in_ids = tf.constant([[START] + emitted[:-1]], tf.int32)
    return model, source_ids, target_in_ids, hypothesis


def attentions(model):
    maps = {"cross": 1, "encoder": 0, "decoder": 0}
    if model.config.encoder == "self-attention":
        maps["encoder"] = model.config.encoder_layers
    if model.self_attention_decoder:
        maps["cross"] = maps["decoder"] = model.config.decoder_layers
    return [(name, layer) for name, count in maps.items() for layer in range(1, count + 1)]


def test_the_traced_weights_are_the_models_own(translated):
    """Every layer's weights equal `attention_maps`; the cross-attention's (a recurrent
    decoder's, or the last block's mean over the heads) what the search returned."""
    model, source_ids, target_in_ids, hypothesis = translated
    maps = model.attention_maps(source_ids, target_in_ids)
    for attention, layer in attentions(model):
        traced = trace_attention(model, source_ids, target_in_ids, attention, layer)
        if traced.multi_head:
            np.testing.assert_array_equal(traced.weights, np.asarray(maps[attention][layer - 1])[0])
    last = model.config.decoder_layers if model.self_attention_decoder else 1
    traced = trace_attention(model, source_ids, target_in_ids, "cross", last)
    np.testing.assert_allclose(traced.weights.mean(axis=0), hypothesis.weights,
                               rtol=1e-4, atol=1e-6)


def softmax(scores):
    visible = np.isfinite(scores)
    if not visible.any():  # local-m past the source's end: no key, all-zero weights
        return np.zeros_like(scores)
    exponentials = np.where(visible, np.exp(scores - scores[visible].max()), 0.0)
    return exponentials / exponentials.sum()


def reference_scores(model, attention, step):
    """The score of every key by the paper's formula, in NumPy, from the layer's weights."""
    query, keys = step.query, step.keys
    if step.head is not None:
        layer = (model.encoder.blocks if attention == "encoder"
                 else model.decoder.blocks)[step.layer - 1]
        layer = layer.cross_attention if attention == "cross" else layer.self_attention
        score = layer.score_layer
        name = layer.score_name
    else:
        score = model.decoder.attention
        name = model.config.score
    if name == "scaled_dot":
        return keys @ query / np.sqrt(len(query))
    if name == "dot":
        return keys @ query
    if name == "general":
        return (keys @ np.asarray(score.W_a, "float64")) @ query
    if name == "additive":
        hidden = np.tanh(query @ np.asarray(score.W_q) + keys @ np.asarray(score.W_k))
        return hidden @ np.asarray(score.v, "float64")
    raise AssertionError(name)


def test_every_step_follows_the_formula(translated):
    """score(q, k_s) by NumPy where the key is visible; the weights are their softmax
    (local-p: times the Gaussian), the context is weights @ values."""
    model, source_ids, target_in_ids, _ = translated
    for attention, layer in attentions(model):
        traced = trace_attention(model, source_ids, target_in_ids, attention, layer)
        for head in range(1, traced.num_heads + 1):
            for t in range(1, traced.num_queries + 1):
                step = traced.step(head, t)
                visible = np.isfinite(step.scores)
                np.testing.assert_allclose(
                    step.scores[visible], reference_scores(model, attention, step)[visible],
                    rtol=1e-4, atol=1e-5)
                assert np.all(step.weights[~visible] == 0)
                expected = softmax(step.scores)
                if model.config.alignment == "local-p" and attention == "cross":
                    assert step.weights.sum() <= 1 + 1e-6
                else:
                    np.testing.assert_allclose(step.weights, expected, rtol=1e-4, atol=1e-6)
                np.testing.assert_allclose(step.context, step.weights @ step.values)


def test_the_model_method_gives_one_step_and_it_is_json(translated):
    model, source_ids, target_in_ids, hypothesis = translated
    steps = len(hypothesis.tokens)
    step = model.trace(source_ids, target_in_ids, "cross",
                       model.config.decoder_layers if model.self_attention_decoder else 1,
                       None, steps)
    assert step.step == steps and step.attention == "cross"
    assert (step.head is None) == (not model.self_attention_decoder)
    document = json.loads(json.dumps(step.to_dict(width=3)))
    assert document["shown"] == 3 and len(document["query"]) == 3
    assert len(document["keys"]) == len(step.key_tokens) == step.weights.shape[0]
    np.testing.assert_allclose(document["context_norm"], np.linalg.norm(step.context))
    np.testing.assert_allclose(document["weighted_values_norms"],
                               np.linalg.norm(step.weighted_values(), axis=1))
    masked = [index for index, score in enumerate(document["scores"]) if score is None]
    assert masked == [int(s) for s in np.flatnonzero(np.isinf(step.scores))]
    if model.config.alignment != "global":  # the window of 1 leaves keys out
        assert masked and all(document["weights"][s] == 0 for s in masked)


def test_a_missing_attention_or_layer_is_refused(translated):
    model, source_ids, target_in_ids, _ = translated
    with pytest.raises(ValueError, match="out of range"):
        model.trace(source_ids, target_in_ids, "cross", layer=9)
    if not model.self_attention_decoder:
        with pytest.raises(ValueError, match="decoder is recurrent"):
            model.trace(source_ids, target_in_ids, "decoder")


def test_score_demo_walks_the_same_record():
    """score-demo's queries are `AttentionStep`s too: a masked key's score is -inf and
    its weight 0, and the context is the sum of the weighted values."""
    from attncli.cli.demo_inputs import SEQ2SEQ
    from attncli.cli.score_demo import walk_score, walk_self_attention
    from attncli.model.trace import AttentionStep

    inputs = dataclasses.replace(SEQ2SEQ.inputs, valid_length=3)
    for walk in (walk_score("local-p", inputs, window=2), walk_self_attention()):
        for t in range(len(walk.inputs.query)):
            step = walk.step(t)
            assert isinstance(step, AttentionStep)
            masked = ~walk.allowed[t]
            assert np.all(np.isneginf(step.scores[masked])) and np.all(step.weights[masked] == 0)
            np.testing.assert_allclose(step.context, walk.context[t], rtol=1e-6, atol=1e-6)
            json.dumps(step.to_dict())


# ---- the alignment layer ---------------------------------------------------------------

ALIGNERS = {
    "luong-next": dict(decoder="luong", score="general", alignment_layer=True),
    "transformer-full": {**TRANSFORMER, "alignment_layer": True,
                         "alignment_context": "full"},
}


@pytest.fixture(scope="module", params=sorted(ALIGNERS))
def aligner(request):
    """An untrained model with a fresh alignment layer, teacher-forced over its own
    translation of TEXT: `(model, source_ids, target_in_ids)`."""
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**ALIGNERS[request.param])
    loaded = LoadedModel(model, source_tokenizer, target_tokenizer, False, {})
    translator = loaded.translator(SEARCH)
    [translation] = translator.translate([TEXT])
    _, source_ids = translator.source_ids(tf.constant([TEXT]))
    vocabulary = target_tokenizer.vocabulary
    emitted = [vocabulary.id_of(token) for token in translation.hypotheses[0].tokens]
    return model, source_ids, tf.constant([[START] + emitted[:-1]], tf.int32)


def test_the_alignment_layer_is_traced_by_garg_et_als_formula(aligner):
    """`a_t(s) = softmax_s(q_t^T W_a h_s)` in NumPy from the layer's weights, with
    `q_t = tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)` for the "next" context (the full
    context's GRU is the layer's own, tested in test_alignment_layer.py); the weights
    are those `align` reads (`teacher_forced`'s "alignment")."""
    model, source_ids, target_in_ids = aligner
    traced = trace_attention(model, source_ids, target_in_ids, "alignment")
    assert (traced.attention, traced.layer, traced.num_heads, traced.multi_head) == (
        "alignment", 1, 1, False)
    features, maps = model.teacher_forced(source_ids, target_in_ids)
    np.testing.assert_array_equal(traced.weights, np.asarray(maps["alignment"][0])[:, 0])
    layer = model.alignment_layer
    encoded = np.asarray(model.encoder(source_ids)[0], "float64")[0]
    np.testing.assert_allclose(traced.keys[0], encoded, rtol=1e-6)
    W_a = np.asarray(layer.attention.W_a, "float64")
    if layer.context == "next":
        f = np.asarray(features, "float64")[0]
        following = np.append(np.asarray(target_in_ids)[0, 1:], 0)
        table = np.asarray(model.decoder.embedding.embeddings, "float64")
        E = table[following] * (following != 0)[:, None]
        rows = np.concatenate([f, np.vstack([f[1:], np.zeros_like(f[:1])]), E], axis=1)
        q = np.tanh(rows @ np.asarray(layer.query_projection.kernel, "float64")
                    + np.asarray(layer.query_projection.bias, "float64"))
        np.testing.assert_allclose(traced.queries[0], q, rtol=1e-4, atol=1e-6)
    for t in range(1, traced.num_queries + 1):
        step = traced.step(None, t)
        assert step.head is None and step.score == "general"
        np.testing.assert_allclose(step.scores, (encoded @ W_a) @ step.query,
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(step.weights, softmax(step.scores), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(step.context, step.weights @ encoded, rtol=1e-6)


def test_a_model_without_an_alignment_layer_refuses_its_trace(translated):
    model, source_ids, target_in_ids, _ = translated
    with pytest.raises(ValueError, match="no alignment layer .*docs/alignment.md"):
        model.trace(source_ids, target_in_ids, "alignment")
