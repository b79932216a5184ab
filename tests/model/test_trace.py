"""The records the model's attentions keep (`Seq2Seq.teacher_forced(...,
return_steps=True)`, chosen and labelled by `attncli.model.trace`): one attention step's
query, keys, values, scores, mask, weights and context, against what the model and the
search computed and against NumPy."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from spa_eng_parts import model_and_tokenizers

from attncli.config.search import SearchConfig
from attncli.data.vocabulary import START
from attncli.search.loading import LoadedModel
from attncli.model.trace import select_step, trace_attentions

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


def test_the_traced_weights_are_the_models_own(translated):
    """Every attention's records hold the weights `attention_maps` returns; the
    cross-attention's (a recurrent decoder's, or the last block's mean over the heads)
    are what the search returned."""
    model, source_ids, target_in_ids, hypothesis = translated
    maps = model.attention_maps(source_ids, target_in_ids)
    records = trace_attentions(model, source_ids, target_in_ids)
    assert set(records) == {name for name, layers in maps.items() if layers}
    for name, layers in records.items():
        for record, weights in zip(layers, maps[name], strict=True):
            np.testing.assert_array_equal(record.weights, np.asarray(weights)[0])
    np.testing.assert_allclose(records["cross"][-1].weights.mean(axis=0), hypothesis.weights,
                               rtol=1e-4, atol=1e-6)


def softmax(scores):
    visible = np.isfinite(scores)
    if not visible.any():  # local-m past the source's end: no key, all-zero weights
        return np.zeros_like(scores)
    exponentials = np.where(visible, np.exp(scores - scores[visible].max()), 0.0)
    return exponentials / exponentials.sum()


def attention_layer(model, attention, layer):
    if attention == "encoder":
        return model.encoder.blocks[layer - 1].self_attention
    if not model.self_attention_decoder:
        return model.decoder.attention
    block = model.decoder.blocks[layer - 1]
    return block.cross_attention if attention == "cross" else block.self_attention


def reference_scores(model, step):
    """The score of every key by the paper's formula, in NumPy, from the layer's weights."""
    query, keys = step.record.query, step.record.keys
    layer = attention_layer(model, step.attention, step.layer)
    score = getattr(layer, "score_layer", layer)
    name = step.kind.score
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


def reference_window(model, step):
    """Luong et al. (2015), 3.2: the window centre `p_t` (local-m: t, counted from 0;
    local-p: S sigmoid(v_p · tanh(W_p h_t)), eq. 9), which keys it keeps (|s - p_t| <=
    D) and local-p's Gaussian (eq. 10), in NumPy from the layer's weights."""
    layer, config = model.decoder.attention, model.config
    positions = np.arange(len(step.record.keys))
    if config.alignment == "local-m":
        centre = step.step - 1.0
    else:
        hidden = np.tanh(step.record.query @ np.asarray(layer.W_p, "float64"))
        centre = len(positions) / (1 + np.exp(-(hidden @ np.asarray(layer.v_p, "float64"))))
    sigma = config.window / 2
    gaussian = np.exp(-((positions - centre) ** 2) / (2 * sigma**2))
    return centre, np.abs(positions - centre) <= config.window, gaussian


def test_every_step_follows_the_formula(translated):
    """score(q, k_s) by NumPy for every key; the mask keeps a local window's keys (its
    centre by NumPy) and a causal query's earlier ones; the weights are the softmax of
    the scores over the mask (local-p: times the Gaussian), the context weights @ values."""
    model, source_ids, target_in_ids, _ = translated
    records = trace_attentions(model, source_ids, target_in_ids)
    for attention, layers in records.items():
        for layer, record in enumerate(layers, start=1):
            heads, queries, keys = record.weights.shape
            for head in range(1, heads + 1):
                for t in range(1, queries + 1):
                    step = select_step(model, records, attention, layer, head, t)
                    chosen = step.record
                    np.testing.assert_allclose(chosen.scores, reference_scores(model, step),
                                               rtol=1e-4, atol=1e-5)
                    expected_mask = np.ones(keys, bool)
                    if attention == "decoder":
                        expected_mask = np.arange(keys) < t
                    factor = 1.0
                    if step.kind.local and attention == "cross":
                        centre, expected_mask, gaussian = reference_window(model, step)
                        np.testing.assert_allclose(chosen.aligned_positions, centre, rtol=1e-5)
                        if step.kind.alignment == "local-p":
                            factor = gaussian
                            np.testing.assert_allclose(chosen.gaussian, gaussian, rtol=1e-4,
                                                       atol=1e-6)
                    np.testing.assert_array_equal(chosen.mask, expected_mask)
                    expected = softmax(np.where(expected_mask, chosen.scores, -np.inf))
                    np.testing.assert_allclose(chosen.weights, expected * factor, rtol=1e-4,
                                               atol=1e-6)
                    np.testing.assert_allclose(chosen.context, chosen.weights @ chosen.values,
                                               rtol=1e-5, atol=1e-6)


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
    assert len(document["keys"]) == len(step.key_tokens) == step.record.weights.shape[0]
    np.testing.assert_allclose(document["context_norm"], np.linalg.norm(step.record.context))
    np.testing.assert_allclose(document["weighted_values_norms"],
                               np.linalg.norm(step.record.weighted_values(), axis=1))
    masked = [index for index, score in enumerate(document["scores"]) if score is None]
    assert masked == [int(s) for s in np.flatnonzero(~step.record.mask)]
    if model.config.alignment != "global":  # the window of 1 leaves keys out
        assert masked and all(document["weights"][s] == 0 for s in masked)


def test_a_missing_attention_or_layer_is_refused(translated):
    model, source_ids, target_in_ids, _ = translated
    with pytest.raises(ValueError, match="out of range"):
        model.trace(source_ids, target_in_ids, "cross", layer=9)
    if not model.self_attention_decoder:
        with pytest.raises(ValueError, match="decoder is recurrent"):
            model.trace(source_ids, target_in_ids, "decoder")


@pytest.mark.parametrize("translated", ["transformer-general"], indirect=True)
def test_the_record_follows_a_changed_block(translated, monkeypatch):
    """The records are the blocks' own: a decoder block changed to add 1 to the first
    feature of what its cross-attention reads changes the record as it changes the
    model's attention. (A trace that re-ran `DecoderBlock.call` line by line, as
    inspect-weights once did, would have scored the unchanged queries.)"""
    from attncli.model.transformer_decoder import DecoderBlock

    model, source_ids, target_in_ids, _ = translated
    before = trace_attentions(model, source_ids, target_in_ids)["cross"]
    original = DecoderBlock._cross_and_feed_forward

    def changed(self, x, *args, **kwargs):
        return original(self, x + np.eye(x.shape[-1], dtype="float32")[0], *args, **kwargs)

    monkeypatch.setattr(DecoderBlock, "_cross_and_feed_forward", changed)
    maps = model.attention_maps(source_ids, target_in_ids)
    after = trace_attentions(model, source_ids, target_in_ids)["cross"]
    for layer, record in enumerate(after):
        np.testing.assert_array_equal(record.weights, np.asarray(maps["cross"][layer])[0])
        assert not np.allclose(record.weights, before[layer].weights)
        assert not np.allclose(record.query, before[layer].query)
        W_a = np.asarray(model.decoder.blocks[layer].cross_attention.score_layer.W_a)
        np.testing.assert_allclose(record.scores, record.query @ np.swapaxes(
            record.keys @ W_a, -1, -2), rtol=1e-4, atol=1e-5)  # the general score


def test_score_demo_walks_the_same_record():
    """score-demo's queries are `AttentionStep`s too: a masked key's weight is 0, and
    the context is the sum of the weighted values."""
    from attncli.cli.demo_examples import SEQ2SEQ
    from attncli.cli.score_demo import walk_score, walk_self_attention

    inputs = dataclasses.replace(SEQ2SEQ.inputs, valid_length=3)
    for walk in (walk_score("local-p", inputs, window=2), walk_self_attention()):
        steps = walk.steps()
        assert len(steps) == len(walk.record.query)
        for t, step in enumerate(steps):
            record = step.record
            assert step.step == t + 1
            np.testing.assert_array_equal(record.weights, walk.record.weights[t])
            assert np.all(record.weights[~record.mask] == 0)
            np.testing.assert_allclose(record.weighted_values().sum(axis=0), record.context,
                                       rtol=1e-5, atol=1e-6)
            json.dumps(step.to_dict())
        if walk.source is None:  # the padded keys of the seq2seq example are masked
            assert not walk.record.mask[:, 3:].any()


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
    records = trace_attentions(model, source_ids, target_in_ids)
    [traced] = records["alignment"]
    features, maps = model.teacher_forced(source_ids, target_in_ids)
    np.testing.assert_array_equal(traced.weights, np.asarray(maps["alignment"][0])[0])
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
        np.testing.assert_allclose(traced.query[0], q, rtol=1e-4, atol=1e-6)
    for t in range(1, traced.weights.shape[1] + 1):
        step = select_step(model, records, "alignment", 1, None, t)
        assert step.head is None and step.kind.label == "general"
        np.testing.assert_allclose(step.record.scores, (encoded @ W_a) @ step.record.query,
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(step.record.weights, softmax(step.record.scores),
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(step.record.context, step.record.weights @ encoded,
                                   rtol=1e-5, atol=1e-6)


def test_a_model_without_an_alignment_layer_refuses_its_trace(translated):
    model, source_ids, target_in_ids, _ = translated
    with pytest.raises(ValueError, match="no alignment layer .*docs/alignment.md"):
        model.trace(source_ids, target_in_ids, "alignment")
