"""The table of score functions (attncli.scores) and everything that reads it name for name."""

import subprocess
import sys
import typing

import numpy as np
import pytest

from attncli.cli import demo_inputs
from attncli.config.model import ModelConfig
from attncli.errors import AttncliError
from attncli.scores import ALIGNMENTS, DEMO_SCORES, LOCAL_SCORES, SCORES, make_attention
from layers import luong_attention, multi_head_attention


def field_choices(cls, name):
    return typing.get_args(typing.get_type_hints(cls)[name])


def test_every_reader_spells_the_same_scores():
    assert field_choices(ModelConfig, "score") == tuple(SCORES)
    assert set(multi_head_attention.SCORES) == set(SCORES)
    assert DEMO_SCORES == (*SCORES, "local-m", "local-p")
    for name in DEMO_SCORES:
        assert demo_inputs.request_from_options(score=name).score == name
    with pytest.raises(AttncliError, match=f"choose one of: {', '.join(DEMO_SCORES)}$"):
        demo_inputs.request_from_options(score="scaled-dot")


def test_alignments_and_local_scores_are_luong_attentions():
    assert field_choices(ModelConfig, "alignment") == tuple(ALIGNMENTS)
    assert tuple(ALIGNMENTS) == luong_attention.ALIGNMENTS
    assert set(LOCAL_SCORES) == set(luong_attention.SCORES)


@pytest.mark.parametrize("name", list(SCORES))
def test_multi_head_attention_takes_units_for_the_same_scores(name):
    if SCORES[name].takes_units:
        layer = multi_head_attention.MultiHeadAttention(2, 4, score=name, units=3)
        assert layer.units == 3
    else:
        with pytest.raises(ValueError, match="Received: units=3"):
            multi_head_attention.MultiHeadAttention(2, 4, score=name, units=3)


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

