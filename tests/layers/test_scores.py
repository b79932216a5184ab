"""The registry of score functions (layers.scores), attncli's view of it (attncli.scores)
and everything that reads it name for name."""

import subprocess
import sys
import typing

import numpy as np
import pytest

import attncli.scores
from attncli.cli import demo_inputs
from attncli.config.model import ModelConfig
from attncli.errors import AttncliError
from attncli.scores import ALIGNMENTS, DEMO_SCORES, LOCAL_SCORES, SCORES, make_attention
from layers import scores as registry
from layers.luong_attention import LuongAttention
from layers.multi_head_attention import MultiHeadAttention


def field_choices(cls, name):
    return typing.get_args(typing.get_type_hints(cls)[name])


def test_attncli_reads_the_one_registry_of_the_layers():
    assert attncli.scores.SCORES is registry.SCORES
    assert attncli.scores.ALIGNMENTS is registry.ALIGNMENTS
    assert attncli.scores.make_attention is registry.make_attention


def test_every_reader_spells_the_same_scores():
    assert field_choices(ModelConfig, "score") == tuple(SCORES)
    assert DEMO_SCORES == (*SCORES, "local-m", "local-p")
    for name in DEMO_SCORES:
        assert demo_inputs.request_from_options(score=name).score == name
    with pytest.raises(AttncliError, match=f"choose one of: {', '.join(DEMO_SCORES)}$"):
        demo_inputs.request_from_options(score="scaled-dot")


def test_alignments_and_local_scores_are_luong_attentions():
    assert field_choices(ModelConfig, "alignment") == tuple(ALIGNMENTS)
    assert LOCAL_SCORES == ("dot", "general", "concat")
    for name in ALIGNMENTS:
        assert LuongAttention(alignment=name).alignment == name
    for name in SCORES:
        if name in LOCAL_SCORES:
            assert LuongAttention(score=name).score_name == name
        else:
            with pytest.raises(ValueError, match=f"Received: score={name}"):
                LuongAttention(score=name)


@pytest.mark.parametrize("name", list(SCORES))
def test_multi_head_attention_takes_units_for_the_same_scores(name):
    if SCORES[name].takes_units:
        layer = MultiHeadAttention(2, 4, score=name, units=3)
        assert layer.units == 3
    else:
        with pytest.raises(ValueError, match="Received: units=3"):
            MultiHeadAttention(2, 4, score=name, units=3)


def test_a_local_alignment_needs_a_local_score():
    with pytest.raises(ValueError, match="Received: score=additive, alignment=local-m"):
        make_attention("additive", "local-m", units=4)
    with pytest.raises(ValueError, match="Received: score=cosine"):
        make_attention("cosine")


def numpy_weights(name, query, keys, layer):
    """softmax_s(score(q, k_s)) from the formulas of the papers, with the layer's weights."""
    parameters = {variable.name: np.asarray(variable) for variable in layer.weights}
    if name == "dot":
        scores = query @ keys.T
    elif name == "scaled_dot":
        scores = query @ keys.T / np.sqrt(query.shape[-1])
    elif name == "general":
        scores = query @ (keys @ parameters["W_a"]).T
    elif name == "concat":
        W_a, v_a = parameters["W_a"], parameters["v_a"]
        size = query.shape[-1]
        hidden = np.tanh((query @ W_a[:size])[:, None, :] + (keys @ W_a[size:])[None, :, :])
        scores = hidden @ v_a
    else:
        hidden = np.tanh(
            (query @ parameters["W_q"])[:, None, :] + (keys @ parameters["W_k"])[None, :, :]
        )
        scores = hidden @ parameters["v"]
    exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("name", list(SCORES))
def test_make_attention_builds_the_score_of_its_name(name):
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 4)).astype("float32")
    keys = rng.normal(size=(3, 4)).astype("float32")
    layer = make_attention(name, units=5 if SCORES[name].takes_units else None)
    _, weights = layer([query[None], keys[None]], return_attention_scores=True)
    np.testing.assert_allclose(
        np.asarray(weights)[0], numpy_weights(name, query, keys, layer), rtol=1e-5, atol=1e-6
    )


def test_hidden_sizes_go_to_the_scores_and_alignments_that_take_them():
    assert make_attention("concat", units=7).units == 7
    assert make_attention("dot", "local-p", units=7).units == 7
    assert make_attention("general", units=7).units is None
    assert make_attention("dot", "local-m", window=3).window == 3


def test_the_table_loads_without_keras():
    code = (
        "import sys, attncli.scores, attncli.config.run, attncli.cli.demo_inputs;"
        "print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"



# A new score is one function that builds its layer and one line in the registry. The
# toy: Bahdanau's score weight-normalised (Salimans & Kingma 2016), the "normed
# Bahdanau" of the TensorFlow NMT tutorial, which `BahdanauAttention(normalize=True)`
# computes.


def make_normed_additive(units, alignment, window, **kwargs):
    from layers.bahdanau_attention import BahdanauAttention

    return BahdanauAttention(units, normalize=True, **kwargs)


@pytest.fixture
def normed_additive(monkeypatch):
    """The registry with the toy score, for one test (monkeypatch removes it after)."""
    monkeypatch.setitem(registry.SCORES, "normed_additive", registry.Score(
        "normed_additive", "score(q, k) = (g v / ‖v‖) · tanh(q W_q + k W_k + b)",
        "Salimans & Kingma 2016 on Bahdanau et al. 2015", make_normed_additive,
        projection="k W_k", takes_units=True))
    return "normed_additive"


def numpy_normed_additive(query, keys, W_q, W_k, v, g, b):
    """`(g v / ‖v‖)ᵀ tanh(W_q q_t + W_k k_s + b)` for every query and key."""
    hidden = np.tanh((query @ W_q)[:, None, :] + (keys @ W_k)[None, :, :] + b)
    return hidden @ (g * v / np.linalg.norm(v))


def test_a_registered_score_is_built_by_both_attentions(normed_additive):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(2, 4)).astype("float32")
    keys = rng.normal(size=(3, 4)).astype("float32")
    layer = make_attention(normed_additive, units=5)
    layer.build([(None, None, 4), (None, None, 4)])
    for weight in layer.weights:  # g and b start at constants: make every term count
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    _, weights = layer([query[None], keys[None]], return_attention_scores=True)
    parameters = {weight.name: np.asarray(weight, "float64") for weight in layer.weights}
    scores = numpy_normed_additive(query, keys, **parameters)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(weights)[0], expected / expected.sum(-1, keepdims=True),
                               rtol=1e-5, atol=1e-6)

    heads = MultiHeadAttention(2, 4, score=normed_additive, units=6)
    heads.build([(None, None, 8), (None, None, 8)])
    assert (heads.score_layer.units, heads.score_layer.normalize) == (6, True)
    assert MultiHeadAttention.from_config(heads.get_config()).score_name == normed_additive
    context = heads([rng.normal(size=(1, 3, 8)), rng.normal(size=(1, 5, 8))])
    assert tuple(context.shape) == (1, 3, 8)


def test_the_registry_is_left_as_it_was():
    assert "normed_additive" not in SCORES
    with pytest.raises(ValueError, match="Received: score=normed_additive"):
        MultiHeadAttention(2, 4, score="normed_additive")
