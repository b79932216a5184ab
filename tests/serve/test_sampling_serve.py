"""POST /translate with "prefix", "sampling", "temperature" and "seed": the answers are
`attncli translate`'s for the same settings (a seeded model saved as a run saves it,
served in-process), and settings that do not fit are one 422 line."""

import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from spa_eng_parts import SENTENCES, model_and_tokenizers
from typer.testing import CliRunner

from attncli.cli.app import app as cli
from attncli.data.vocabulary import END
from attncli.model.saving import save_model
from attncli.serve.app import create_app
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry


@pytest.fixture(scope="module")
def model_directory(tmp_path_factory):
    model, source_tokenizer, target_tokenizer = model_and_tokenizers()
    bias = model.decoder.output_layer.bias
    bias.assign(bias.numpy() + 0.5 * (np.arange(bias.shape[0]) == END))
    directory = tmp_path_factory.mktemp("serve-sampling") / "model"
    save_model(directory, model, source_tokenizer, target_tokenizer,
               metadata={"decoding": {"beam_size": 3, "max_length_ratio": 1.0,
                                      "max_length_offset": 4}})
    return directory


@pytest.fixture(scope="module")
def client(model_directory):
    registry = Registry([("tiny", [model_directory])], Limits())
    app = create_app(registry, registry.limits, load=registry.load)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        while client.get("/health").status_code != 200:
            time.sleep(0.1)
        yield client


def translated(model_directory, *options):
    result = CliRunner().invoke(cli, ["translate", str(model_directory), *SENTENCES, *options])
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("body, options", [
    ({"prefix": "tom is"}, ["--prefix", "tom is"]),
    ({"prefix": "we", "beam": 1}, ["--prefix", "we", "--beam", "1"]),
    ({"sampling": "topk:5", "seed": 4}, ["--sampling", "topk:5", "--seed", "4"]),
    ({"sampling": "topp:0.8", "temperature": 1.5, "prefix": "it", "n_best": 2},
     ["--sampling", "topp:0.8", "--temperature", "1.5", "--prefix", "it", "--n-best", "2"]),
])
def test_the_api_answers_as_translate_prints(client, model_directory, body, options):
    answer = client.post("/translate", json={"texts": SENTENCES, **body})
    assert answer.status_code == 200, answer.text
    translations = answer.json()["translations"]
    lines = translated(model_directory, *options)
    if "n_best" in body:
        texts = [" ||| ".join(h["text"] for h in item["hypotheses"]) for item in translations]
    else:
        texts = [item["text"] for item in translations]
    assert texts == lines
    # A text draws the same alone as among others.
    alone = client.post("/translate", json={"texts": SENTENCES[2:3], **body}).json()
    assert alone["translations"][0] == translations[2]


@pytest.mark.parametrize("body, message", [
    ({"prefix": "qwxz"}, "prefix: the prefix 'qwxz' has no token of the model's target"),
    ({"sampling": "topk:0"}, "topk:K needs an integer K >= 1"),
    ({"sampling": "random", "beam": 3}, "beam 3 and sampling: sampling draws each"),
    ({"sampling": "random", "n_best": 0}, "n_best must be in [1, 16] (--max-beam)"),
    ({"sampling": "random", "n_best": 17}, "n_best must be in [1, 16] (--max-beam)"),
    # A beam with sampling is the first thing wrong, whatever n_best asks.
    ({"sampling": "random", "beam": 3, "n_best": 17}, "beam 3 and sampling: sampling draws"),
    ({"temperature": 0.5}, "temperature applies to sampling"),
    ({"seed": 1}, "seed applies to sampling"),
    ({"sampling": "random", "seed": -1}, "seed must be in [0, 2**63 - 1]"),
    ({"sampling": 5}, "sampling: Input should be a valid string"),
])
def test_settings_that_do_not_fit_are_422(client, body, message):
    answer = client.post("/translate", json={"texts": SENTENCES, **body})
    assert answer.status_code == 422
    assert message in answer.json()["error"]
