"""The length penalty's alpha and the sampling temperature as inputs of one trace: a
`Translator` made with `settings=True` answers, for any alpha and temperature, what one
made for that alpha or temperature answers; and a server keeps one trace for requests
that differ in those alone."""

import dataclasses
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from spa_eng_parts import SENTENCES, model_and_tokenizers
from typer.testing import CliRunner

from attncli.cli.app import app as cli
from attncli.config.search import Decoding, Sampling, SearchConfig
from attncli.model.saving import save_model
from attncli.search.translation import Translator
from attncli.serve.app import create_app
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

ALPHAS = [0.0, 0.6, 1.5]
TEMPERATURES = [0.3, 1.0, 2.5]
SEARCH = SearchConfig(beam_size=3, n_best=3, max_length_ratio=1.0, max_length_offset=4)


@pytest.fixture(scope="module")
def parts():
    return model_and_tokenizers()


def answers(translations):
    """Texts, tokens and scores of every hypothesis."""
    texts = [[h.text for h in t.hypotheses] for t in translations]
    tokens = [[h.tokens for h in t.hypotheses] for t in translations]
    scores = np.array([[h.score for h in t.hypotheses] for t in translations])
    return texts, tokens, scores


@pytest.mark.parametrize("beam_size", [1, 3])
def test_one_trace_scores_as_a_translator_made_for_each_alpha(parts, beam_size):
    search = SEARCH.adjusted(beam_size=beam_size, n_best=beam_size)
    traced = Translator(*parts, search, attention_weights=False, settings=True)
    scores = []
    for alpha in ALPHAS:
        texts, tokens, score = answers(traced.translate(SENTENCES, alpha=alpha))
        fixed = Translator(*parts, dataclasses.replace(search, alpha=alpha),
                           attention_weights=False)
        expected_texts, expected_tokens, expected_score = answers(fixed.translate(SENTENCES))
        assert texts == expected_texts and tokens == expected_tokens
        np.testing.assert_allclose(score, expected_score, rtol=1e-6)
        scores.append(score)
    assert traced.translate_graph.experimental_get_tracing_count() == 1
    # The alpha reached the graph: log P / lp(Y) differs with it.
    assert not np.allclose(scores[0], scores[2])


def test_one_trace_draws_as_a_translator_made_for_each_temperature(parts):
    search = SEARCH.adjusted(beam_size=1, n_best=1)
    sampling = Sampling("topp", top_p=0.9, samples=4)
    traced = Translator(*parts, Decoding(search, sampling), attention_weights=False,
                        settings=True)
    seeds = [3, 1, 4, 1]
    drawn = []
    for temperature in TEMPERATURES:
        found = answers(traced.translate(SENTENCES, seeds=seeds, alpha=0.6,
                                         temperature=temperature))
        fixed = Translator(*parts, Decoding(dataclasses.replace(search, alpha=0.6),
                                            dataclasses.replace(sampling, temperature=temperature)),
                           attention_weights=False)
        expected = answers(fixed.translate(SENTENCES, seeds=seeds))
        assert found[:2] == expected[:2]
        np.testing.assert_allclose(found[2], expected[2], rtol=1e-6)
        drawn.append(found[1])
    assert traced.translate_graph.experimental_get_tracing_count() == 1
    assert drawn[0] != drawn[2]  # the temperature reached the graph


def test_a_translator_without_settings_refuses_them(parts):
    translator = Translator(*parts, SEARCH, attention_weights=False)
    with pytest.raises(ValueError, match="settings=True only"):
        translator.translate(SENTENCES[:1], alpha=0.5)


@pytest.fixture(scope="module")
def served(parts, tmp_path_factory):
    directory = tmp_path_factory.mktemp("served-settings") / "model"
    save_model(directory, *parts, metadata={"decoding": {
        "beam_size": 3, "alpha": 0.6, "max_length_ratio": 1.0, "max_length_offset": 4}})
    registry = Registry([("tiny", [directory])], Limits())
    app = create_app(registry, registry.limits, load=registry.load)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        while client.get("/health").status_code != 200:
            time.sleep(0.1)
        yield client, registry, directory


def printed(directory, *options):
    result = CliRunner().invoke(cli, ["translate", str(directory), *SENTENCES, "--format",
                                      "tsv", *options])
    assert result.exit_code == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


@pytest.mark.parametrize("body, options", [
    ({"alpha": 0.0}, ["--alpha", "0"]),
    ({"alpha": 1.5}, ["--alpha", "1.5"]),
    ({"alpha": 0.9, "beam": 1}, ["--alpha", "0.9", "--beam", "1"]),
    ({"sampling": "random", "temperature": 0.4, "seed": 2, "n_best": 2},
     ["--sampling", "random", "--temperature", "0.4", "--seed", "2", "--n-best", "2"]),
    ({"sampling": "random", "temperature": 2.0, "seed": 2, "n_best": 2},
     ["--sampling", "random", "--temperature", "2.0", "--seed", "2", "--n-best", "2"]),
])
def test_requests_that_differ_in_alpha_or_temperature_share_a_trace(served, body, options):
    client, registry, directory = served
    answer = client.post("/translate", json={"texts": SENTENCES, **body})
    assert answer.status_code == 200, answer.text
    found = [(h["text"], h["score"]) for item in answer.json()["translations"]
             for h in item.get("hypotheses", [item])]
    expected = [(text, float(score)) for _, _, score, text in printed(directory, *options)]
    assert [text for text, _ in found] == [text for text, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-4)
    # The run's search and greedy search were traced at start-up and serve every alpha;
    # one sampling trace serves both temperatures; nothing else was made.
    model = registry.models["tiny"]
    assert len(model._started) == 2
    assert len(model._translators) <= 1
    assert all(traced.sampling is not None for traced, _ in model._translators)
