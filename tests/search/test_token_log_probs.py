"""Each output token's probability: `"token_log_probs"` of POST /translate and POST
/inspect, and `attncli translate --format json --token-log-probs`.

The tiny run trained once a session is served in-process, with an ensemble of it and
a copy whose weights were moved at random. Each token's `log p(y_t | y_<t, x)` must sum
to the hypothesis's `log P = score x lp` (Wu et al. 2016, eq. 14: `lp = ((5 + |Y|) /
6) ** alpha`), and equal, token by token, a NumPy log-softmax of the logits of the
model's own teacher-forced training pass over the same tokens (for an ensemble, the log
of the mean of its members' softmaxes, as OpenNMT and fairseq combine them).
"""

import json
import shutil
import time

import h5py
import numpy as np
import pytest
from attncli_runs import trained  # noqa: F401 (a fixture)
from cli_errors import one_line_error
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from attncli.cli.app import app as cli
from attncli.cli.runs import model_directory
from attncli.data.vocabulary import PAD, START
from attncli.serve.app import create_app
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

pytestmark = [pytest.mark.slow]

TEXTS = ["tom is here.", "i like it.", "", "do you know him?", "it is cold today."]
SHORT = "he is tall."


@pytest.fixture(scope="module")
def models(trained, tmp_path_factory):  # noqa: F811 (the fixture)
    """The tiny run's model directory, and a copy of it with its weights moved."""
    own = model_directory(trained)
    member = tmp_path_factory.mktemp("token-log-probs") / "member"
    shutil.copytree(own, member)
    random = np.random.default_rng(0)
    with h5py.File(member / "model.weights.h5", "r+") as weights:
        arrays = []
        weights.visititems(lambda name, item: arrays.append(item)
                           if isinstance(item, h5py.Dataset) else None)
        for array in arrays:
            array[...] = array[...] * (1 + 0.5 * random.standard_normal(array.shape))
    return own, member


@pytest.fixture(scope="module")
def client(models):
    own, member = models
    registry = Registry([("tiny", [own]), ("pair", [own, member])], Limits())
    ended = []  # the load's error, None once every model is ready
    app = create_app(registry, registry.limits, load=registry.load, on_loaded=ended.append)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        while not ended:
            time.sleep(0.1)
        assert ended == [None]
        assert client.get("/health").status_code == 200
        yield client


@pytest.fixture(scope="module")
def loaded(models):
    from attncli.search.loading import load_model

    return [load_model(directory) for directory in models]


def run_alpha(client):
    [model] = [entry for entry in client.get("/models").json()["models"]
               if entry["name"] == "tiny"]
    return model["decoding"]["alpha"]


def penalty(length, alpha):
    return ((5 + length) / 6) ** alpha


def numpy_log_probs(loaded_models, text, tokens):
    """`log p(tokens[t] | tokens[:t], text)` of the models' mean distribution, from the
    logits of their training pass (`model((source_ids, target_in_ids))`), normalised
    here over the tokens a search may emit (all but padding and start)."""
    import tensorflow as tf

    first = loaded_models[0]
    translator = first.translator(first.search, attention_weights=False)
    _, source_ids = translator.source_ids(tf.constant([text]))
    ids = [first.target_tokenizer.vocabulary.id_of(token) for token in tokens]
    target_in_ids = tf.constant([[START] + ids[:-1]], tf.int32)
    probabilities = []
    for each in loaded_models:
        logits = np.asarray(each.model((source_ids, target_in_ids), training=False),
                            "float64")[0]
        logits[:, [PAD, START]] = -np.inf
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities.append(shifted / shifted.sum(axis=1, keepdims=True))
    mean = np.mean(probabilities, axis=0)
    return np.log(mean[np.arange(len(ids)), ids])


def translations(client, **body):
    answer = client.post("/translate", json={"texts": TEXTS, "token_log_probs": True, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def each_hypothesis(translated):
    for text, item in zip(TEXTS, translated):
        for hypothesis in item.get("hypotheses", [item]):
            if text.strip():
                yield text, hypothesis


def check_sums(translated, alpha):
    """Every value <= 0, one per token, summing to score x lp."""
    checked = 0
    for _, hypothesis in each_hypothesis(translated):
        values = np.array(hypothesis["token_log_probs"])
        assert len(values) == len(hypothesis["tokens"]) > 0
        assert np.all(values <= 0)
        np.testing.assert_allclose(
            values.sum(), hypothesis["score"] * penalty(len(values), alpha),
            rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("body", [
    {"beam": 1},
    {"beam": 3, "n_best": 3},
    {"beam": 3, "n_best": 3, "alpha": 1.2},  # alpha is an input of the same trace
])
def test_they_sum_to_the_searchs_log_p_greedy_and_beam(client, body):
    translated = translations(client, **body)
    check_sums(translated, body.get("alpha", run_alpha(client)))
    if "n_best" in body:
        for item in translated:
            best = item["hypotheses"][0] if item["hypotheses"] else {}
            assert item.get("token_log_probs") == best.get("token_log_probs")
    plain = client.post("/translate", json={"texts": TEXTS, **body}).json()["translations"]
    assert [item["text"] for item in plain] == [item["text"] for item in translated]
    assert not any("token_log_probs" in item or "tokens" in item for item in plain)


def test_each_token_is_the_models_teacher_forced_log_softmax(client, loaded):
    """Each hypothesis of a beam, token by token: the back-pointers carry the right
    terms, not only the right sums."""
    translated = translations(client, beam=3, n_best=3)
    for text, hypothesis in each_hypothesis(translated):
        expected = numpy_log_probs(loaded[:1], text, hypothesis["tokens"])
        np.testing.assert_allclose(hypothesis["token_log_probs"], expected,
                                   rtol=1e-4, atol=1e-5)
    [greedy] = client.post("/translate", json={"texts": [SHORT], "beam": 1,
                                               "token_log_probs": True}).json()["translations"]
    np.testing.assert_allclose(greedy["token_log_probs"],
                               numpy_log_probs(loaded[:1], SHORT, greedy["tokens"]),
                               rtol=1e-4, atol=1e-5)


def test_an_ensembles_are_of_its_members_mean_distribution(client, loaded):
    translated = translations(client, model="pair", beam=2, n_best=2)
    check_sums(translated, run_alpha(client))
    for text, hypothesis in each_hypothesis(translated):
        np.testing.assert_allclose(hypothesis["token_log_probs"],
                                   numpy_log_probs(loaded, text, hypothesis["tokens"]),
                                   rtol=1e-4, atol=1e-5)


def test_a_sampled_tokens_are_under_the_model_itself_not_the_tempered_cut(client, loaded):
    translated = translations(client, sampling="topk:3", temperature=2.5, n_best=2, seed=7)
    check_sums(translated, run_alpha(client))
    for text, hypothesis in each_hypothesis(translated):
        np.testing.assert_allclose(hypothesis["token_log_probs"],
                                   numpy_log_probs(loaded[:1], text, hypothesis["tokens"]),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("value", [1, "true", None])
def test_the_request_field_is_a_strict_boolean(client, value):
    answer = client.post("/translate", json={"texts": TEXTS, "token_log_probs": value})
    assert answer.status_code == 422
    assert answer.json()["error"].startswith("token_log_probs: Input should be a valid boolean")


def test_inspect_gives_one_per_row_of_the_cross_attention(client, loaded):
    own = client.post("/inspect", json={"text": SHORT, "beam": 1}).json()
    given = client.post("/inspect", json={"text": SHORT, "reference": "he is very tall ."})
    assert given.status_code == 200, given.text
    given = given.json()
    for view in (own, given):
        [cross] = [entry for entry in view["attentions"] if entry["attention"] == "cross"]
        values = view["token_log_probs"]
        assert len(values) == len(cross["rows"]) == len(cross["layers"][0]["heads"][0])
        assert cross["rows"] == view["hypotheses"][view["shown"]]["tokens"]
        assert all(value <= 0 for value in values)
        np.testing.assert_allclose(values, numpy_log_probs(loaded[:1], SHORT, cross["rows"]),
                                   rtol=1e-4, atol=1e-5)
    shown = own["hypotheses"][own["shown"]]
    np.testing.assert_allclose(sum(own["token_log_probs"]),
                               shown["score"] * penalty(len(shown["tokens"]),
                                                        own["search"]["alpha"]),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sum(given["token_log_probs"]), given["reference"]["log_prob"],
                               rtol=1e-6)


def test_translate_json_carries_them_under_its_flag(client, models):
    own, _ = models
    result = CliRunner().invoke(cli, ["translate", str(own), *TEXTS, "--beam", "3",
                                      "--n-best", "3", "--format", "json",
                                      "--token-log-probs"])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    served = translations(client, beam=3, n_best=3)
    for line, item in zip(lines, served):
        assert len(line["hypotheses"]) == len(item["hypotheses"])
        for printed, answered in zip(line["hypotheses"], item["hypotheses"]):
            assert printed["tokens"] == answered["tokens"]
            np.testing.assert_allclose(printed["token_log_probs"],
                                       answered["token_log_probs"], atol=1e-6)


def test_translate_refuses_the_flag_without_json(models):
    own, _ = models
    result = CliRunner().invoke(cli, ["translate", str(own), SHORT, "--token-log-probs"])
    assert "--token-log-probs adds a field" in one_line_error(result)
