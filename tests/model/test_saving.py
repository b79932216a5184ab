"""Model directories: what is read back translates identically, in a fresh process
(the SavedModel export is tested in test_export.py)."""

import json
import os
import subprocess
import sys

import pytest
from attncli_runs import attncli
from cli_errors import one_line_error
from typer.testing import CliRunner

from spa_eng_parts import REPO, SENTENCES, model_and_tokenizers

from attncli.cli.app import app
from attncli.config.schema import ConfigError
from attncli.config.search import SearchConfig
from attncli.model import saving
from attncli.search.loading import load_model
from attncli.search.translation import Translator

BEAM = SearchConfig(beam_size=3, n_best=3, max_length_ratio=1.0, max_length_offset=4)
GREEDY = SearchConfig(beam_size=1, max_length_ratio=1.0, max_length_offset=4)


# A small Transformer: self-attention on both sides, post-norm, learned positions,
# cross-attention with the general score.
TRANSFORMER = dict(
    encoder="self-attention", decoder="self-attention", encoder_layers=2, decoder_layers=2,
    heads=2, norm="post", position_encoding="learned", max_positions=20, score="general",
)


@pytest.fixture(scope="module")
def parts():
    return model_and_tokenizers()


@pytest.fixture(scope="module", params=["rnn", "transformer"])
def any_parts(request):
    return model_and_tokenizers(**(TRANSFORMER if request.param == "transformer" else {}))


def summary(translations):
    """Plain data of `Translator.translate` results, exact floats as text."""
    return [
        [
            [hypothesis.text, repr(hypothesis.score), hypothesis.weights.tolist()]
            for hypothesis in translation.hypotheses
        ]
        for translation in translations
    ]


LOAD_AND_TRANSLATE = """
import json, sys
from attncli.config.search import SearchConfig
from attncli.search.loading import load_model
loaded = load_model(sys.argv[1])
results = {}
for name, settings in json.loads(sys.argv[2]).items():
    translations = loaded.translator(SearchConfig(**settings)).translate(json.loads(sys.argv[3]))
    results[name] = [
        [[h.text, repr(h.score), h.weights.tolist()] for h in t.hypotheses] for t in translations
    ]
print(json.dumps({"results": results, "metadata": loaded.metadata}))
"""


@pytest.mark.slow
def test_a_saved_model_translates_identically_in_a_fresh_process(any_parts, tmp_path):
    parts = any_parts
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(
        directory, model, source_tokenizer, target_tokenizer, metadata={"epochs": 0}
    )
    assert sorted(path.name for path in directory.iterdir()) == [
        "config.json", "model.weights.h5", "source.tokenizer.json", "source.vocab.txt",
        "target.tokenizer.json", "target.vocab.txt",
    ]
    expected = {
        name: summary(Translator(model, *parts[1:], search).translate(SENTENCES))
        for name, search in (("greedy", GREEDY), ("beam", BEAM))
    }
    settings = {"greedy": GREEDY.to_dict(), "beam": BEAM.to_dict()}
    completed = subprocess.run(
        [sys.executable, "-c", LOAD_AND_TRANSLATE, str(directory), json.dumps(settings),
         json.dumps(SENTENCES)],
        cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    output = json.loads(completed.stdout)
    assert output["metadata"] == {"epochs": 0}
    assert output["results"] == expected


def test_saving_over_a_model_replaces_it_whole(parts, tmp_path):
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 1})
    (directory / "stale.txt").write_text("from an older save")
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 2})
    assert not (directory / "stale.txt").exists()
    assert load_model(directory).metadata == {"run": 2}
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_a_failed_save_leaves_the_previous_model_untouched(parts, tmp_path):
    model, source_tokenizer, target_tokenizer = parts
    directory = tmp_path / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer, metadata={"run": 1})
    before = {path.name: path.read_bytes() for path in directory.iterdir()}
    with pytest.raises(TypeError):
        saving.save_model(
            directory, model, source_tokenizer, target_tokenizer, metadata={"bad": object()}
        )
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == before
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_loading_what_is_not_a_model_is_a_one_line_error(tmp_path):
    with pytest.raises(saving.ModelFileError, match="no config.json") as missing:
        load_model(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(saving.ModelFileError, match="not an attncli model") as other:
        load_model(tmp_path)
    for error in (missing, other):
        assert "\n" not in str(error.value)



def test_the_runs_search_is_read_with_the_model(parts, tmp_path):
    saving.save_model(tmp_path / "model", *parts, metadata={"decoding": BEAM.to_dict()})
    assert load_model(tmp_path / "model").search == BEAM
    saving.save_model(tmp_path / "plain", *parts)
    assert load_model(tmp_path / "plain").search == SearchConfig()


# A `decoding` section edited by hand: each is one line naming the file, from the
# loader and from the commands that read the run's search.
BAD_DECODING = [
    ({"beam": 4}, "decoding.beam: unknown key"),
    ({"beam_size": 0}, "beam_size must be >= 1. Received: beam_size=0"),
    ({"beam_size": "four"}, "decoding.beam_size must be an integer"),
]


@pytest.mark.parametrize("decoding, message", BAD_DECODING)
def test_a_bad_decoding_section_is_one_line_naming_the_file(parts, tmp_path, decoding, message):
    directory = tmp_path / "model"
    saving.save_model(directory, *parts, metadata={"decoding": decoding})
    named = f"{directory / 'config.json'}: "
    with pytest.raises(ConfigError) as error:
        load_model(directory)
    assert str(error.value).startswith(named) and message in str(error.value)
    for command in (["translate", directory, "hola"], ["export", directory, tmp_path / "out"]):
        result = CliRunner().invoke(app, [str(arg) for arg in command])
        line = one_line_error(result)
        assert line.startswith(f"Error: {named}") and message in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["translate", "export"])
def test_a_bad_decoding_section_is_one_line_from_the_installed_command(parts, tmp_path, command):
    directory = tmp_path / "model"
    saving.save_model(directory, *parts, metadata={"decoding": {"beam_size": 0}})
    arguments = [directory, "hola"] if command == "translate" else [directory, tmp_path / "out"]
    line = one_line_error(attncli(command, *arguments, cwd=tmp_path))
    assert line == (f"Error: {directory / 'config.json'}: decoding: beam_size must be >= 1. "
                    "Received: beam_size=0")
